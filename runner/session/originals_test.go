package session

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// document is a tool that returns a large JSON document.
type document struct{ text string }

func (*document) Name() string            { return "document" }
func (*document) Description() string     { return "a large JSON document" }
func (*document) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (d *document) Run(context.Context, json.RawMessage) tools.Result {
	return tools.Result{Content: d.text}
}

// lastToolResult is the text of the tool result for callID in a request's
// last message.
func lastToolResult(t *testing.T, req testenv.ModelRequest, callID string) string {
	t.Helper()
	var r struct {
		Messages []struct {
			Content []struct {
				Type      string          `json:"type"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := req.Decode(&r); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Messages[len(r.Messages)-1].Content {
		if c.Type == "tool_result" && c.ToolUseID == callID {
			var blocks []struct{ Text string }
			var text string
			if json.Unmarshal(c.Content, &blocks) == nil {
				for _, b := range blocks {
					text += b.Text
				}
				return text
			}
			_ = json.Unmarshal(c.Content, &text)
			return text
		}
	}
	t.Fatalf("no result for %s", callID)
	return ""
}

// TestStoreOriginalsAcrossRuns runs a session as a pod does, its originals
// kept in the session store: a compressed result's original and a capped
// bash output's full text are stored, and a later run that resumes the
// session — a retried pod — retrieves the original.
func TestStoreOriginalsAcrossRuns(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := "sqlite:" + filepath.Join(t.TempDir(), "sessions.db")
			if backend == "postgres" {
				url = testenv.StartPostgres(t).NewDatabase(t)
			}
			st, err := dburl.Open(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			ws := t.TempDir()
			exe, err := executor.NewLocal(ws, executor.Options{Reaper: reaper})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = exe.Close(context.Background()) })
			var items []string
			for i := range 300 {
				items = append(items, fmt.Sprintf(`{"id": %d, "name": "item-%d", "note": "%s"}`, i, i, strings.Repeat("n", 100)))
			}
			doc := &document{text: `{"items": [` + strings.Join(items, ", ") + `]}`}
			model := testenv.StartModelServer(t,
				testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "d1", Name: "document"}, {ID: "b1", Name: "bash", Arguments: `{"command": "seq 1 20000"}`}}},
				testenv.Turn{Text: "done"},
				testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "r1", Name: "retrieve", Arguments: `{"handle": "d1"}`}}},
				testenv.Turn{Text: "got it"},
			)
			opts := Options{
				Session:    Spec{Tenant: ws},
				Extensions: LoadOptions{Dir: ws},
				Prompt:     "read the document",
				Model: Model{
					Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
					New: func(s transcript.Settings) (agent.Model, error) {
						return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
					},
				},
				Executor:  exe,
				Tools:     []tools.Tool{doc},
				Capper:    &tools.Capper{Max: 8192, Head: 2048, Tail: 2048, Compress: true},
				Originals: StoreOriginals(st, ws),
			}
			first, err := Run(t.Context(), st, opts)
			if err != nil || first.Result.Outcome != transcript.OutcomeCompleted {
				t.Fatalf("first run: %v, %+v", err, first.Result)
			}
			if got := lastToolResult(t, model.Requests()[1], "d1"); !strings.HasSuffix(got, "retrieve(handle=d1)]") {
				t.Errorf("the document is not compressed:\n%.300s", got)
			}
			id := first.Session.ID
			if got, err := st.ToolOutput(t.Context(), ws, id, "d1"); err != nil || string(got) != doc.text {
				t.Errorf("stored original: %d bytes, %v", len(got), err)
			}
			seq, err := st.ToolOutput(t.Context(), ws, id, "b1")
			if err != nil || !strings.HasPrefix(string(seq), "1\n2\n") || !strings.HasSuffix(string(seq), "\n20000\n") {
				t.Errorf("stored bash output: %d bytes, %v", len(seq), err)
			}

			opts.Session = Spec{Tenant: ws, Resume: id.String()}
			opts.Prompt = "get it back"
			second, err := Run(t.Context(), st, opts)
			if err != nil || second.Result.Outcome != transcript.OutcomeCompleted {
				t.Fatalf("resumed run: %v, %+v", err, second.Result)
			}
			got := lastToolResult(t, model.Requests()[3], "r1")
			if !strings.HasPrefix(doc.text, strings.SplitN(got, "\n[retrieve: bytes ", 2)[0]) || len(got) < 4096 {
				t.Errorf("retrieve after resume did not return the original's first page:\n%.300s", got)
			}
		})
	}
}
