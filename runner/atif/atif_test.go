package atif

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/atif/atiftest"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var (
	sessionID = uuid.MustParse("0b6f3c2e-5d1a-4c8e-9f2b-7a1d3e5c9b01")
	childID   = uuid.MustParse("5c2e8a41-9b7d-4f30-8e6a-1d4b7c9e2f03")
	sourceID  = uuid.MustParse("9e1d4c7b-2a5f-4b83-a6c0-3f8e1b5d7a02")
	started   = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
)

// stream builds an entry stream the way the journal numbers it: from 1,
// one second apart.
type stream struct{ entries []transcript.Entry }

func (s *stream) add(payloads ...transcript.Payload) {
	for _, p := range payloads {
		seq := int64(len(s.entries) + 1)
		s.entries = append(s.entries, transcript.Entry{
			Seq:       seq,
			Payload:   p,
			CreatedAt: started.Add(time.Duration(seq) * time.Second).Add(250 * time.Microsecond),
		})
	}
}

func text(s string) transcript.Block { return transcript.Block{Type: transcript.BlockText, Text: s} }

func use(id, name, input string) transcript.Block {
	return transcript.Block{Type: transcript.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(input)}
}

func user(s string) transcript.UserMessage {
	return transcript.UserMessage{Content: []transcript.Block{text(s)}}
}

func result(id, out string, isErr bool) transcript.ToolResult {
	return transcript.ToolResult{CallID: id, Content: []transcript.Block{text(out)}, IsError: isErr}
}

// exchange is one tool call as the agent journals it: the call, its result
// and its completion.
func exchange(id, name string, res transcript.ToolResult, status transcript.ToolStatus, d time.Duration, errText string) []transcript.Payload {
	return []transcript.Payload{
		transcript.ToolCall{CallID: id, Name: name},
		res,
		transcript.ToolCompletion{CallID: id, Status: status, Duration: d, Error: errText},
	}
}

