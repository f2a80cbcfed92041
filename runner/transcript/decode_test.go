package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

// checkFastDecode fails t if fastDecode accepts payload but encoding/json
// rejects it or decodes something else.
func checkFastDecode(t *testing.T, kind EntryKind, payload []byte) (accepted bool) {
	t.Helper()
	fast, ok := fastDecode(kind, string(payload))
	if !ok {
		return false
	}
	// Validation is not the fast decoder's business: compare the raw
	// decoding, as encoding/json does it.
	ref, err := reference(kind, payload)
	if err != nil {
		t.Fatalf("fast decoder accepted %s payload %q, encoding/json rejects it: %v", kind, payload, err)
	}
	if diff := cmp.Diff(ref, fast); diff != "" {
		t.Fatalf("fast decoding of %s payload %q differs from encoding/json's (-json +fast):\n%s", kind, payload, diff)
	}
	return true
}

// reference is encoding/json's decoding without validation.
func reference(kind EntryKind, data []byte) (Payload, error) {
	var p Payload
	switch kind {
	case KindUserMessage:
		p = &UserMessage{}
	case KindAssistantMessage:
		p = &AssistantMessage{}
	case KindToolResult:
		p = &ToolResult{}
	case KindToolCall:
		p = &ToolCall{}
	case KindToolCompletion:
		p = &ToolCompletion{}
	case KindProviderChange:
		p = &ProviderChange{}
	case KindModelChange:
		p = &ModelChange{}
	case KindPersonaChange:
		p = &PersonaChange{}
	case KindReasoningChange:
		p = &ReasoningChange{}
	case KindUsage:
		p = &Usage{}
	case KindCheckpoint:
		p = &Checkpoint{}
	default:
		return nil, fmt.Errorf("kind %q has no fast decoder", kind)
	}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, err
	}
	switch p := p.(type) {
	case *UserMessage:
		return *p, nil
	case *AssistantMessage:
		return *p, nil
	case *ToolResult:
		return *p, nil
	case *ToolCall:
		return *p, nil
	case *ToolCompletion:
		return *p, nil
	case *ProviderChange:
		return *p, nil
	case *ModelChange:
		return *p, nil
	case *PersonaChange:
		return *p, nil
	case *ReasoningChange:
		return *p, nil
	case *Usage:
		return *p, nil
	case *Checkpoint:
		return *p, nil
	}
	panic("unreachable")
}

