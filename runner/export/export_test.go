package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/atif"
	"github.com/aerie-run/aerie/runner/atif/atiftest"
	"github.com/aerie-run/aerie/runner/transcript"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var (
	sessionID = uuid.MustParse("0b6f3c2e-5d1a-4c8e-9f2b-7a1d3e5c9b01")
	started   = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
)

func text(s string) []transcript.Block {
	return []transcript.Block{{Type: transcript.BlockText, Text: s}}
}

// compactedSession is a session with two tool calls (one failing, its
// output holding backticks), a compaction that replaced its first turn,
// a call a hook dispatched, and a second turn: entries as the store
// returns them, the compacted ones marked.
func compactedSession() Input {
	payloads := []transcript.Payload{
		transcript.Layers{Layers: []transcript.Layer{{Name: "project", Kind: "project"}, {Name: "bundled", Kind: "bundled"}}},
		transcript.UserMessage{Content: text("Fix the parser tests.")},
		transcript.AssistantMessage{Content: []transcript.Block{
			{Type: transcript.BlockThinking, Text: "Run the tests first."},
			{Type: transcript.BlockText, Text: "Running the tests."},
			{Type: transcript.BlockToolUse, ID: "toolu_01", Name: "bash", Input: json.RawMessage(`{"command":"go test ./parse/..."}`)},
			{Type: transcript.BlockToolUse, ID: "toolu_02", Name: "read", Input: json.RawMessage(`{"path":"missing.go"}`)},
		}, StopReason: "tool_use"},
		transcript.Usage{InputTokens: 1200, OutputTokens: 80, Requests: 1},
		transcript.ToolCall{CallID: "toolu_01", Name: "bash", Input: json.RawMessage(`{"command":"go test ./parse/..."}`)},
		transcript.ToolResult{CallID: "toolu_01", Content: text("--- FAIL: TestParse\n```\nwant `a`, got `b`\n```")},
		transcript.ToolCompletion{CallID: "toolu_01", Status: transcript.ToolOK, Duration: 1500 * time.Millisecond},
		transcript.ToolCall{CallID: "toolu_02", Name: "read", Input: json.RawMessage(`{"path":"missing.go"}`)},
		transcript.ToolResult{CallID: "toolu_02", Content: text("open missing.go: no such file"), IsError: true},
		transcript.ToolCompletion{CallID: "toolu_02", Status: transcript.ToolError, Error: "no such file"},
		transcript.Compaction{
			Replacement: text("Task: fix the parser tests.\nState: TestParse fails."),
			FirstKept:   11,
			Provenance:  transcript.Provenance{Trigger: "auto", Provider: "anthropic", Model: "claude-haiku-4-5", Messages: 4, TokensBefore: 30000, TokensAfter: 900},
		},
		transcript.ModelChange{Model: "claude-opus-4-1"},
		transcript.AssistantMessage{Content: []transcript.Block{
			{Type: transcript.BlockText, Text: "Fixed the off-by-one in parse.go."},
			{Type: transcript.BlockToolUse, ID: "toolu_03", Name: "edit", Input: json.RawMessage(`"{\"path\": \"parse.go\", "`)},
		}},
		transcript.ToolCall{CallID: "toolu_03", Name: "edit", Input: json.RawMessage(`"{\"path\": \"parse.go\", "`)},
		transcript.HookVerdict{Event: "PreToolUse", CallID: "toolu_03", Tool: "edit", Decision: "block", Reason: "edits need review", Runs: []transcript.HookRun{{Hook: "hooks.toml#1", Exit: 2}}},
		transcript.ToolResult{CallID: "toolu_03", Content: text("blocked: edits need review"), IsError: true},
		transcript.ToolCompletion{CallID: "toolu_03", Status: transcript.ToolDenied},
		transcript.ToolCall{CallID: "hook-1", Name: "gofmt", Input: json.RawMessage(`{"path":"parse.go"}`)},
		transcript.ToolResult{CallID: "hook-1", Content: nil},
		transcript.ToolCompletion{CallID: "hook-1", Status: transcript.ToolOK},
		transcript.AssistantMessage{Content: text("Done: the parser tests pass.")},
		transcript.Usage{InputTokens: 5200, OutputTokens: 260, CacheReadTokens: 3000, Requests: 3, CostUSD: 0.0123, ContextTokens: 2100},
		transcript.Checkpoint{Turn: 3, Outcome: transcript.OutcomeCompleted, Result: "Done: the parser tests pass."},
	}
	in := Input{
		Session: atif.SessionRecord{
			ID: sessionID, Kind: "headless", Label: "parser", RootID: sessionID, CreatedAt: started,
			Settings: transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5"},
		},
		Agent: atif.AgentInfo{Name: "aerie", Version: "0.4.0"},
	}
	for i, p := range payloads {
		e := transcript.Entry{Seq: int64(i + 1), Payload: p, CreatedAt: started.Add(time.Duration(i) * time.Second)}
		if e.Seq < 11 {
			e.CompactedBy = 11
		}
		in.Entries = append(in.Entries, e)
	}
	return in
}

func render(t *testing.T, f Format, in Input) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, f, in); err != nil {
		t.Fatalf("Write %s: %v", f, err)
	}
	return b.String()
}

