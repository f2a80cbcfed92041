// Package result is the contract of a structured result: a run asked for a
// result of a JSON Schema (aerie run --output-schema, an AgentSession's
// spec.result.schema) offers the model a submit_result tool whose input
// schema is that schema, accepts the first submission the schema accepts,
// and ends the run with it. A submission the schema rejects goes back to
// the model with the validation errors, up to MaxInvalid times; a model
// that ends its turn without submitting is told once to submit. Either
// way, a run that gets no valid result ends with the outcome
// result_invalid.
//
// The contract plugs into the loop as a tool (Tool), a stop hook
// (OnStop) and a stop condition (Stop): the loop knows nothing of it.
package result

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// ToolName is the name of the tool the model submits its result with.
const ToolName = "submit_result"

// MaxInvalid is how many submissions the schema may reject before the run
// ends without a result.
const MaxInvalid = 3

// wrapKey is the one argument of submit_result when the schema does not
// describe an object: tool arguments are always an object, so the value
// goes in this property.
const wrapKey = "result"

// maxErrors bounds the validation errors told to the model for one
// submission.
const maxErrors = 20

// Contract is one run's result contract. It is safe for concurrent use.
type Contract struct {
	source string
	schema *jsonschema.Schema
	// input is submit_result's input schema; wrapped says that it puts
	// the schema under wrapKey.
	input   json.RawMessage
	wrapped bool
	digest  string

	mu      sync.Mutex
	value   json.RawMessage
	invalid int
	nudged  bool
	// failed is why the run ends without a result, once it must.
	failed string
}

// Compile reads a JSON Schema document and returns its contract. source
// names where the schema came from (a file, a field of the spec); every
// error says it. A document that is not JSON, or not a valid schema (by
// its $schema's metaschema, draft 2020-12 when it names none), or whose
// references cannot be resolved, is an error.
func Compile(source string, doc []byte) (*Contract, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, fmt.Errorf("%s: the result schema is empty", source)
	}
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%s: the result schema is not JSON: %w", source, err)
	}
	obj, isObject := parsed.(map[string]any)
	if _, isBool := parsed.(bool); !isObject && !isBool {
		return nil, fmt.Errorf("%s: a JSON Schema is an object (or true/false), not %s", source, jsonKind(parsed))
	}
	const url = "aerie:result-schema.json"
	c := jsonschema.NewCompiler()
	// A result a pipeline parses: "format" is checked, not only noted.
	c.AssertFormat()
	// Nothing is fetched: a schema that refers outside itself is refused.
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(url, parsed); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid JSON Schema: %w", source, err)
	}
	sum := sha256.Sum256(doc)
	ct := &Contract{source: source, schema: sch, digest: "sha256:" + hex.EncodeToString(sum[:])}
	if isObject && obj["type"] == "object" {
		var buf bytes.Buffer
		if err := json.Compact(&buf, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		ct.input = buf.Bytes()
	} else {
		ct.wrapped = true
		ct.input, err = json.Marshal(map[string]any{
			"type":                 "object",
			"properties":           map[string]any{wrapKey: parsed},
			"required":             []string{wrapKey},
			"additionalProperties": false,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
	}
	return ct, nil
}

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("the result schema may not refer to %s: put what it needs in $defs", url)
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// Source is where the schema came from.
func (c *Contract) Source() string { return c.source }

// SchemaDigest is the content digest ("sha256:…") of the schema document.
func (c *Contract) SchemaDigest() string { return c.digest }

// InputSchema is submit_result's input schema: the schema itself when it
// describes an object, else an object whose one property "result" it
// describes.
func (c *Contract) InputSchema() json.RawMessage { return c.input }

// Value returns the accepted result, compact JSON, once there is one.
func (c *Contract) Value() (json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.value, c.value != nil
}

// Entry is the journal entry of the accepted result.
func (c *Contract) Entry() (transcript.Result, bool) {
	v, ok := c.Value()
	return transcript.Result{Value: v, SchemaDigest: c.digest}, ok
}

// Tool is submit_result.
func (c *Contract) Tool() tools.Tool { return submitTool{c} }

// Stop ends the run with OutcomeResultInvalid before the next model
// request once no valid result can come any more.
func (c *Contract) Stop() agent.StopCondition {
	return func(agent.Status) (transcript.Outcome, string, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.failed == "" || c.value != nil {
			return "", "", false
		}
		return transcript.OutcomeResultInvalid, c.failed, true
	}
}

// OnStop is asked when the model ends its turn: without a result it tells
// the model once to call submit_result; the second time, it keeps the run
// going only for Stop to end it with OutcomeResultInvalid.
func (c *Contract) OnStop() agent.StopHook {
	return func(context.Context, string) (string, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case c.value != nil:
			return "", false
		case !c.nudged:
			c.nudged = true
			return "You ended your turn without submitting the result this task asks for. " +
				"Call the " + ToolName + " tool now with the result, matching its input schema.", true
		}
		c.failed = "the model ended its turn without calling " + ToolName + ", after being reminded to"
		return "No result was submitted: the run ends without one.", true
	}
}

// Settle is the outcome of a run that ended as r: a run that completed
// without a valid result did not complete (a Stop hook or a hook that
// ended the turn can end it so); any other outcome stands.
func (c *Contract) Settle(r agent.Result) agent.Result {
	if _, ok := c.Value(); ok || r.Outcome != transcript.OutcomeCompleted {
		return r
	}
	r.Outcome, r.Reason = transcript.OutcomeResultInvalid, "the run ended without a result submitted with "+ToolName
	c.mu.Lock()
	if c.failed != "" {
		r.Reason = c.failed
	}
	c.mu.Unlock()
	return r
}

// submit checks one submission: the accepted value, or what is wrong with
// it for the model to read.
func (c *Contract) submit(args json.RawMessage) tools.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.value != nil {
		return tools.Result{Content: "The result was accepted already.", EndTurn: "the result was submitted"}
	}
	if c.failed != "" {
		return tools.Result{Content: ToolName + ": no more submissions are taken: " + c.failed, IsError: true}
	}
	value, problems := c.check(args)
	if len(problems) == 0 {
		c.value = value
		return tools.Result{Content: "Result accepted.", EndTurn: "the result was submitted"}
	}
	c.invalid++
	var b strings.Builder
	fmt.Fprintf(&b, "%s: the result does not match the schema:\n", ToolName)
	for _, p := range problems {
		fmt.Fprintf(&b, "- %s\n", p)
	}
	if left := MaxInvalid - c.invalid; left > 0 {
		fmt.Fprintf(&b, "Fix these and call %s again (%d more invalid submission(s) end the run without a result).",
			ToolName, left)
	} else {
		c.failed = fmt.Sprintf("the schema rejected %d submissions of the result", c.invalid)
		b.WriteString("That was the last submission taken: the run ends without a result.")
	}
	return tools.Result{Content: b.String(), IsError: true}
}

