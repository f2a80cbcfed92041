package result_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/result"
	"github.com/aerie-run/aerie/runner/transcript"
)

const objectSchema = `{
  "type": "object",
  "properties": {
    "verdict": {"enum": ["pass", "fail"]},
    "files": {"type": "array", "items": {"type": "string"}},
    "contact": {"type": "string", "format": "email"}
  },
  "required": ["verdict"],
  "additionalProperties": false
}`

func TestCompileRefusesBadSchemas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, want string
	}{
		{"empty", "  ", "schema.json: the result schema is empty"},
		{"not JSON", `{"type":`, "schema.json: the result schema is not JSON"},
		{"not an object", `[1]`, "schema.json: a JSON Schema is an object (or true/false), not an array"},
		{"unknown type", `{"type":"objekt"}`, "schema.json: invalid JSON Schema"},
		{"bad minimum", `{"type":"integer","minimum":"3"}`, "schema.json: invalid JSON Schema"},
		{"remote reference", `{"$ref":"https://example.com/s.json"}`, "may not refer to https://example.com/s.json"},
		{"file reference", `{"$ref":"file:///etc/passwd"}`, "may not refer to file:///etc/passwd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := result.Compile("schema.json", []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile(%s) = %v, want an error containing %q", tt.doc, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "schema.json: ") {
				t.Errorf("error %q does not name the schema's source first", err)
			}
		})
	}
}

