package session

import (
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/transcript"
)

// hookEntry is the journal entry of a hook verdict, when there is one to
// keep: the hooks decided something (allowed, blocked, rewrote a tool's
// input, added context, ended the turn, asked and had the approval policy
// decide) or one of them failed, was skipped or was ignored. Hooks that
// ran and said nothing leave only their event.
func hookEntry(v hooks.Verdict) (transcript.HookVerdict, bool) {
	keep := v.Decision != hooks.Proceed || v.UpdatedInput != nil || v.Context != "" || v.Stop ||
		v.Approval != nil || len(v.SystemMessages) > 0
	runs := make([]transcript.HookRun, len(v.Runs))
	for i, r := range v.Runs {
		runs[i] = transcript.HookRun{
			Hook: r.Hook, Exit: r.Exit, Duration: r.Duration, Decision: string(r.Decision), Reason: r.Reason,
			Failed: r.Failed, Ignored: r.Ignored, Skipped: r.Skipped, Truncated: r.Truncated,
		}
		keep = keep || r.Failed != "" || r.Ignored != "" || r.Skipped != ""
	}
	if !keep {
		return transcript.HookVerdict{}, false
	}
	e := transcript.HookVerdict{
		Event: string(v.Event), CallID: v.ToolUseID, Tool: v.Tool, Decision: string(v.Decision), Reason: v.Reason,
		UpdatedInput: v.UpdatedInput, Context: v.Context, SystemMessages: v.SystemMessages,
		Stop: v.Stop, StopReason: v.StopReason, Runs: runs,
	}
	if a := v.Approval; a != nil {
		e.Approval = &transcript.HookApproval{Allowed: a.Allowed, Reason: a.Reason, Policy: a.Policy}
	}
	return e, true
}
