package hooks

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aerie-run/aerie/runner/tools"
)

// Wrap returns t with its calls passed through the engine's PreToolUse
// and PostToolUse hooks:
//   - a blocked PreToolUse verdict (a deny, an exit 2, an ask the
//     approval policy refused) returns an error result with the reason,
//     and the tool does not run; so does a hook that ended the turn;
//   - an ask the approval policy left to a person returns a result that
//     awaits the approval (Result.Await), and the tool does not run;
//   - an updated input replaces the call's arguments;
//   - a blocked PostToolUse verdict replaces the result with an error
//     carrying the reason;
//   - a hook of either event that answered continue: false ends the turn
//     (Result.EndTurn, with its stopReason): after a PreToolUse hook the
//     tool does not run, after a PostToolUse hook its result stands;
//   - every hook's additional context is appended to the result.
//
// A tool no hook matches is returned as it is.
func Wrap(t tools.Tool, e *Engine) tools.Tool {
	if !e.Matches(PreToolUse, t.Name()) && !e.Matches(PostToolUse, t.Name()) {
		return t
	}
	return &hooked{Tool: t, e: e}
}

// WrapAll wraps each of ts.
func WrapAll(ts []tools.Tool, e *Engine) []tools.Tool {
	out := make([]tools.Tool, len(ts))
	for i, t := range ts {
		out[i] = Wrap(t, e)
	}
	return out
}

type hooked struct {
	tools.Tool
	e *Engine
}

// Unwrap returns the wrapped tool.
func (h *hooked) Unwrap() tools.Tool { return h.Tool }

func (h *hooked) Run(ctx context.Context, call json.RawMessage) tools.Result {
	name := h.Name()
	ctx = placed(ctx, h.Tool, call)
	pre, err := h.e.PreToolUse(ctx, name, call)
	if err != nil {
		return tools.Result{Content: fmt.Sprintf("%s: not run: %v", name, err), IsError: true}
	}
	var endTurn string
	if pre.Stop {
		endTurn = "a PreToolUse hook ended the turn: " + pre.StopReason
	}
	switch {
	case pre.Decision == Ask:
		// Left to a person: the call waits for a decision, unrun.
		return tools.Result{
			Content: fmt.Sprintf("%s: not run: awaiting a person's approval: %s", name, pre.Reason), IsError: true,
			Await: &tools.Await{Hooks: pre.Asked, Reason: pre.Reason},
		}
	case pre.Blocked():
		res := tools.Result{
			Content: fmt.Sprintf("%s: blocked by a PreToolUse hook: %s", name, pre.Reason), IsError: true, EndTurn: endTurn,
		}
		return withContext(res, pre.Context)
	case pre.Stop:
		res := tools.Result{Content: fmt.Sprintf("%s: not run: %s", name, endTurn), IsError: true, EndTurn: endTurn}
		return withContext(res, pre.Context)
	}
	if pre.UpdatedInput != nil {
		// The hook may have moved the call to another executor.
		call = pre.UpdatedInput
		ctx = placed(ctx, h.Tool, call)
	}
	return h.e.AfterTool(ctx, name, call, h.Tool.Run(ctx, call), pre.Context)
}

// AfterTool runs the PostToolUse hooks of a call of tool with input call
// that returned res, and returns the result for the model: res, or a
// withheld result when a hook blocks it, followed by before (the
// PreToolUse hooks' context, "" for none) and the hooks' context. Wrap
// calls it after every call; a spawn_agent call whose child is resumed
// after a crash is answered through it too, so its hooks see it complete.
func (e *Engine) AfterTool(
	ctx context.Context, tool string, call json.RawMessage, res tools.Result, before string,
) tools.Result {
	post, err := e.PostToolUse(ctx, tool, call, res)
	if err != nil {
		// The tool ran; its result stands, with why the hooks after it
		// did not.
		res.Content += fmt.Sprintf("\n\n(PostToolUse hooks not run: %v)", err)
		return withContext(res, before)
	}
	if post.Blocked() {
		res = tools.Result{
			Content: fmt.Sprintf("%s: result withheld by a PostToolUse hook: %s", tool, post.Reason),
			IsError: true, Process: res.Process, Entries: res.Entries,
		}
	}
	if post.Stop {
		res.EndTurn = "a PostToolUse hook ended the turn: " + post.StopReason
	}
	return withContext(withContext(res, before), post.Context)
}

// withContext appends hook context to a result for the model.
func withContext(r tools.Result, hookContext string) tools.Result {
	if hookContext == "" {
		return r
	}
	if r.Content != "" {
		r.Content += "\n\n"
	}
	r.Content += hookContext
	return r
}

// placed returns ctx naming the executor t runs call on, when t is
// tools.Placed: its tool hooks run there.
func placed(ctx context.Context, t tools.Tool, call json.RawMessage) context.Context {
	p, ok := tools.PlacedOf(t)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, executorKey, p.ExecutorOf(call))
}