var testTools = []provider.Tool{
	{Name: "bash", Description: "Run a shell command in the workspace.", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
	{Name: "read", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "edit", Description: "Replace text in a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"}},"required":["path","old","new"]}`)},
	{Name: "gofmt", Description: "Format Go files (run by a hook)."},
}

const testPrompt = "You are aerie, a coding agent. Work in /workspace. Internal note: ticket PRIV-4471."

func testSession() SessionRecord {
	return SessionRecord{
		ID:        sessionID,
		Kind:      "headless",
		Label:     "fix-parse",
		RootID:    sessionID,
		Settings:  transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5", Reasoning: "medium"},
		CreatedAt: started,
	}
}

// realisticEntries is a two-turn headless session: tool calls with an error
// result, a call with malformed arguments, a hook's own tool call, a model
// and reasoning change, a compaction, a subagent and usage throughout.
func realisticEntries() []transcript.Entry {
	s := &stream{}
	s.add(
		user("The tests in ./pkg/parse fail since yesterday's commit. Find out why and fix it."),
		transcript.AssistantMessage{Content: []transcript.Block{
			{Type: transcript.BlockThinking, Text: "Run the tests first, then read the parser.", Signature: "sig-1"},
			text("Let me look at the failing tests first."),
			use("toolu_01", "bash", `{"command": "go test ./pkg/parse/..."}`),
			use("toolu_02", "read", `{"path":"pkg/parse/parse.go"}`),
		}, StopReason: "tool_use"},
		transcript.Usage{InputTokens: 2400, OutputTokens: 180, CacheWriteTokens: 2200, ReasoningTokens: 40, Requests: 1, CostUSD: 0.0123, ContextTokens: 2580},
	)
	s.add(exchange("toolu_01", "bash", result("toolu_01", "--- FAIL: TestParseEmpty (0.00s)\n    parse_test.go:14: Parse(\"\") = <nil>, want error\nFAIL\nexit status 1", false), transcript.ToolOK, 1234*time.Millisecond, "")...)
	s.add(exchange("toolu_02", "read", result("toolu_02", "open pkg/parse/parse.go: no such file or directory", true), transcript.ToolError, 3*time.Millisecond, "open pkg/parse/parse.go: no such file or directory")...)
	s.add(
		transcript.AssistantMessage{Content: []transcript.Block{
			text("The file is named parser.go; reading it."),
			use("toolu_03", "read", `{"path":"pkg/parse/parser.go"}`),
		}, StopReason: "tool_use"},
		transcript.Usage{InputTokens: 5100, OutputTokens: 260, CacheReadTokens: 2200, CacheWriteTokens: 2200, ReasoningTokens: 40, Requests: 2, CostUSD: 0.0161, ContextTokens: 2900},
	)
	s.add(exchange("toolu_03", "read", result("toolu_03", "package parse\n\nfunc Parse(s string) (*Node, error) {\n\tif s == \"\" {\n\t\treturn nil, nil\n\t}\n\treturn parse(s)\n}", false), transcript.ToolOK, 2*time.Millisecond, "")...)
	s.add(
		transcript.AssistantMessage{Content: []transcript.Block{
			text("`Parse` returns a nil error for empty input; the test expects ErrEmpty. I'll restore the check."),
			use("toolu_04", "edit", `{"path":"pkg/parse/parser.go","old":"return nil, nil","new":"return nil, ErrEmpty"}`),
		}, StopReason: "tool_use"},
		transcript.Usage{InputTokens: 8300, OutputTokens: 420, CacheReadTokens: 5000, CacheWriteTokens: 2500, ReasoningTokens: 40, Requests: 3, CostUSD: 0.0215, ContextTokens: 3300},
	)
	s.add(exchange("toolu_04", "edit", result("toolu_04", "edited pkg/parse/parser.go", false), transcript.ToolOK, 4*time.Millisecond, "")...)
	s.add(
		transcript.AssistantMessage{Content: []transcript.Block{text("Fixed: `Parse` returns ErrEmpty for empty input again.")}, StopReason: "end_turn"},
		transcript.Usage{InputTokens: 11800, OutputTokens: 470, CacheReadTokens: 8300, CacheWriteTokens: 2500, ReasoningTokens: 40, Requests: 4, CostUSD: 0.0248, ContextTokens: 3400},
		transcript.Checkpoint{Turn: 1, Outcome: "completed", Result: "Fixed: `Parse` returns ErrEmpty for empty input again."},
		transcript.ModelChange{Model: "claude-opus-4-1"},
		transcript.ReasoningChange{Effort: "high"},
		user("Also add a test for whitespace-only input."),
		transcript.AssistantMessage{Content: []transcript.Block{
			// The response hit max_tokens inside the arguments: the agent
			// keeps the truncated text as a JSON string.
			use("toolu_05", "edit", `"{\"path\": \"pkg/parse/parser_test.go\", \"old\": "`),
		}, StopReason: "max_tokens"},
		transcript.Usage{InputTokens: 15600, OutputTokens: 4566, CacheReadTokens: 11700, CacheWriteTokens: 2500, ReasoningTokens: 40, Requests: 5, CostUSD: 0.3412, ContextTokens: 7900},
	)
	s.add(exchange("toolu_05", "edit", result("toolu_05", "invalid arguments: unexpected end of JSON input", true), transcript.ToolError, 0, "invalid arguments: unexpected end of JSON input")...)
	s.add(exchange("hook-post-edit-1", "gofmt", result("hook-post-edit-1", "formatted 1 file", false), transcript.ToolOK, 85*time.Millisecond, "")...)
	s.add(
		transcript.Compaction{
			Replacement: []transcript.Block{text("Summary: Parse's empty-input check was restored (ErrEmpty). The user asked for a whitespace-only test; the first edit attempt had truncated arguments.")},
			FirstKept:   25,
			Provenance:  transcript.Provenance{Trigger: "auto", Provider: "anthropic", Model: "claude-haiku-4-5", Messages: 19, TokensBefore: 7900, TokensAfter: 1350},
		},
		transcript.Usage{InputTokens: 23500, OutputTokens: 4800, CacheReadTokens: 11700, CacheWriteTokens: 2500, ReasoningTokens: 40, Requests: 6, CostUSD: 0.3501, ContextTokens: 1350},
		transcript.AssistantMessage{Content: []transcript.Block{
			text("Adding the test."),
			use("toolu_06", "edit", `{"path":"pkg/parse/parser_test.go","old":"func TestParseEmpty","new":"func TestParseWhitespace(t *testing.T) {\n\tif _, err := Parse(\"  \"); err != ErrEmpty {\n\t\tt.Fatal(err)\n\t}\n}\n\nfunc TestParseEmpty"}`),
		}, StopReason: "tool_use"},
		transcript.Usage{InputTokens: 25200, OutputTokens: 4950, CacheReadTokens: 11700, CacheWriteTokens: 3900, ReasoningTokens: 40, Requests: 7, CostUSD: 0.3822, ContextTokens: 1700},
	)
	s.add(exchange("toolu_06", "edit", result("toolu_06", "edited pkg/parse/parser_test.go", false), transcript.ToolOK, 3*time.Millisecond, "")...)
	s.add(
		transcript.AssistantMessage{Content: []transcript.Block{text("Added TestParseWhitespace; a subagent ran the suite.")}, StopReason: "end_turn"},
		transcript.Usage{InputTokens: 27000, OutputTokens: 5010, CacheReadTokens: 13300, CacheWriteTokens: 3900, ReasoningTokens: 40, Requests: 8, CostUSD: 0.3911, ContextTokens: 1790},
		transcript.SubagentOutcome{Session: childID, Outcome: "completed", Summary: "Ran the full test suite: 212 passed.", Usage: &transcript.Usage{InputTokens: 3000, OutputTokens: 150, Requests: 2, CostUSD: 0.004}},
		transcript.Checkpoint{Turn: 2, Outcome: "completed"},
	)
	return s.entries
}

func realisticInput() TrajectoryInput {
	return TrajectoryInput{
		Session:      testSession(),
		Entries:      realisticEntries(),
		SystemPrompt: testPrompt,
		Agent:        AgentInfo{Name: "aerie", Version: "0.4.0"},
		Tools:        testTools,
		Outcome:      "completed",
	}
}

// checkATIF validates a trajectory document as every trajectory test does.
func checkATIF(data []byte) error { return atiftest.Check(data) }

// build builds and marshals a trajectory and checks it is valid ATIF.
func build(t *testing.T, in TrajectoryInput) (*Trajectory, []byte) {
	t.Helper()
	tr, err := BuildTrajectory(in)
	if err != nil {
		t.Fatalf("BuildTrajectory: %v", err)
	}
	data, err := MarshalTrajectory(tr)
	if err != nil {
		t.Fatalf("MarshalTrajectory: %v", err)
	}
	if err := checkATIF(data); err != nil {
		t.Fatalf("invalid ATIF: %v\n%s", err, data)
	}
	return tr, data
}

func TestTrajectoryGolden(t *testing.T) {
	tr, got := build(t, realisticInput())
	golden := filepath.Join("testdata", "trajectory.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestTrajectoryGolden -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("trajectory differs from %s (-want +got; -update rewrites it):\n%s", golden, diff)
	}

	// The golden file is checked by eye once; these pin what matters so a
	// careless -update cannot hide a regression.
	step := func(id int) Step { return tr.Steps[id-1] }
	if got := step(3).ToolCalls; len(got) != 2 || got[1].ToolCallID != "toolu_02" || string(got[0].Arguments) != `{"command":"go test ./pkg/parse/..."}` {
		t.Errorf("step 3 tool calls = %+v", got)
	}
	res := step(3).Observation.Results
	if len(res) != 2 || res[1].SourceCallID != "toolu_02" || res[1].Extra["is_error"] != true || res[1].Extra["status"] != "error" {
		t.Errorf("step 3 results = %+v, want the read error linked to toolu_02", res)
	}
	if m := step(4).Metrics; m == nil || *m.PromptTokens != 2700 || *m.CompletionTokens != 80 || *m.CachedTokens != 2200 || *m.CostUSD != 0.0038 {
		t.Errorf("step 4 metrics = %+v, want the difference of the first two snapshots", m)
	}
	if s := step(8); s.ModelName != "claude-opus-4-1" || s.ReasoningEffort != "high" || s.ToolCalls[0].Extra["raw_arguments"] == nil {
		t.Errorf("step 8 = %+v, want the new model and effort and the malformed arguments kept", s)
	}
	if s := step(9); s.LLMCallCount == nil || *s.LLMCallCount != 0 || s.ToolCalls[0].FunctionName != "gofmt" {
		t.Errorf("step 9 = %+v, want the hook's call as a deterministic dispatch", s)
	}
	if s := step(10); s.Source != "system" || s.Extra["context_management"].(map[string]any)["type"] != "compaction" || s.Extra["compaction"].(map[string]any)["first_kept_step_id"] != 7 {
		t.Errorf("step 10 = %+v, want the compaction keeping steps from 7", s)
	}
	if fm := tr.FinalMetrics; *fm.TotalPromptTokens != 27000 || *fm.TotalCostUSD != 0.3911 || fm.TotalSteps != 13 {
		t.Errorf("final metrics = %+v", fm)
	}
}

// The schema must reject what Harbor's models reject; otherwise passing it
// proves nothing.
func TestSchemaRejectsInvalidTrajectories(t *testing.T) {
	t.Parallel()
	_, good := build(t, realisticInput())
	for _, tc := range []struct {
		name   string
		mutate func(doc map[string]any)
	}{
		{"unknown root field", func(d map[string]any) { d["steps_count"] = 3 }},
		{"no steps", func(d map[string]any) { d["steps"] = []any{} }},
		{"agent without version", func(d map[string]any) { delete(d["agent"].(map[string]any), "version") }},
		{"old schema version", func(d map[string]any) { d["schema_version"] = "ATIF-v2.0" }},
		{"metrics on a user step", func(d map[string]any) {
			d["steps"].([]any)[1].(map[string]any)["metrics"] = map[string]any{"prompt_tokens": 1}
		}},
		{"step without message", func(d map[string]any) { delete(d["steps"].([]any)[1].(map[string]any), "message") }},
		{"arguments not an object", func(d map[string]any) {
			d["steps"].([]any)[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["arguments"] = "ls"
		}},
		{"bad timestamp", func(d map[string]any) { d["steps"].([]any)[1].(map[string]any)["timestamp"] = "yesterday" }},
		{"result naming another step's call", func(d map[string]any) {
			d["steps"].([]any)[3].(map[string]any)["observation"] = map[string]any{"results": []any{map[string]any{"source_call_id": "toolu_01", "content": "x"}}}
		}},
		{"step ids out of order", func(d map[string]any) { d["steps"].([]any)[1].(map[string]any)["step_id"] = 7 }},
		{"metrics on a dispatch step", func(d map[string]any) {
			d["steps"].([]any)[8].(map[string]any)["metrics"] = map[string]any{"prompt_tokens": 1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var doc map[string]any
			if err := json.Unmarshal(good, &doc); err != nil {
				t.Fatal(err)
			}
			tc.mutate(doc)
			data, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkATIF(data); err == nil {
				t.Error("accepted an invalid trajectory")
			}
		})
	}
}

func TestSystemPrompt(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte(testPrompt))
	digest := hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		name      string
		plaintext bool
	}{{"digest by default", false}, {"plaintext when asked", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := realisticInput()
			in.IncludeSystemPrompt = tc.plaintext
			tr, data := build(t, in)
			first := tr.Steps[0]
			if first.Source != "system" {
				t.Fatalf("step 1 source = %q, want system", first.Source)
			}
			wantExtra := map[string]any{"sha256": digest, "bytes": len(testPrompt), "plaintext": tc.plaintext}
			if diff := cmp.Diff(wantExtra, first.Extra["system_prompt"]); diff != "" {
				t.Errorf("system_prompt extra (-want +got):\n%s", diff)
			}
			hasText := bytes.Contains(data, []byte("PRIV-4471"))
			if tc.plaintext {
				if first.Message != testPrompt || !hasText {
					t.Errorf("step 1 message = %q, want the rendered prompt", first.Message)
				}
			} else {
				if hasText {
					t.Error("the prompt's text is in the trajectory without plaintext")
				}
				if !strings.Contains(first.Message, "sha256:"+digest) {
					t.Errorf("step 1 message = %q, want it to name the digest", first.Message)
				}
			}
		})
	}
}

func TestForkMarksCopiedContext(t *testing.T) {
	t.Parallel()
	s := &stream{}
	s.add(
		user("Find the slow query."),
		transcript.AssistantMessage{Content: []transcript.Block{text("It is the report query.")}},
		transcript.Usage{InputTokens: 100, OutputTokens: 10},
		transcript.Fork{Source: sourceID, SourceSeq: 3},
		user("Now try an index instead."),
		transcript.AssistantMessage{Content: []transcript.Block{text("Added an index.")}},
		transcript.Usage{InputTokens: 250, OutputTokens: 30},
	)
	sess := testSession()
	sess.Kind, sess.ParentID, sess.RootID = "fork", sourceID, sourceID
	tr, _ := build(t, TrajectoryInput{Session: sess, Entries: s.entries, Agent: AgentInfo{Version: "1"}})

	var copied []bool
	for _, st := range tr.Steps {
		copied = append(copied, st.IsCopiedContext)
	}
	if diff := cmp.Diff([]bool{false, true, true, false, false}, copied); diff != "" {
		t.Errorf("is_copied_context by step (-want +got):\n%s", diff)
	}
	want := map[string]any{"source_session_id": sourceID.String(), "source_seq": int64(3)}
	if diff := cmp.Diff(want, tr.Extra["fork"]); diff != "" {
		t.Errorf("extra.fork (-want +got):\n%s", diff)
	}
	if got := tr.Extra["session"].(map[string]any)["parent_id"]; got != sourceID.String() {
		t.Errorf("extra.session.parent_id = %v", got)
	}
	if m := tr.Steps[4].Metrics; m == nil || *m.PromptTokens != 150 {
		t.Errorf("fork step metrics = %+v, want the difference from the copied snapshot", m)
	}
}

// Streams a newer runner, a bug or a crash could leave must still make a
// valid trajectory.
func TestOddEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		entries func(s *stream)
		tools   []provider.Tool
		check   func(t *testing.T, tr *Trajectory)
	}{
		{
			name:    "no entries",
			entries: func(*stream) {},
			check: func(t *testing.T, tr *Trajectory) {
				if len(tr.Steps) != 1 || tr.FinalMetrics.TotalSteps != 1 || tr.FinalMetrics.TotalPromptTokens != nil {
					t.Errorf("steps = %+v, final = %+v, want the system step alone", tr.Steps, tr.FinalMetrics)
				}
			},
		},
		{
			name: "entries without a payload of a known type",
			entries: func(s *stream) {
				s.add(nil, &transcript.UserMessage{Content: []transcript.Block{text("pointer")}}, user("after"))
			},
			check: func(t *testing.T, tr *Trajectory) {
				want := []map[string]any{{"seq": int64(1), "payload": "none"}, {"seq": int64(2), "payload": "*transcript.UserMessage"}}
				if diff := cmp.Diff(want, tr.Extra["skipped_entries"]); diff != "" {
					t.Errorf("skipped entries (-want +got):\n%s", diff)
				}
				if len(tr.Steps) != 2 || tr.Steps[1].Message != "after" {
					t.Errorf("steps = %+v", tr.Steps)
				}
			},
		},
		{
			name: "layers records",
			entries: func(s *stream) {
				s.add(transcript.Layers{Layers: []transcript.Layer{{Name: "go", Kind: "spec", Source: "configmap/go-tools", Digest: "sha256:00"}}}, user("hi"),
					transcript.Layers{Layers: []transcript.Layer{{Name: "bundled", Kind: "bundled"}}})
			},
			check: func(t *testing.T, tr *Trajectory) {
				want := []map[string]any{
					{"seq": int64(1), "layers": []transcript.Layer{{Name: "go", Kind: "spec", Source: "configmap/go-tools", Digest: "sha256:00"}}},
					{"seq": int64(3), "layers": []transcript.Layer{{Name: "bundled", Kind: "bundled"}}},
				}
				if diff := cmp.Diff(want, tr.Extra["extension_layers"]); diff != "" {
					t.Errorf("extension layers (-want +got):\n%s", diff)
				}
				if len(tr.Steps) != 2 || tr.Extra["skipped_entries"] != nil {
					t.Errorf("steps = %+v, skipped = %v: want the system step and the user's, nothing skipped", tr.Steps, tr.Extra["skipped_entries"])
				}
			},
		},
		{
			name: "result of a call never made",
			entries: func(s *stream) {
				s.add(user("hi"), result("ghost", "boo", true), transcript.ToolCompletion{CallID: "ghost", Status: transcript.ToolError})
			},
			check: func(t *testing.T, tr *Trajectory) {
				want := []Result{{Content: "boo", Extra: map[string]any{"call_id": "ghost", "is_error": true, "status": "error"}}}
				if diff := cmp.Diff(want, tr.Steps[1].Observation.Results); diff != "" {
					t.Errorf("results (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "completion without a result",
			entries: func(s *stream) {
				s.add(transcript.AssistantMessage{Content: []transcript.Block{use("c1", "bash", `{"command":"sleep 100"}`)}},
					transcript.ToolCall{CallID: "c1", Name: "bash"},
					transcript.ToolCompletion{CallID: "c1", Status: transcript.ToolCancelled})
			},
			check: func(t *testing.T, tr *Trajectory) {
				r := tr.Steps[1].Observation.Results
				if len(r) != 1 || r[0].SourceCallID != "c1" || r[0].Extra["status"] != "cancelled" || r[0].Content != "" {
					t.Errorf("results = %+v", r)
				}
			},
		},
		{
			name: "tool calls without an id or with the same id",
			entries: func(s *stream) {
				s.add(transcript.AssistantMessage{Content: []transcript.Block{use("", "a", "{}"), use("x", "b", "{}"), use("x", "c", "{}")}},
					result("x", "first", false))
			},
			check: func(t *testing.T, tr *Trajectory) {
				var ids []string
				for _, c := range tr.Steps[1].ToolCalls {
					ids = append(ids, c.ToolCallID)
				}
				if diff := cmp.Diff([]string{"aerie-1-1", "x", "x'"}, ids); diff != "" {
					t.Errorf("tool call ids (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "arguments that are not a JSON object",
			entries: func(s *stream) {
				s.add(transcript.AssistantMessage{Content: []transcript.Block{
					use("1", "t", `[1, 2]`), use("2", "t", `"ls"`), use("3", "t", `{"a":`), use("4", "t", ""), use("5", "t", " { \"a\" : 1 } "),
					use("6", "t", `"{\"b\": 2}"`), use("7", "t", `""`),
				}})
			},
			check: func(t *testing.T, tr *Trajectory) {
				var got []string
				for _, c := range tr.Steps[1].ToolCalls {
					got = append(got, fmt.Sprintf("%s %v", c.Arguments, c.Extra["raw_arguments"]))
				}
				want := []string{`{} [1, 2]`, `{} ls`, `{} {"a":`, `{} <nil>`, `{"a":1} <nil>`, `{"b":2} <nil>`, `{} <nil>`}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("arguments (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "images and block types this runner does not know",
			entries: func(s *stream) {
				s.add(transcript.UserMessage{Content: []transcript.Block{
					text("look"), {Type: transcript.BlockImage, MediaType: "image/png", Data: []byte{1, 2, 3}},
					{Type: "audio", Text: "a transcript"}, {Type: "mystery"},
				}})
			},
			check: func(t *testing.T, tr *Trajectory) {
				if want := "look\n\n[image: image/png, 3 bytes]\n\na transcript"; tr.Steps[1].Message != want {
					t.Errorf("message = %q, want %q", tr.Steps[1].Message, want)
				}
			},
		},
		{
			name: "reasoning without text and an empty answer",
			entries: func(s *stream) {
				s.add(transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockThinking, Signature: "redacted"}}})
			},
			check: func(t *testing.T, tr *Trajectory) {
				if s := tr.Steps[1]; s.Message != "" || s.ReasoningContent != "" || s.Source != "agent" {
					t.Errorf("step = %+v", s)
				}
			},
		},
		{
			name: "usage that goes down, and a NaN cost",
			entries: func(s *stream) {
				s.add(transcript.AssistantMessage{}, transcript.Usage{InputTokens: 100, CostUSD: 0.5},
					transcript.AssistantMessage{}, transcript.Usage{InputTokens: 40, CostUSD: 0.1},
					transcript.AssistantMessage{}, transcript.Usage{InputTokens: 60, CostUSD: math.NaN()})
			},
			check: func(t *testing.T, tr *Trajectory) {
				if m := tr.Steps[2].Metrics; *m.PromptTokens != 40 || *m.CostUSD != 0.1 {
					t.Errorf("after a reset: %+v, want the new counts whole", m)
				}
				if m := tr.Steps[3].Metrics; *m.PromptTokens != 20 || m.CostUSD != nil {
					t.Errorf("with a NaN cost: %+v, want no cost", m)
				}
				if tr.FinalMetrics.TotalCostUSD != nil {
					t.Errorf("total cost = %v, want none", *tr.FinalMetrics.TotalCostUSD)
				}
			},
		},
		{
			name:    "usage before any response",
			entries: func(s *stream) { s.add(transcript.Usage{InputTokens: 9}, user("hi")) },
			check: func(t *testing.T, tr *Trajectory) {
				if *tr.FinalMetrics.TotalPromptTokens != 9 {
					t.Errorf("final = %+v", tr.FinalMetrics)
				}
			},
		},
		{
			name: "a compaction that keeps nothing, and a checkpoint before any step",
			entries: func(s *stream) {
				s.add(transcript.Checkpoint{Turn: 0, Outcome: "failed"},
					transcript.Compaction{FirstKept: 99, Replacement: []transcript.Block{text("all gone")}})
			},
			check: func(t *testing.T, tr *Trajectory) {
				if _, ok := tr.Steps[0].Extra["checkpoint"]; !ok {
					t.Errorf("system step extra = %v, want the checkpoint", tr.Steps[0].Extra)
				}
				c := tr.Steps[1].Extra["compaction"].(map[string]any)
				if _, ok := c["first_kept_step_id"]; ok || c["first_kept_seq"] != int64(99) {
					t.Errorf("compaction = %v", c)
				}
				if tr.Extra["outcome"] != "failed" {
					t.Errorf("outcome = %v, want the checkpoint's", tr.Extra["outcome"])
				}
			},
		},
		{
			name:    "a tool schema that is not JSON",
			tools:   []provider.Tool{{Name: "broken", InputSchema: json.RawMessage(`{"type":`)}},
			entries: func(*stream) {},
			check: func(t *testing.T, tr *Trajectory) {
				if got := string(tr.Agent.ToolDefinitions[0].Function.Parameters); got != `{"type":"object","properties":{}}` {
					t.Errorf("parameters = %s", got)
				}
			},
		},
		{
			name: "provider and persona changes",
			entries: func(s *stream) {
				s.add(transcript.ProviderChange{Provider: "openai"}, transcript.ModelChange{Model: "gpt-5"},
					transcript.PersonaChange{Persona: "reviewer"}, transcript.AssistantMessage{})
			},
			check: func(t *testing.T, tr *Trajectory) {
				s := tr.Steps[1]
				if s.ModelName != "gpt-5" || s.Extra["provider"] != "openai" || s.Extra["persona"] != "reviewer" {
					t.Errorf("step = %+v", s)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &stream{}
			tc.entries(s)
			tr, _ := build(t, TrajectoryInput{Session: testSession(), Entries: s.entries, Agent: AgentInfo{Version: "1"}, Tools: tc.tools})
			tc.check(t, tr)
		})
	}
}

func TestBuildTrajectoryErrors(t *testing.T) {
	t.Parallel()
	at := func(seq int64) transcript.Entry { return transcript.Entry{Seq: seq, Payload: user("x")} }
	for _, tc := range []struct {
		name string
		in   TrajectoryInput
		want string
	}{
		{"no version", TrajectoryInput{}, "TrajectoryInput.Agent.Version"},
		{"out of order", TrajectoryInput{Agent: AgentInfo{Version: "1"}, Entries: []transcript.Entry{at(2), at(1)}}, "entry 1 comes after entry 2"},
		{"repeated", TrajectoryInput{Agent: AgentInfo{Version: "1"}, Entries: []transcript.Entry{at(3), at(3)}}, "entry 3 comes after entry 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := BuildTrajectory(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteTrajectoryReplacesWhole(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "out", "run-1")
	path := filepath.Join(dir, "trajectory.json")
	big, _ := build(t, realisticInput())
	small, _ := build(t, TrajectoryInput{Session: testSession(), Agent: AgentInfo{Version: "1"}})

	for _, tr := range []*Trajectory{big, small} {
		if err := WriteTrajectory(path, tr); err != nil {
			t.Fatalf("WriteTrajectory: %v", err)
		}
		want, _ := MarshalTrajectory(tr)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("file holds %d bytes, want exactly the %d of the trajectory", len(got), len(want))
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", fi.Mode().Perm())
	}
	assertOnlyFile(t, dir, "trajectory.json")
}

func TestWriteTrajectoryKeepsPermissions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "trajectory.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, _ := build(t, TrajectoryInput{Agent: AgentInfo{Version: "1"}})
	if err := WriteTrajectory(path, tr); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("stat = %v, %v; want mode 0600 kept", fi.Mode(), err)
	}
}

func TestWriteTrajectoryOntoDirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "trajectory.json")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	tr, _ := build(t, TrajectoryInput{Agent: AgentInfo{Version: "1"}})
	err := WriteTrajectory(path, tr)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error = %v, want one naming %s", err, path)
	}
	if err := WriteTrajectory("", tr); err == nil {
		t.Error("an empty path was accepted")
	}
	if err := WriteTrajectory(filepath.Join(filepath.Dir(path), "x.json"), nil); err == nil {
		t.Error("a nil trajectory was accepted")
	}
}

const helperEnv = "AERIE_TEST_WRITE_TRAJECTORY"

func TestWriteTrajectoryUnwritableDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "locked")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "trajectory.json")
	old := []byte("{\"previous\": \"run\"}\n")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Error(err)
		}
	})

	var msg string
	if os.Geteuid() != 0 {
		tr, _ := build(t, TrajectoryInput{Agent: AgentInfo{Version: "1"}})
		if err := WriteTrajectory(path, tr); err != nil {
			msg = err.Error()
		}
	} else {
		// Permissions do not stop root, so the write runs in a child
		// process as nobody.
		msg = writeAsNobody(t, base, path)
	}
	if msg == "" || !strings.Contains(msg, path) || !strings.Contains(msg, "permission denied") {
		t.Fatalf("error = %q, want a permission error naming %s", msg, path)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, old) {
		t.Errorf("old file = %q, %v; want it untouched", got, err)
	}
	assertOnlyFile(t, dir, "trajectory.json")
}

// writeAsNobody runs TestWriteTrajectoryHelper in a copy of the test binary
// as user nobody and returns the error it reports.
func writeAsNobody(t *testing.T, base, path string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "atif.test")
	testenv.CopyFile(t, exe, bin, 0o755)
	// t.TempDir's directories are private to root; nobody must reach the
	// binary and the locked directory.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestWriteTrajectoryHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "write error: ")
	if !ok {
		t.Fatalf("helper process reported no error:\n%s", out)
	}
	msg, _, _ := strings.Cut(after, "\n")
	return msg
}

// TestWriteTrajectoryHelper is the child process of
// TestWriteTrajectoryUnwritableDirectory when the tests run as root.
func TestWriteTrajectoryHelper(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("runs only as the child process of TestWriteTrajectoryUnwritableDirectory")
	}
	tr, err := BuildTrajectory(TrajectoryInput{Agent: AgentInfo{Version: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTrajectory(path, tr); err != nil {
		fmt.Printf("write error: %v\n", err)
	}
}

func assertOnlyFile(t *testing.T, dir, name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{name}, names); diff != "" {
		t.Errorf("directory holds (-want +got):\n%s", diff)
	}
}

// FuzzBuildTrajectory feeds streams of decoded entries, one per line as
// "kind<TAB>payload", and requires a valid trajectory for every one.
func FuzzBuildTrajectory(f *testing.F) {
	var seed strings.Builder
	for _, e := range realisticEntries() {
		payload, err := transcript.EncodePayload(e.Payload)
		if err != nil {
			f.Fatal(err)
		}
		fmt.Fprintf(&seed, "%s\t%s\n", e.Kind(), payload)
	}
	f.Add(seed.String(), "prompt", false)
	f.Add("assistant_message\t{\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"input\":\"x\"}]}\ntool_result\t{\"call_id\":\"a\",\"content\":[]}\ntool_completion\t{\"call_id\":\"b\",\"status\":\"ok\"}\n", "", true)
	f.Add("fork\t{\"source\":\"9e1d4c7b-2a5f-4b83-a6c0-3f8e1b5d7a02\",\"source_seq\":5}\nusage\t{\"cost_usd\":1e308}\nusage\t{\"cost_usd\":-1e308}\n", "\xff", true)
	f.Add("assistant_message\t{\"content\":[]}\nusage\t{\"cost_usd\":1e308}\n", "", false)
	f.Add("compaction\t{\"first_kept\":1,\"replacement\":[{\"type\":\"text\",\"text\":\"<&>\"}]}\ntool_call\t{\"call_id\":\"h\",\"name\":\"n\",\"input\":[1]}\n", "p", false)
	f.Fuzz(func(t *testing.T, lines, prompt string, plaintext bool) {
		var entries []transcript.Entry
		for i, line := range strings.Split(lines, "\n") {
			kind, payload, ok := strings.Cut(line, "\t")
			if !ok {
				continue
			}
			p, err := transcript.DecodeEntry(sessionID, int64(i+1), transcript.EntryKind(kind), payload)
			if err != nil {
				continue
			}
			entries = append(entries, transcript.Entry{Seq: int64(i + 1), Payload: p, CreatedAt: started.Add(time.Duration(i) * time.Second)})
		}
		tr, err := BuildTrajectory(TrajectoryInput{
			Session: testSession(), Entries: entries, SystemPrompt: prompt,
			IncludeSystemPrompt: plaintext, Agent: AgentInfo{Version: "1"}, Tools: testTools,
		})
		if err != nil {
			t.Fatalf("BuildTrajectory: %v", err)
		}
		data, err := MarshalTrajectory(tr)
		if err != nil {
			t.Fatalf("MarshalTrajectory: %v", err)
		}
		if err := checkATIF(data); err != nil {
			t.Fatalf("invalid ATIF: %v\n%s", err, data)
		}
	})
}

// benchEntries is a long session: turns of a user message, a tool call with
// 4 KiB of output, and an answer.
func benchEntries(turns int) []transcript.Entry {
	s := &stream{}
	out := strings.Repeat("ok  \tgithub.com/aerie-run/aerie/pkg\t0.012s\n", 4096/44)
	var u transcript.Usage
	for i := range turns {
		id := fmt.Sprintf("toolu_%d", i)
		u.InputTokens += 3000
		u.OutputTokens += 200
		u.CacheReadTokens += 2500
		u.Requests++
		u.CostUSD += 0.01
		s.add(user("Run the tests again."),
			transcript.AssistantMessage{Content: []transcript.Block{text("Running them."), use(id, "bash", `{"command":"go test ./..."}`)}},
			u)
		s.add(exchange(id, "bash", result(id, out, false), transcript.ToolOK, time.Second, "")...)
		u.InputTokens += 3500
		u.OutputTokens += 50
		u.Requests++
		s.add(transcript.AssistantMessage{Content: []transcript.Block{text("All tests pass.")}}, u, transcript.Checkpoint{Turn: int64(i + 1), Outcome: "completed"})
	}
	return s.entries
}

func BenchmarkBuildTrajectory(b *testing.B) {
	in := TrajectoryInput{Session: testSession(), Entries: benchEntries(500), SystemPrompt: testPrompt, Agent: AgentInfo{Version: "1"}, Tools: testTools}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildTrajectory(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(in.Entries)), "entries/op")
}

func BenchmarkMarshalTrajectory(b *testing.B) {
	tr, err := BuildTrajectory(TrajectoryInput{Session: testSession(), Entries: benchEntries(500), Agent: AgentInfo{Version: "1"}, Tools: testTools})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		data, err := MarshalTrajectory(tr)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
	}
}

func BenchmarkWriteTrajectory(b *testing.B) {
	tr, err := BuildTrajectory(TrajectoryInput{Session: testSession(), Entries: benchEntries(500), Agent: AgentInfo{Version: "1"}, Tools: testTools})
	if err != nil {
		b.Fatal(err)
	}
	data, err := MarshalTrajectory(tr)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "trajectory.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteTrajectory(path, tr); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHookVerdicts: what the hooks decided joins the tool call it was
// about, or else the latest step, in order, and the trajectory stays
// valid ATIF.
func TestHookVerdicts(t *testing.T) {
	t.Parallel()
	s := &stream{}
	start := transcript.HookVerdict{Event: "SessionStart", Context: "branch main", Runs: []transcript.HookRun{{Hook: "h#SessionStart[0].hooks[0]"}}}
	prompt := transcript.HookVerdict{Event: "UserPromptSubmit", Context: "ticket 12", Runs: []transcript.HookRun{{Hook: "h#UserPromptSubmit[0].hooks[0]"}}}
	deny := transcript.HookVerdict{Event: "PreToolUse", CallID: "toolu_01", Tool: "bash", Decision: "block", Reason: "no rm",
		Runs: []transcript.HookRun{{Hook: "g#PreToolUse[0].hooks[0]", Decision: "block", Reason: "no rm"}, {Hook: "t#PreToolUse[0].hooks[0]", Exit: -1, Skipped: "not run: modified since trust was checked"}}}
	post := transcript.HookVerdict{Event: "PostToolUse", CallID: "toolu_01", Tool: "bash", Context: "logged", Runs: []transcript.HookRun{{Hook: "l#PostToolUse[0].hooks[0]"}}}
	stop := transcript.HookVerdict{Event: "Stop", Decision: "block", Reason: "run the tests", Runs: []transcript.HookRun{{Hook: "s#Stop[0].hooks[0]", Exit: 2, Decision: "block", Reason: "run the tests"}}}
	s.add(start, prompt, user("clean up"),
		transcript.AssistantMessage{Content: []transcript.Block{use("toolu_01", "bash", `{"command":"rm -rf /"}`)}, StopReason: "tool_use"},
		transcript.ToolCall{CallID: "toolu_01", Name: "bash"}, deny, post,
		result("toolu_01", "bash: blocked by a PreToolUse hook: no rm", true),
		transcript.ToolCompletion{CallID: "toolu_01", Status: transcript.ToolError},
		transcript.AssistantMessage{Content: []transcript.Block{text("done")}, StopReason: "end_turn"}, stop)
	in := realisticInput()
	in.Entries = s.entries
	tr, _ := build(t, in)
	if diff := cmp.Diff([]Hook{{Seq: 1, HookVerdict: start}, {Seq: 2, HookVerdict: prompt}}, tr.Steps[0].Extra["hooks"]); diff != "" {
		t.Errorf("system step hooks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Hook{{Seq: 6, HookVerdict: deny}, {Seq: 7, HookVerdict: post}}, tr.Steps[2].ToolCalls[0].Extra["hooks"]); diff != "" {
		t.Errorf("tool call hooks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Hook{{Seq: 11, HookVerdict: stop}}, tr.Steps[3].Extra["hooks"]); diff != "" {
		t.Errorf("last step hooks (-want +got):\n%s", diff)
	}
	if tr.Extra["skipped_entries"] != nil {
		t.Errorf("skipped entries %v", tr.Extra["skipped_entries"])
	}
}