func TestMarkdownGolden(t *testing.T) {
	t.Parallel()
	got := render(t, Markdown, compactedSession())
	testenv.Golden(t, filepath.Join("testdata", "compacted.golden.md"), got, *update, "go test ./runner/export -run TestMarkdownGolden -update")

	// The golden file is checked by eye once; these pin what matters.
	for _, want := range []string{
		"## #2 · User · compacted by #11",
		"**Tool call** `bash` · `toolu_01`",
		"### #6 · Result of `bash` · `toolu_01` · compacted by #11",
		"````\n--- FAIL: TestParse\n```\nwant `a`, got `b`\n```\n````", // a fence the output cannot close
		"### #9 · Result of `read` · `toolu_02` · error · compacted by #11",
		"## #11 · Compaction checkpoint\n",
		"> State: TestParse fails.",
		"### #18 · Tool call by aerie `gofmt` · `hook-1`",
		"`#15` hooks at PreToolUse for `edit`: block; edits need review",
		"```\n{\"path\": \"parse.go\",\n```", // truncated arguments as the model sent them
		"| Input tokens | 5200 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the transcript lacks %q", want)
		}
	}
	if strings.Count(got, "`toolu_01`") != 2 {
		t.Error("the harness's record of a call the model made is shown again")
	}
	if i, j := strings.Index(got, "## #2 · User"), strings.Index(got, "## #11 · Compaction"); i < 0 || j < i {
		t.Error("the compacted entries do not come before their checkpoint")
	}
}

func TestJSONL(t *testing.T) {
	t.Parallel()
	in := compactedSession()
	got := render(t, JSONL, in)
	sc := bufio.NewScanner(strings.NewReader(got))
	n := 0
	for sc.Scan() {
		var l map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		for _, k := range []string{"session", "seq", "kind", "created_at", "compacted_by", "payload"} {
			if _, ok := l[k]; !ok {
				t.Errorf("line %d has no %s: %s", n+1, k, sc.Text())
			}
		}
		var line Line
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		e := in.Entries[n]
		p, err := transcript.DecodeEntry(line.Session, line.Seq, line.Kind, string(line.Payload))
		switch {
		case err != nil:
			t.Errorf("line %d: the payload does not decode as its kind: %v", n+1, err)
		case line.Session != sessionID || line.Seq != e.Seq || line.Kind != e.Kind() || !line.CreatedAt.Equal(e.CreatedAt):
			t.Errorf("line %d = %+v, want entry %d", n+1, line, e.Seq)
		case (line.CompactedBy == nil) != (e.CompactedBy == 0) || line.CompactedBy != nil && *line.CompactedBy != e.CompactedBy:
			t.Errorf("line %d compacted_by %v, want %d", n+1, line.CompactedBy, e.CompactedBy)
		case p.EntryKind() != e.Kind():
			t.Errorf("line %d decodes to %T", n+1, p)
		}
		n++
	}
	if n != len(in.Entries) {
		t.Errorf("%d lines for %d entries", n, len(in.Entries))
	}
	if strings.Contains(got, `\u003c`) {
		t.Error("the lines escape HTML")
	}
}

// The exported trajectory is valid ATIF, built by the one builder from the
// entries alone, the compacted ones included.
func TestATIF(t *testing.T) {
	t.Parallel()
	in := compactedSession()
	got := render(t, ATIF, in)
	if err := atiftest.Check([]byte(got)); err != nil {
		t.Fatalf("invalid ATIF: %v\n%s", err, got)
	}
	want, err := atif.BuildTrajectory(atif.TrajectoryInput{Session: in.Session, Entries: in.Entries, SystemPromptUnrecorded: true, Agent: in.Agent})
	if err != nil {
		t.Fatal(err)
	}
	data, err := atif.MarshalTrajectory(want)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(data) {
		t.Error("the export is not the trajectory the builder makes of the same entries")
	}
	if !strings.Contains(got, `"type": "compaction"`) || !strings.Contains(got, "Fix the parser tests.") {
		t.Error("the trajectory lacks the compaction or the compacted first message")
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for _, f := range Formats {
		if got, err := ParseFormat(string(f)); err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	_, err := ParseFormat("html")
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"html": want atif, jsonl, markdown`) {
		t.Errorf("ParseFormat(html) = %v", err)
	}
	if err := Write(&bytes.Buffer{}, "html", compactedSession()); !errors.Is(err, ErrFormat) {
		t.Errorf("Write(html) = %v", err)
	}
	in := compactedSession()
	in.Entries[1], in.Entries[2] = in.Entries[2], in.Entries[1]
	if err := Write(&bytes.Buffer{}, JSONL, in); err == nil || !strings.Contains(err.Error(), "sequence order") {
		t.Errorf("entries out of order: %v", err)
	}
	if got := render(t, Markdown, Input{Session: atif.SessionRecord{ID: sessionID}}); !strings.Contains(got, "No usage recorded.") {
		t.Errorf("an empty session:\n%s", got)
	}
}

func TestShortened(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		want bool
	}{
		{"view\n[json output compressed from 9 to 3 bytes; the original (sha256:ab) in full: retrieve(handle=c1)]", true},
		{"head\n\n[... 10 bytes dropped; full output: retrieve(handle=c1) ...]\n\ntail", true},
		{"head\n\n[... 10 bytes dropped; full output in /tmp/raw/s_c1.txt ...]\n\ntail", true},
		{"head\n\n[... 10 bytes dropped ...]\n\ntail", false}, // nothing kept
		{"a view naming retrieve(handle=c2)", false},          // another call's
		{"whole", false},
	} {
		if got := Shortened(c.text, "c1"); got != c.want {
			t.Errorf("Shortened(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}