// fastSeeds are payloads at the edges of what the fast decoder takes; the
// second column says whether it must take them (false: it may hand them to
// encoding/json, which may or may not accept them).
var fastSeeds = []struct {
	kind    EntryKind
	payload string
	fast    bool
}{
	{KindUserMessage, `{"content":[{"type":"text","text":"hi"}]}`, true},
	{KindUserMessage, ` { "content" : [ { "type" : "text" , "text" : "hi" } ] } ` + "\n\t\r", true},
	{KindUserMessage, `{"content":[]}`, true},
	{KindUserMessage, `{"content":null}`, true},
	{KindUserMessage, `{"content":[null,{"type":"text"}]}`, true},
	{KindUserMessage, `{}`, true},
	{KindUserMessage, `{"content":[{"type":"image","media_type":"image/png","data":"iVBORw0KGgo="}]}`, true},
	{KindUserMessage, `{"content":[{"type":"image","data":""}]}`, true},
	{KindUserMessage, `{"content":[{"type":"image","data":null}]}`, true},
	{KindUserMessage, `{"content":[{"type":"image","data":"iVBOR\nw0KGgo="}]}`, false},
	{KindUserMessage, `{"content":[{"type":"image","data":"not base64"}]}`, false},
	{KindUserMessage, `{"content":[{"type":"text","text":"tab\tquote\"slash\/back\\\\nl\nu\u00e9\u003c\ud83d\ude00"}]}`, true},
	{KindUserMessage, `{"content":[{"type":"text","text":"lone \ud800 high, lone \udc00 low, \ud800\u0041 unpaired, \ud800\ud800\udc00"}]}`, true},
	{KindUserMessage, `{"content":[{"type":"text","text":"caf` + "\xc3\xa9" + ` and bad ` + "\xff\xfe" + ` utf8 ` + "\xed\xa0\x80" + `"}]}`, true},
	{KindUserMessage, `{"content":[{"type":"text","text":"` + "\xe2\x82" + `"}]}`, true},
	{KindUserMessage, `{"content":[{"type":"text","text":"nul \u0000 and \b\f\r"}]}`, true},
	{KindUserMessage, `{"content":[{"type":"text","text":"raw control ` + "\x01" + `"}]}`, false},
	{KindUserMessage, `{"content":[{"type":"text","text":"bad escape \x"}]}`, false},
	{KindUserMessage, `{"content":[{"type":"text","text":"bad escape \'"}]}`, false},
	{KindUserMessage, `{"content":[{"type":"text","text":"short \u12"}]}`, false},
	{KindUserMessage, `{"content":[{"type":"text","text":"unterminated}]}`, false},
	{KindUserMessage, `{"content":[{"type":"text","text":"x","text":"y"}]}`, false},
	{KindUserMessage, `{"content":[{"Type":"text"}]}`, false},
	{KindUserMessage, `{"CONTENT":[{"type":"text"}]}`, false},
	{KindUserMessage, `{"content":[{"type":"text","\u0074ext":"x"}]}`, false},
	{KindUserMessage, `{"content":[{"type":"text","K":"kelvin"}]}`, true},
	{KindUserMessage, `{"content":[{"type":"text","tеxt":"cyrillic e"}]}`, false},
	{KindUserMessage, `{"content":[{"type":"text","extra":{"a":[1,-2.5e+3,true,false,null,"s\n",{}],"b":[]}}]}`, true},
	{KindUserMessage, `{"content":[{"type":"text"}],"future":1}`, true},
	{KindUserMessage, `{"content":[{"type":"text"}],}`, false},
	{KindUserMessage, `{"content":[{"type":"text"},]}`, false},
	{KindUserMessage, `{"content":[{"type":"text"}]} trailing`, false},
	{KindUserMessage, `{"content":[{"type":"text"}]}{}`, false},
	{KindUserMessage, `null`, false},
	{KindUserMessage, `[]`, false},
	{KindUserMessage, ``, false},
	{KindUserMessage, `{"content":[{"type":1}]}`, false},
	{KindUserMessage, `{"content":{"type":"text"}}`, false},
	{KindAssistantMessage, `{"content":[{"type":"thinking","text":"hm","signature":"s"},{"type":"tool_use","id":"c1","name":"bash","input":{"command":"ls"}}],"stop_reason":"tool_use"}`, true},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","id":"c1","name":"bash","input": { "a" : [ 1 , 2 ] } }]}`, true},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","input":null}]}`, true},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","input":"str\u00e9"}]}`, true},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","input":-0.5E-7}]}`, true},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","input":01}]}`, false},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","input":{"a":1,}}]}`, false},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","input":{"a" 1}}]}`, false},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","input":[1 2]}]}`, false},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","input":tru}]}`, false},
	{KindAssistantMessage, `{"content":[{"type":"tool_use","input":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}]}`, false},
	{KindAssistantMessage, `{"stop_reason":"end_turn","content":[{"type":"text","text":"done"}]}`, true},
	{KindToolResult, `{"call_id":"c1","content":[{"type":"text","text":"ok"}],"is_error":true}`, true},
	{KindToolResult, `{"call_id":"c1","content":[{"type":"text","text":"ok"}],"is_error":false}`, true},
	{KindToolResult, `{"call_id":"c1","is_error":null}`, true},
	{KindToolResult, `{"call_id":"c1","is_error":"true"}`, false},
	{KindToolResult, `{"call_id":"c1","is_error":1}`, false},
	{KindToolCall, `{"call_id":"c1","name":"bash","input":{"command":"ls"}}`, true},
	{KindToolCall, `{"call_id":7}`, false},
	{KindToolCompletion, `{"call_id":"c1","status":"ok","duration_ns":1000}`, true},
	{KindToolCompletion, `{"call_id":"c1","status":"error","duration_ns":-0,"error":"boom"}`, true},
	{KindToolCompletion, `{"call_id":"c1","status":"ok","duration_ns":9223372036854775807}`, true},
	{KindToolCompletion, `{"call_id":"c1","status":"ok","duration_ns":9223372036854775808}`, false},
	{KindToolCompletion, `{"call_id":"c1","status":"ok","duration_ns":1.5}`, false},
	{KindToolCompletion, `{"call_id":"c1","status":"ok","duration_ns":1e3}`, false},
	{KindToolCompletion, `{"call_id":"c1","status":"ok","duration_ns":+1}`, false},
	{KindToolCompletion, `{"call_id":"c1","status":"ok","duration_ns":-}`, false},
	{KindProviderChange, `{"provider":"openai"}`, true},
	{KindModelChange, `{"model":"m"}`, true},
	{KindPersonaChange, `{"persona":""}`, true},
	{KindReasoningChange, `{"effort":"high"}`, true},
	{KindUsage, `{"input_tokens":1,"output_tokens":2,"cache_read_tokens":3,"cache_write_tokens":4,"reasoning_tokens":5,"requests":6,"cost_usd":0.5,"context_tokens":7}`, true},
	{KindUsage, `{"cost_usd":1e308}`, true},
	{KindUsage, `{"cost_usd":1e309}`, false},
	{KindUsage, `{"cost_usd":-0.0000000000000000000000001e-300}`, true},
	{KindUsage, `{"cost_usd":1.}`, false},
	{KindUsage, `{"cost_usd":.5}`, false},
	{KindUsage, `{"cost_usd":1e}`, false},
	{KindUsage, `{"input_tokens":1} trailing`, false},
	{KindCheckpoint, `{"turn":3,"outcome":"completed","result":"all \"done\""}`, true},
}