// check returns the value of a submission, compact, or the problems the
// schema found in it, each "PATH: MESSAGE" (PATH a JSON pointer into the
// value, "/" for the whole).
func (c *Contract) check(args json.RawMessage) (json.RawMessage, []string) {
	raw := bytes.TrimSpace(args)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if c.wrapped {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, []string{"/: the arguments are not a JSON object: " + err.Error()}
		}
		v, ok := obj[wrapKey]
		if !ok {
			return nil, []string{fmt.Sprintf("/: missing property %q, which holds the result", wrapKey)}
		}
		raw = v
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, []string{"/: the result is not JSON: " + err.Error()}
	}
	if err := c.schema.Validate(inst); err != nil {
		return nil, problems(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, []string{"/: " + err.Error()}
	}
	return buf.Bytes(), nil
}

// problems lists the leaf errors of a validation failure, as paths into
// the value and messages.
func problems(err error) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{"/: " + err.Error()}
	}
	var out []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			path := u.InstanceLocation
			if path == "" {
				path = "/"
			}
			out = append(out, path+": "+u.Error.String())
		}
		for _, e := range u.Errors {
			walk(e)
		}
	}
	walk(*ve.BasicOutput())
	if len(out) == 0 {
		out = []string{"/: " + ve.Error()}
	}
	if len(out) > maxErrors {
		out = append(out[:maxErrors], fmt.Sprintf("… and %d more", len(out)-maxErrors))
	}
	return out
}

// submitTool is submit_result.
type submitTool struct{ c *Contract }

func (t submitTool) Name() string { return ToolName }

func (t submitTool) Description() string {
	d := "Submit the final result of the task. Its arguments are the result, which must match this tool's input schema. " +
		"A valid result ends the session; an invalid one comes back with what is wrong, to fix and submit again " +
		fmt.Sprintf("(at most %d invalid submissions).", MaxInvalid)
	if t.c.wrapped {
		d += fmt.Sprintf(" Put the result in the %q argument.", wrapKey)
	}
	return d
}

func (t submitTool) Schema() json.RawMessage { return t.c.input }

func (t submitTool) Run(_ context.Context, call json.RawMessage) tools.Result {
	return t.c.submit(call)
}
