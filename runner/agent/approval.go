package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// An approval is a pause, not a wait: a call a hook asks a person about,
// under the "ask" policy, is journaled as pending (an ApprovalRequest after
// its ToolCall) and the run ends OutcomeAwaitingApproval. A decision is
// journaled later (an ApprovalDecision), and a resumed run answers the call
// with ResolveApproval before the loop goes on.

// MaxPreview bounds the preview of a pending call's arguments.
const MaxPreview = 200

// Preview is the start of a tool call's arguments for a person to read:
// whitespace folded, at most MaxPreview bytes, cut on a rune boundary.
func Preview(args string) string {
	s := strings.Join(strings.Fields(args), " ")
	if len(s) <= MaxPreview {
		return s
	}
	cut := MaxPreview
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// requestApproval journals call c as pending a person's approval and tells
// the watchers what is asked.
func (l *Loop) requestApproval(c provider.Content, a tools.Await) *transcript.ApprovalRequest {
	req := transcript.ApprovalRequest{
		CallID: c.ToolCallID, Tool: c.ToolName, Preview: Preview(c.Arguments), Hooks: a.Hooks, Reason: a.Reason,
	}
	seq := l.append(req)
	l.emit(events.Event{
		Type: events.ApprovalRequested, Seq: seq, Turn: l.turns, CallID: req.CallID, Tool: req.Tool,
		Arguments: req.Preview, Reason: req.Reason,
	})
	return &req
}

// awaiting is the result of a run that paused on req.
func awaiting(req transcript.ApprovalRequest) Result {
	reason := fmt.Sprintf("tool call %s (%s) awaits a person's approval", req.CallID, req.Tool)
	if req.Reason != "" {
		reason += ": " + req.Reason
	}
	return Result{Outcome: transcript.OutcomeAwaitingApproval, Reason: reason, Approval: &req}
}

// Pending is a tool call a stored session paused on.
type Pending struct {
	// Call is the call, as the model made it.
	Call transcript.ToolCall
	// Request is what was asked.
	Request transcript.ApprovalRequest
	// Decision is the last decision journaled for it, if any.
	Decision *transcript.ApprovalDecision
}

// PendingApproval returns the call the session's last run paused on: a
// call of the last assistant message with an ApprovalRequest, and neither
// a result nor a ToolCall entry after the request (which a resumed run
// journals before it runs the approved call, so that a crash then leaves
// an interrupted call, never one run twice).
func PendingApproval(snap transcript.Snapshot) (Pending, bool) {
	last := lastAssistant(snap)
	if last < 0 {
		return Pending{}, false
	}
	var (
		p     Pending
		found bool
		calls = map[string]transcript.ToolCall{}
	)
	for _, e := range snap.Entries[last+1:] {
		switch x := e.Payload.(type) {
		case transcript.ToolCall:
			if found && x.CallID == p.Call.CallID {
				found = false // the approved call was started
			}
			calls[x.CallID] = x
		case transcript.ApprovalRequest:
			if c, ok := calls[x.CallID]; ok {
				p, found = Pending{Call: c, Request: x}, true
			}
		case transcript.ApprovalDecision:
			if found && x.CallID == p.Call.CallID {
				d := x
				p.Decision = &d
			}
		case transcript.ToolResult:
			if found && x.CallID == p.Call.CallID {
				found = false
			}
		}
	}
	return p, found
}

// lastAssistant is the index of the entry of the last assistant message,
// -1 when a user message follows it or there is none.
func lastAssistant(snap transcript.Snapshot) int {
	last := -1
	for i, e := range snap.Entries {
		switch e.Payload.(type) {
		case transcript.AssistantMessage:
			last = i
		case transcript.UserMessage:
			last = -1
		}
	}
	return last
}

// Denied is the result the model gets for a pending call a person denied.
func Denied(tool, reason string) string {
	if reason == "" {
		reason = "no reason given"
	}
	return fmt.Sprintf("%s: not run: a person denied this call: %s", tool, reason)
}

// ResolveApproval answers the pending call p by its decision, before a
// resumed loop goes on: an allowed call is journaled again (write-ahead)
// and run through t with its arguments, a denied one gets an error result
// with the reason. It returns the entries journaled, for the snapshot the
// loop continues from. p.Decision must be set. The caller gives ctx the
// decision for the hooks that ask again (hooks.WithDecision).
func ResolveApproval(
	ctx context.Context, t Tools, j Journal, p Pending, observe func(events.Event),
) []transcript.Entry {
	d := p.Decision
	var (
		out    []transcript.Entry
		res    tools.Result
		status transcript.ToolStatus
		start  = time.Now()
	)
	record := func(pl transcript.Payload) {
		var seq int64
		if j != nil {
			seq = j.Append(pl)
		}
		out = append(out, transcript.Entry{Seq: seq, Payload: pl, CreatedAt: time.Now()})
	}
	emit := func(e events.Event) {
		if observe != nil {
			e.Time = time.Now()
			observe(e)
		}
	}
	switch {
	case !d.Allowed:
		res, status = tools.Result{Content: Denied(p.Call.Name, d.Reason), IsError: true}, transcript.ToolError
	case t == nil:
		res = tools.Result{Content: fmt.Sprintf("unknown tool %q: no tools are available", p.Call.Name), IsError: true}
		status = transcript.ToolError
	default:
		record(p.Call)
		emit(events.Event{Type: events.ToolCall, CallID: p.Call.CallID, Tool: p.Call.Name,
			Arguments: restoredArguments(p.Call.Input)})
		if j != nil {
			if err := j.Barrier(ctx); err != nil && ctx.Err() != nil {
				res = tools.Result{Content: "not run: " + context.Cause(ctx).Error(), IsError: true}
				status = transcript.ToolCancelled
				break
			}
		}
		start = time.Now()
		res = t.Run(ctx, p.Call.CallID, p.Call.Name, json.RawMessage(restoredArguments(p.Call.Input)))
		status = toolStatus(ctx, res)
		if res.Await != nil {
			// A hook asked again about the call it was approved for: the
			// decision stands for this call only, so it is refused.
			res = tools.Result{Content: p.Call.Name + ": not run: " + res.Content, IsError: true}
			status = transcript.ToolError
		}
	}
	d2 := time.Since(start)
	record(transcript.ToolResult{
		CallID:  p.Call.CallID,
		Content: []transcript.Block{{Type: transcript.BlockText, Text: res.Content}},
		IsError: res.IsError,
	})
	comp := transcript.ToolCompletion{CallID: p.Call.CallID, Status: status, Duration: d2}
	if res.IsError {
		comp.Error = CompletionError(res.Content)
	}
	record(comp)
	emit(events.Event{
		Type: events.ToolResult, CallID: p.Call.CallID, Tool: p.Call.Name, Text: res.Content, IsError: res.IsError,
		Status: string(status), Duration: d2, Process: res.Process,
	})
	return out
}

// Paused ends a resumed run that has no decision for its pending call: it
// pauses again, without a model request, and says again what is asked.
func Paused(ctx context.Context, j Journal, p Pending, observe func(events.Event), usage transcript.Usage) Result {
	l := New(Config{Journal: j, Observe: observe}, nil, usage)
	l.emit(events.Event{
		Type: events.ApprovalRequested, CallID: p.Request.CallID, Tool: p.Request.Tool,
		Arguments: p.Request.Preview, Reason: p.Request.Reason,
	})
	return l.end(ctx, awaiting(p.Request))
}

// AwaitingOther ends a run, awaiting approval, that waits on req: a call
// of another session of its tree (a subagent's), which journaled req and
// told the watchers of it.
func AwaitingOther(
	ctx context.Context, j Journal, req transcript.ApprovalRequest, observe func(events.Event), usage transcript.Usage,
) Result {
	return New(Config{Journal: j, Observe: observe}, nil, usage).end(ctx, awaiting(req))
}