func TestToolOffersTheSchema(t *testing.T) {
	t.Parallel()
	c, err := result.Compile("s", []byte(objectSchema))
	if err != nil {
		t.Fatal(err)
	}
	tool := c.Tool()
	if tool.Name() != "submit_result" {
		t.Errorf("name %q", tool.Name())
	}
	var got, want any
	if err := json.Unmarshal(tool.Schema(), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(objectSchema), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("an object schema is the tool's input schema as it is (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(c.SchemaDigest(), "sha256:") || len(c.SchemaDigest()) != len("sha256:")+64 {
		t.Errorf("digest %q", c.SchemaDigest())
	}
}

// TestSubmit: a valid value is kept compact and ends the turn; invalid ones
// come back with paths and messages, and the third ends the run through
// Stop with result_invalid.
func TestSubmit(t *testing.T) {
	t.Parallel()
	c, err := result.Compile("s", []byte(objectSchema))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tool := c.Tool()
	stop := c.Stop()

	bad := []struct{ args, want string }{
		{`{"verdict":"maybe"}`, "/verdict: "},
		{`{"verdict":"pass","files":[1],"contact":"nobody"}`, "/files/0: "},
		{`{"extra":1}`, "/: "},
	}
	for i, b := range bad {
		res := tool.Run(ctx, json.RawMessage(b.args))
		if !res.IsError || res.EndTurn != "" {
			t.Fatalf("submission %d %s: %+v, want an error result that does not end the turn", i, b.args, res)
		}
		if !strings.Contains(res.Content, b.want) {
			t.Errorf("submission %d: %q does not name %q", i, res.Content, b.want)
		}
		_, _, stopped := stop(agent.Status{})
		if stopped != (i == len(bad)-1) {
			t.Fatalf("after invalid submission %d, Stop fired = %v", i+1, stopped)
		}
	}
	if !strings.Contains(tool.Run(ctx, json.RawMessage(`{"verdict":"pass"}`)).Content, "no more submissions") {
		t.Error("a submission after the last invalid one is taken")
	}
	out, reason, _ := stop(agent.Status{})
	if out != transcript.OutcomeResultInvalid || !strings.Contains(reason, "rejected 3 submissions") {
		t.Errorf("Stop = %q, %q", out, reason)
	}
	if _, ok := c.Value(); ok {
		t.Error("a value was kept")
	}

	c2, _ := result.Compile("s", []byte(objectSchema))
	if res := c2.Tool().Run(ctx, json.RawMessage(`{"verdict":"fail"}`)); res.IsError || res.EndTurn == "" {
		t.Fatalf("valid submission: %+v", res)
	}
	if res := c2.Tool().Run(ctx, json.RawMessage(`{"verdict": "pass"}`)); !strings.Contains(res.Content, "accepted already") {
		t.Fatalf("submission after the accepted one: %+v", res)
	}
	v, ok := c2.Value()
	if !ok || string(v) != `{"verdict":"fail"}` {
		t.Errorf("value %s, %v: want the first valid submission, compact", v, ok)
	}
	if _, _, stopped := c2.Stop()(agent.Status{}); stopped {
		t.Error("Stop fired after a valid result")
	}
}

func TestSubmitValidEndsTheTurn(t *testing.T) {
	t.Parallel()
	c, _ := result.Compile("s", []byte(objectSchema))
	res := c.Tool().Run(context.Background(), json.RawMessage(` {"verdict": "pass",
		"contact": "dev@example.com"} `))
	if res.IsError || res.EndTurn == "" {
		t.Fatalf("valid submission: %+v", res)
	}
	e, ok := c.Entry()
	if !ok || string(e.Value) != `{"verdict":"pass","contact":"dev@example.com"}` || e.SchemaDigest != c.SchemaDigest() {
		t.Errorf("entry %+v", e)
	}
	if r := c.Settle(agent.Result{Outcome: transcript.OutcomeCompleted}); r.Outcome != transcript.OutcomeCompleted {
		t.Errorf("Settle with a result: %s", r.Outcome)
	}
}

// TestWrapped: a schema of something other than an object is offered as
// the one property "result" of the arguments, and the value is what it
// holds.
func TestWrapped(t *testing.T) {
	t.Parallel()
	c, err := result.Compile("s", []byte(`{"type":"array","items":{"type":"integer"},"minItems":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Type     string         `json:"type"`
		Props    map[string]any `json:"properties"`
		Required []string       `json:"required"`
	}
	if err := json.Unmarshal(c.Tool().Schema(), &in); err != nil {
		t.Fatal(err)
	}
	if in.Type != "object" || in.Props["result"] == nil || !cmp.Equal(in.Required, []string{"result"}) {
		t.Errorf("wrapped input schema %s", c.Tool().Schema())
	}
	ctx := context.Background()
	if res := c.Tool().Run(ctx, json.RawMessage(`{"result":[]}`)); !res.IsError || !strings.Contains(res.Content, "/: ") {
		t.Errorf("empty array: %+v", res)
	}
	if res := c.Tool().Run(ctx, json.RawMessage(`[1]`)); !res.IsError {
		t.Errorf("bare array accepted: %+v", res)
	}
	if res := c.Tool().Run(ctx, json.RawMessage(`{"result":[1, 2]}`)); res.IsError {
		t.Fatalf("valid: %+v", res)
	}
	if v, _ := c.Value(); string(v) != `[1,2]` {
		t.Errorf("value %s", v)
	}
}

// TestOnStop: a model that ends its turn without a result is told once;
// the second time the run ends through Stop, and Settle turns a completed
// run without a result into result_invalid.
func TestOnStop(t *testing.T) {
	t.Parallel()
	c, _ := result.Compile("s", []byte(objectSchema))
	hook := c.OnStop()
	ctx := context.Background()
	reason, block := hook(ctx, "done")
	if !block || !strings.Contains(reason, "submit_result") {
		t.Fatalf("first end of turn: %q, %v", reason, block)
	}
	if _, _, stopped := c.Stop()(agent.Status{}); stopped {
		t.Fatal("Stop fired after the reminder")
	}
	if _, block := hook(ctx, "done"); !block {
		t.Fatal("second end of turn did not keep the run for Stop")
	}
	out, reason, stopped := c.Stop()(agent.Status{})
	if !stopped || out != transcript.OutcomeResultInvalid || !strings.Contains(reason, "without calling submit_result") {
		t.Errorf("Stop = %q, %q, %v", out, reason, stopped)
	}
	r := c.Settle(agent.Result{Outcome: transcript.OutcomeCompleted})
	if r.Outcome != transcript.OutcomeResultInvalid || r.Reason != reason {
		t.Errorf("Settle = %+v", r)
	}
	if r := c.Settle(agent.Result{Outcome: transcript.OutcomeBudgetExceeded}); r.Outcome != transcript.OutcomeBudgetExceeded {
		t.Errorf("Settle changed a budget outcome: %s", r.Outcome)
	}
}