func TestFastDecodeSeeds(t *testing.T) {
	t.Parallel()
	for _, s := range fastSeeds {
		t.Run(string(s.kind), func(t *testing.T) {
			t.Parallel()
			if accepted := checkFastDecode(t, s.kind, []byte(s.payload)); s.fast && !accepted {
				t.Errorf("fast decoder refused %s payload %q", s.kind, s.payload)
			}
		})
	}
}

// TestFastDecodeTakesEncodedPayloads checks that what EncodePayload writes
// for the common kinds takes the fast path: were it to fall back to
// encoding/json, resuming would still work, only slowly.
func TestFastDecodeTakesEncodedPayloads(t *testing.T) {
	t.Parallel()
	text := "output:\n\tline with \"quotes\", <html> & \\backslashes\\, unicode é ✓ 😀, \u2028, \x00 and \x1f\n"
	payloads := []Payload{
		UserMessage{Content: []Block{{Type: BlockText, Text: text}, {Type: BlockImage, MediaType: "image/png", Data: []byte{0, 1, 2, 0xff}}}},
		UserMessage{},
		UserMessage{Content: []Block{}},
		AssistantMessage{Content: []Block{
			{Type: BlockThinking, Text: text, Signature: "sig=="},
			{Type: BlockText, Text: text},
			{Type: BlockToolUse, ID: "c1", Name: "bash", Input: json.RawMessage(`{"command":"go test ./...","env":{"A":[1,2.5,null,true]}}`)},
			{Type: "future_block_type"},
		}, StopReason: "tool_use"},
		ToolResult{CallID: "c1", Content: []Block{{Type: BlockText, Text: text}}, IsError: true},
		ToolCall{CallID: "c1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
		ToolCall{CallID: "c1", Name: "bash"},
		ToolCompletion{CallID: "c1", Status: ToolTimeout, Duration: 1<<63 - 1, Error: text},
		ProviderChange{Provider: "anthropic"},
		ModelChange{Model: "claude"},
		PersonaChange{},
		ReasoningChange{Effort: "high"},
		Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5, Requests: 6, CostUSD: 0.1 + 0.2, ContextTokens: 7},
		Usage{CostUSD: 1e-300},
		Checkpoint{Turn: 3, Outcome: "completed", Result: text},
	}
	for _, p := range payloads {
		data, err := EncodePayload(p)
		if err != nil {
			t.Fatal(err)
		}
		if !checkFastDecode(t, p.EntryKind(), data) {
			t.Errorf("fast decoder refused the encoding of %#v: %s", p, data)
		}
		got, err := DecodeEntry(uuid.Nil, 1, p.EntryKind(), string(data))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(p, got, cmp.Comparer(func(a, b json.RawMessage) bool { return string(a) == string(b) })); diff != "" {
			t.Errorf("round trip of %s (-want +got):\n%s", p.EntryKind(), diff)
		}
	}
}

