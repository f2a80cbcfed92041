package transcript_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// FuzzDecodeEntry feeds the decoder arbitrary kinds and payloads. It must
// never panic; whatever it accepts must encode again and decode to the same
// payload; whatever it rejects must be a corrupt-entry error naming the
// session and sequence number.
func FuzzDecodeEntry(f *testing.F) {
	seeds := []struct{ kind, payload string }{
		{"user_message", `{"content":[{"type":"text","text":"hi"}]}`},
		{"assistant_message", `{"content":[{"type":"thinking","text":"hm","signature":"s"},{"type":"tool_use","id":"c1","name":"bash","input":{"command":"ls"}}],"stop_reason":"tool_use"}`},
		{"tool_result", `{"call_id":"c1","content":[{"type":"text","text":"ok"}],"is_error":true}`},
		{"tool_call", `{"call_id":"c1","name":"bash","input":{"command":"ls"}}`},
		{"tool_completion", `{"call_id":"c1","status":"ok","duration_ns":1000}`},
		{"provider_change", `{"provider":"openai"}`},
		{"model_change", `{"model":"m"}`},
		{"persona_change", `{"persona":""}`},
		{"reasoning_change", `{"effort":"high"}`},
		{"usage", `{"input_tokens":1,"cost_usd":0.5}`},
		{"checkpoint", `{"turn":3,"outcome":"completed"}`},
		{"compaction", `{"replacement":[{"type":"text","text":"s"}],"first_kept":4,"provenance":{"trigger":"auto","pending_children":["6ba7b810-9dad-11d1-80b4-00c04fd430c8"]}}`},
		{"fork", `{"source":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","source_seq":7}`},
		{"subagent_outcome", `{"session":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","outcome":"failed","usage":{"requests":2}}`},
		{"layers", `{"layers":[{"name":".aerie","kind":"project","source":"/w/.aerie","digest":"sha256:00"},{"name":"go","kind":"spec"}]}`},
		{"layers", `{"layers":[{"name":"","kind":"spec"}]}`},
		{"layers", `{"layers":null}`},
		{"hook_verdict", `{"event":"PreToolUse","call_id":"c1","tool":"bash","decision":"block","reason":"no","approval":{"allowed":false,"policy":"deny"},"updated_input":{"command":"ls"},"runs":[{"hook":"h#PreToolUse[0].hooks[0]","exit":2,"duration_ns":5,"skipped":"x"}]}`},
		{"hook_verdict", `{"event":"Stop","runs":[{"exit":0}]}`},
		{"approval_request", `{"call_id":"c1","tool":"bash","preview":"{\"command\":\"rm -rf build\"}","hooks":["h#0"],"reason":"rm needs a person"}`},
		{"approval_request", `{"call_id":"c1"}`},
		{"approval_decision", `{"call_id":"c1","allowed":true,"reason":"ok","by":"aerie approve"}`},
		{"approval_decision", `{"allowed":false}`},
		{"workspace_diff", `{"base":"4b825dc642cb6eb9a060e54bf8d69288fbee4904","stat":" a | 1 +\n","patch":"diff --git a/a b/a\n","bytes":19,"cap":1048576}`},
		{"workspace_diff", `{"base":"abc","patch":"diff","bytes":9,"cap":4,"truncated":true}`},
		{"workspace_diff", `{"base":"abc","patch":"diff","bytes":2}`},
		{"workspace_diff", `{"stat":"x"}`},
		{"result", `{"value":{"ok":true,"files":["a.go"]},"schema_digest":"sha256:00"}`},
		{"result", `{"value":null}`},
		{"result", `{"value":"x"}`},
		{"result", `{}`},
		{"user_message", `{"content":[{"type":"image","media_type":"image/png","data":"iVBORw=="}]}`},
		{"user_message", `{"content":[{"type":"text","text":"\u0000\ud800"}]}`},
		{"user_message", `null`},
		{"user_message", `{"content":[{}]}`},
		{"tool_call", `{"call_id":7}`},
		{"fork", `{"source":"not-a-uuid"}`},
		{"telepathy", `{}`},
		{"", ``},
		{"usage", `{"input_tokens":1} trailing`},
	}
	for _, s := range seeds {
		f.Add(s.kind, []byte(s.payload))
	}
	session := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	f.Fuzz(func(t *testing.T, kind string, payload []byte) {
		p, err := transcript.DecodeEntry(session, 42, transcript.EntryKind(kind), string(payload))
		if err != nil {
			var entryErr *transcript.EntryError
			if !asEntryError(err, &entryErr) || entryErr.Session != session || entryErr.Seq != 42 {
				t.Fatalf("rejection %v is not an EntryError for session %s entry 42", err, session)
			}
			return
		}
		if string(p.EntryKind()) != kind {
			t.Fatalf("decoded a %q payload as kind %q", kind, p.EntryKind())
		}
		encoded, err := transcript.EncodePayload(p)
		if err != nil {
			t.Fatalf("accepted payload does not encode: %v", err)
		}
		again, err := transcript.DecodeEntry(session, 42, transcript.EntryKind(kind), string(encoded))
		if err != nil {
			t.Fatalf("re-encoded payload %s does not decode: %v", encoded, err)
		}
		// Raw JSON inputs are compacted by encoding, so compare encodings.
		encodedAgain, err := transcript.EncodePayload(again)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(encoded), string(encodedAgain)); diff != "" {
			t.Fatalf("encoding is not stable (-first +second):\n%s", diff)
		}
	})
}
