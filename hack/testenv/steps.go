package testenv

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/aerie-run/aerie/runner/transcript"
)

// A step conversation is how the crash tests script a model: each step is
// one tool call whose id is "step<N>-<request>", so that a call made again
// is told apart from the first, and the model decides what to call next
// from the conversation it is sent, as a real model would.

// NextStep is the step a step conversation's model calls next, read from
// an Anthropic Messages request: the one after the last step it sees
// itself call, or that step again when the call's result says it was not
// run. A call whose record was lost in a crash is therefore made again,
// and its command runs again, which the tests' side-effect checks catch.
func NextStep(req ModelRequest) (int, error) {
	var r struct {
		Messages []struct {
			Content []struct {
				Type      string          `json:"type"`
				ID        string          `json:"id"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := req.Decode(&r); err != nil {
		return 0, err
	}
	last, lastID := 0, ""
	notRun := map[string]bool{} // call id → its result says it was not run
	for _, m := range r.Messages {
		for _, c := range m.Content {
			switch c.Type {
			case "tool_use":
				if n, ok := stepOf(c.ID); ok && n >= last {
					last, lastID = n, c.ID
				}
			case "tool_result":
				notRun[c.ToolUseID] = strings.Contains(string(c.Content), "not run")
			}
		}
	}
	if notRun[lastID] {
		return last, nil
	}
	return last + 1, nil
}

// stepOf is the step of a call id "step<N>-<request>".
func stepOf(callID string) (int, bool) {
	step, _, _ := strings.Cut(strings.TrimPrefix(callID, "step"), "-")
	n, err := strconv.Atoi(step)
	return n, err == nil
}

// StepCalls is what a step conversation's journal holds of its calls.
type StepCalls struct {
	// Calls are the ids of each step's journaled calls, in order, by the
	// step's name ("step<N>").
	Calls map[string][]string
	// Results are each call's result text, by call id.
	Results map[string]string
	// Completions are each call's completion status, by call id.
	Completions map[string]transcript.ToolStatus
}

// ReadStepCalls gathers the calls, results and completions of a step
// conversation's entries.
func ReadStepCalls(entries []transcript.Entry) StepCalls {
	sc := StepCalls{Calls: map[string][]string{}, Results: map[string]string{},
		Completions: map[string]transcript.ToolStatus{}}
	for _, en := range entries {
		switch p := en.Payload.(type) {
		case transcript.ToolCall:
			step, _, _ := strings.Cut(p.CallID, "-")
			sc.Calls[step] = append(sc.Calls[step], p.CallID)
		case transcript.ToolResult:
			var text strings.Builder
			for _, bl := range p.Content {
				text.WriteString(bl.Text)
			}
			sc.Results[p.CallID] = text.String()
		case transcript.ToolCompletion:
			sc.Completions[p.CallID] = p.Status
		}
	}
	return sc
}
