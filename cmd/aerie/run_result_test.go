package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/transcript"
)

const reviewSchema = `{
  "type": "object",
  "properties": {
    "verdict": {"enum": ["approve", "reject"]},
    "issues": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["verdict", "issues"],
  "additionalProperties": false
}`

// writeSchema writes a schema file into the workspace and returns its name.
func (e *e2e) writeSchema(doc string) string {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.ws, "schema.json"), []byte(doc), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return "schema.json"
}

// TestRunOutputSchemaAccepted: the model sees submit_result with the
// schema as its input schema; an invalid submission comes back with the
// errors, the valid one ends the run: the last JSONL event is the result,
// the result file holds it and the session journals it.
func TestRunOutputSchemaAccepted(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		toolTurn(call("r1", "submit_result", map[string]any{"verdict": "maybe"})),
		toolTurn(call("r2", "submit_result", map[string]any{"verdict": "approve", "issues": []string{"typo in README"}})),
	)
	schema := e.writeSchema(reviewSchema)
	out := e.run("run", "--output-schema", schema, "--result-file", "out/result.json", "review the change")
	if out.code == 0 {
		t.Fatal("the result file's directory does not exist: writing it must fail the run")
	}
	if !strings.Contains(out.stderr, "write the result file") {
		t.Errorf("stderr does not say the result file was not written:\n%s", out.stderr)
	}

	e = newE2E(t,
		toolTurn(call("r1", "submit_result", map[string]any{"verdict": "maybe"})),
		toolTurn(call("r2", "submit_result", map[string]any{"verdict": "approve", "issues": []string{"typo in README"}})),
	)
	schema = e.writeSchema(reviewSchema)
	out = e.run("run", "--output-schema", schema, "--result-file", "result.json", "review the change")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	// The fake server sends the arguments as json.Marshal wrote them.
	want := `{"issues":["typo in README"],"verdict":"approve"}`

	last := out.events[len(out.events)-1]
	if last.Type != events.Result || string(last.Result) != want || last.Seq == 0 {
		t.Errorf("last event = %+v, want the result %s", last, want)
	}
	end := out.end(t)
	if end.Outcome != transcript.OutcomeCompleted {
		t.Errorf("outcome %s", end.Outcome)
	}
	got, err := os.ReadFile(filepath.Join(e.ws, "result.json"))
	if err != nil || string(got) != want+"\n" {
		t.Errorf("result file = %q, %v; want %s", got, err, want)
	}

	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2: the valid result ends the run", len(reqs))
	}
	var req struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := reqs[0].Decode(&req); err != nil {
		t.Fatal(err)
	}
	var offered, wantSchema any
	for _, tl := range req.Tools {
		if tl.Name == "submit_result" {
			if err := json.Unmarshal(tl.InputSchema, &offered); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = json.Unmarshal([]byte(reviewSchema), &wantSchema)
	if diff := cmp.Diff(wantSchema, offered); diff != "" {
		t.Errorf("submit_result's input schema (-want +got):\n%s", diff)
	}
	rejected := toolResults(t, reqs[1])["r1"]
	if !rejected.isError || !strings.Contains(rejected.text, "/verdict: ") || !strings.Contains(rejected.text, "/: ") {
		t.Errorf("the invalid submission's result %+v does not name /verdict and the missing property", rejected)
	}

	es := e.entries(end.Session)
	var stored []transcript.Result
	for _, en := range es {
		if r, ok := en.Payload.(transcript.Result); ok {
			stored = append(stored, r)
			if en.Seq != last.Seq {
				t.Errorf("result entry seq %d, event says %d", en.Seq, last.Seq)
			}
		}
	}
	if len(stored) != 1 || string(stored[0].Value) != want || !strings.HasPrefix(stored[0].SchemaDigest, "sha256:") {
		t.Errorf("journaled results %+v", stored)
	}

	// The store gives it back, by session and by entry.
	for _, args := range [][]string{
		{"session", "result", end.Session},
		{"session", "result", end.Session, "--seq", strconv.FormatInt(last.Seq, 10)},
	} {
		if got := e.run(args...); got.code != 0 || got.stdout != want+"\n" {
			t.Errorf("aerie %s: exit %d, %q; stderr %s", strings.Join(args, " "), got.code, got.stdout, got.stderr)
		}
	}
	if got := e.run("session", "result", end.Session, "--seq", "1"); got.code == 0 ||
		!strings.Contains(got.stderr, "no result entry 1") {
		t.Errorf("a sequence number that is no result: exit %d, %s", got.code, got.stderr)
	}
}

// TestRunOutputSchemaInvalid: three invalid submissions, or a model that
// never submits even when reminded, end the run result_invalid, exit 6,
// with no result event and no result file.
func TestRunOutputSchemaInvalid(t *testing.T) {
	t.Parallel()
	bad := func(id string) testenv.Turn {
		return toolTurn(call(id, "submit_result", map[string]any{"verdict": "approve", "issues": "none"}))
	}
	tests := []struct {
		name     string
		turns    []testenv.Turn
		requests int
		reason   string
	}{
		{"invalid thrice", []testenv.Turn{bad("a"), bad("b"), bad("c"), answer("unreachable")}, 3, "rejected 3 submissions"},
		{"no submission", []testenv.Turn{answer("all good"), answer("still all good"), answer("unreachable")}, 2,
			"without calling submit_result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, tt.turns...)
			schema := e.writeSchema(reviewSchema)
			out := e.run("run", "--output-schema", schema, "--result-file", "result.json", "review")
			if out.code != 6 {
				t.Fatalf("exit %d, want 6; stderr:\n%s", out.code, out.stderr)
			}
			end := out.end(t)
			if end.Outcome != transcript.OutcomeResultInvalid || !strings.Contains(end.Reason, tt.reason) {
				t.Errorf("session_end %s: %s; want result_invalid: %s", end.Outcome, end.Reason, tt.reason)
			}
			if last := out.events[len(out.events)-1]; last.Type != events.SessionEnd {
				t.Errorf("last event %s, want session_end: no result", last.Type)
			}
			if _, err := os.Stat(filepath.Join(e.ws, "result.json")); !os.IsNotExist(err) {
				t.Errorf("result file written: %v", err)
			}
			if n := len(e.model.Requests()); n != tt.requests {
				t.Errorf("%d model requests, want %d", n, tt.requests)
			}
			var cp transcript.Checkpoint
			for _, en := range e.entries(end.Session) {
				if c, ok := en.Payload.(transcript.Checkpoint); ok {
					cp = c
				}
			}
			if cp.Outcome != transcript.OutcomeResultInvalid {
				t.Errorf("checkpoint outcome %q, want result_invalid", cp.Outcome)
			}
		})
	}
}

// TestRunOutputSchemaConfigErrors: a schema that cannot be used stops the
// run before it starts, exit 2, naming the file.
func TestRunOutputSchemaConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		args   []string
		stderr string
	}{
		{"not JSON", `{"type":`, []string{"--output-schema", "schema.json"}, "--output-schema schema.json: the result schema is not JSON"},
		{"invalid schema", `{"type":"objekt"}`, []string{"--output-schema", "schema.json"}, "--output-schema schema.json: invalid JSON Schema"},
		{"missing file", "", []string{"--output-schema", "nope.json"}, "--output-schema: open nope.json"},
		{"result file alone", "", []string{"--result-file", "r.json"}, "--result-file needs --output-schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			if tt.schema != "" {
				e.writeSchema(tt.schema)
			}
			out := e.run(append(append([]string{"run"}, tt.args...), "task")...)
			if out.code != 2 || !strings.Contains(out.stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", out.code, out.stderr, tt.stderr)
			}
			if n := len(e.model.Requests()); n != 0 {
				t.Errorf("%d model requests before the schema was checked", n)
			}
		})
	}
}