// FuzzFastDecode holds the fast decoder to encoding/json's results: what it
// accepts, encoding/json must accept and decode to the same payload. It must
// also take the canonical encoding of whatever encoding/json accepts.
func FuzzFastDecode(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add(string(s.kind), []byte(s.payload))
	}
	f.Fuzz(func(t *testing.T, kind string, payload []byte) {
		k := EntryKind(kind)
		checkFastDecode(t, k, payload)
		ref, err := reference(k, payload)
		if err != nil {
			return
		}
		canonical, err := json.Marshal(ref)
		if err != nil {
			t.Fatal(err)
		}
		// Values nested deeper than the fast decoder follows are left to
		// encoding/json, canonical or not.
		if !checkFastDecode(t, k, canonical) && nesting(t, canonical) < maxSkipDepth {
			t.Fatalf("fast decoder refused the canonical encoding %s of %q", canonical, payload)
		}
	})
}

// nesting returns the deepest nesting of arrays and objects in data.
func nesting(t *testing.T, data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest
		}
		if err != nil {
			t.Fatal(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// BenchmarkDecodeEntry decodes the payloads of one round of a coding
// session (see BenchmarkLoad) with the fast decoder and with encoding/json
// alone.
func BenchmarkDecodeEntry(b *testing.B) {
	output := strings.Repeat("ok  \tgithub.com/aerie-run/aerie/runner/journal\t0.123s\n", 6)
	input := json.RawMessage(`{"command":"go test -run TestJournal/7 ./runner/journal/"}`)
	round := []Payload{
		AssistantMessage{Content: []Block{
			{Type: BlockText, Text: "Let me run the test again to see whether it still fails."},
			{Type: BlockToolUse, ID: "call-7", Name: "bash", Input: input},
		}, StopReason: "tool_use"},
		ToolCall{CallID: "call-7", Name: "bash", Input: input},
		ToolResult{CallID: "call-7", Content: []Block{{Type: BlockText, Text: output}}},
		ToolCompletion{CallID: "call-7", Status: ToolOK, Duration: 1234567},
		Usage{InputTokens: 7000, OutputTokens: 700, Requests: 7},
	}
	type stored struct {
		kind    EntryKind
		payload string
	}
	var payloads []stored
	for _, p := range round {
		data, err := EncodePayload(p)
		if err != nil {
			b.Fatal(err)
		}
		payloads = append(payloads, stored{p.EntryKind(), string(data)})
	}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, p := range payloads {
				if _, err := DecodeEntry(uuid.Nil, 1, p.kind, p.payload); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, p := range payloads {
				if _, err := decodePayload(p.kind, []byte(p.payload)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestFastDecodeCopiesShortStrings checks that a short string decoded from
// a long payload is a copy: kept on its own (a call id in a map), it must not
// keep the payload alive.
func TestFastDecodeCopiesShortStrings(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("plain output without escapes ", 100)
	data, err := EncodePayload(ToolResult{CallID: "call-1", Content: []Block{{Type: BlockText, Text: long}}})
	if err != nil {
		t.Fatal(err)
	}
	payload := string(data)
	p, ok := fastDecode(KindToolResult, payload)
	if !ok {
		t.Fatalf("fast decoder refused %s", payload)
	}
	r := p.(ToolResult)
	within := func(s string) bool {
		start := uintptr(unsafe.Pointer(unsafe.StringData(payload)))
		at := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return start <= at && at < start+uintptr(len(payload))
	}
	if within(r.CallID) {
		t.Errorf("call id %q shares the payload's memory", r.CallID)
	}
	if within(string(r.Content[0].Type)) {
		t.Errorf("block type %q shares the payload's memory", r.Content[0].Type)
	}
	// The text is most of the payload: sharing it saves a copy and pins
	// little more than the text itself.
	if !within(r.Content[0].Text) {
		t.Errorf("the long text was copied")
	}
}
