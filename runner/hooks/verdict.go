package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Decision is what hooks decided about an action.
type Decision string

const (
	// Proceed: no hook objected, nor explicitly allowed.
	Proceed Decision = ""
	// Allow: a hook explicitly allowed the tool call (PreToolUse), or the
	// approval policy allowed it after a hook asked.
	Allow Decision = "allow"
	// Ask: a hook asked for the user's approval. The approval policy
	// turns it into Allow or Block; a Verdict keeps it only when the
	// policy left it to a person (Approval.Pending).
	Ask Decision = "ask"
	// Block: the action is blocked — a tool call denied, a prompt
	// rejected, a tool result replaced by an error, or (Stop,
	// SubagentStop) the agent told to go on.
	Block Decision = "block"
)

// rank orders decisions when hooks disagree: a block beats an ask, which
// beats an allow.
func (d Decision) rank() int {
	switch d {
	case Block:
		return 3
	case Ask:
		return 2
	case Allow:
		return 1
	}
	return 0
}

// Output is a hook's JSON verdict, the fields the protocol defines.
// Unknown fields are ignored, so hooks written for other agents (which
// send suppressOutput, hookEventName and the like) parse.
type Output struct {
	Continue           *bool           `json:"continue,omitempty"`
	StopReason         string          `json:"stopReason,omitempty"`
	Decision           string          `json:"decision,omitempty"`
	Reason             string          `json:"reason,omitempty"`
	SystemMessage      string          `json:"systemMessage,omitempty"`
	HookSpecificOutput *SpecificOutput `json:"hookSpecificOutput,omitempty"`
}

// SpecificOutput is the event-specific part of an Output.
type SpecificOutput struct {
	HookEventName            string          `json:"hookEventName,omitempty"`
	PermissionDecision       string          `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
	AdditionalContext        string          `json:"additionalContext,omitempty"`
}

// ParseOutput parses a hook's standard output as a JSON verdict: one JSON
// object, nothing after it, every known field of the right type, decision
// "block" or "approve", permissionDecision one of allow, deny, ask and
// defer, updatedInput an object.
func ParseOutput(data []byte) (Output, error) {
	var o Output
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&o); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return Output{}, fmt.Errorf("must be a JSON object, not %s", te.Value)
			}
			return Output{}, fmt.Errorf("field %s must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return Output{}, fmt.Errorf("not a JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Output{}, errors.New("text after the JSON object")
	}
	switch o.Decision {
	case "", "block", "approve":
	default:
		return Output{}, fmt.Errorf("decision %q is not block or approve", o.Decision)
	}
	if s := o.HookSpecificOutput; s != nil {
		switch s.PermissionDecision {
		case "", "allow", "deny", "ask", "defer":
		default:
			return Output{}, fmt.Errorf("hookSpecificOutput.permissionDecision %q is not allow, deny, ask or defer",
				s.PermissionDecision)
		}
		if len(s.UpdatedInput) > 0 && !bytes.Equal(s.UpdatedInput, []byte("null")) {
			if t := bytes.TrimSpace(s.UpdatedInput); len(t) == 0 || t[0] != '{' {
				return Output{}, errors.New(
					"hookSpecificOutput.updatedInput must be a JSON object: the tool's complete new arguments")
			}
		} else {
			s.UpdatedInput = nil
		}
	}
	return o, nil
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "ptr", "struct":
		return "an object"
	}
	return k
}

// Run is one hook's run and what it answered.
type Run struct {
	// Hook is the hook's ID.
	Hook string `json:"hook"`
	// Exit is the exit code, -1 for a signal or a hook that never
	// started.
	Exit int `json:"exit"`
	// Duration is how long the hook ran.
	Duration time.Duration `json:"duration"`
	// Decision is what this hook decided.
	Decision Decision `json:"decision,omitempty"`
	// Reason is the reason it gave for a block or an ask.
	Reason string `json:"reason,omitempty"`
	// Failed says why the hook failed: it timed out, could not start,
	// exited with another code than 0 and 2, or printed invalid output.
	Failed string `json:"failed,omitempty"`
	// Ignored says what of the hook's answer had no effect, and why
	// (for example a block on an event that cannot be blocked).
	Ignored string `json:"ignored,omitempty"`
	// Truncated means the hook printed more than OutputLimit on standard
	// output or standard error.
	Truncated bool `json:"truncated,omitempty"`
	// Skipped says why the hook did not run at all: its file or a script
	// it runs changed since its trust was checked. A skipped hook decides
	// nothing.
	Skipped string `json:"skipped,omitempty"`
}

// Approval is how the approval policy decided a tool call a hook asked
// about.
type Approval struct {
	// Allowed is the decision.
	Allowed bool `json:"allowed"`
	// Reason explains it; for a denial it is what the model sees.
	Reason string `json:"reason"`
	// Policy names the policy that decided ("deny" by default).
	Policy string `json:"policy"`
	// Pending: nobody decided yet (the "ask" policy): the call must wait
	// for a person. Allowed is false; Reason is the hooks' reason.
	Pending bool `json:"pending,omitempty"`
}

// ApprovalRequest is what the approval policy decides on.
type ApprovalRequest struct {
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input"`
	// Hooks are the IDs of the hooks that asked.
	Hooks []string `json:"hooks"`
	// Reason is what the hooks gave as their reasons.
	Reason string `json:"reason"`
}

// ApprovalPolicy decides a tool call a hook asked about. It must not wait
// for a person unless one is there: a headless run has none.
type ApprovalPolicy func(ctx context.Context, req ApprovalRequest) Approval

// DenyApprovals is the default policy of a headless run: nobody can
// approve, so the call is denied with the hook's reason.
func DenyApprovals(_ context.Context, req ApprovalRequest) Approval {
	reason := "a hook asked for approval, and nobody can approve in a headless run"
	if req.Reason != "" {
		reason = req.Reason + " (approval required; denied in a headless run)"
	}
	return Approval{Allowed: false, Reason: reason, Policy: policyDeny}
}

// AllowApprovals approves every call a hook asked about: the session's
// author approved them in advance. The call runs as if the hooks had
// allowed it, and the verdict records who approved.
func AllowApprovals(_ context.Context, req ApprovalRequest) Approval {
	reason := "approved in advance by the session's approval policy"
	if req.Reason != "" {
		reason = req.Reason + " (" + reason + ")"
	}
	return Approval{Allowed: true, Reason: reason, Policy: policyAllow}
}

// AskApprovals leaves every call a hook asked about to a person: the
// approval is pending, and the tool call pauses the session (see Wrap and
// Result.Await) until someone decides; a resumed run then brings the
// decision (WithDecision).
func AskApprovals(_ context.Context, req ApprovalRequest) Approval {
	return Approval{Pending: true, Reason: req.Reason, Policy: policyAsk}
}

// The names of the approval policies, which their approvals record.
const (
	policyDeny  = "deny"
	policyAllow = "allow"
	policyAsk   = "ask"
)

// ApprovalPolicies are the policies a session can name, by name; "deny" is
// the default.
var ApprovalPolicies = map[string]ApprovalPolicy{
	policyDeny: DenyApprovals, policyAllow: AllowApprovals, policyAsk: AskApprovals,
}

type decisionKey struct{}

// WithDecision returns ctx carrying a person's decision on the tool call
// run with it: a hook that asks about that call gets a, whatever the
// session's policy. A resumed session runs an approved call with it.
func WithDecision(ctx context.Context, a Approval) context.Context {
	return context.WithValue(ctx, decisionKey{}, a)
}

func decisionFrom(ctx context.Context) (Approval, bool) {
	a, ok := ctx.Value(decisionKey{}).(Approval)
	return a, ok
}

// ParseApprovalPolicy returns the policy name names; "" is the default,
// deny.
func ParseApprovalPolicy(name string) (ApprovalPolicy, error) {
	if name == "" {
		return DenyApprovals, nil
	}
	if p, ok := ApprovalPolicies[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("unknown approval policy %q: use deny (the default: a call a hook asks about is refused), "+
		"allow (it runs) or ask (the session pauses until a person decides)", name)
}

// Verdict is what the hooks of one event decided together. Hooks run one
// after the other, in order; their answers combine so that:
//   - a block beats an ask, which beats an allow; a PreToolUse or
//     UserPromptSubmit block ends the chain, since the action will not
//     happen; other events run every hook and join the block reasons;
//   - each PreToolUse hook sees the input as the hooks before it
//     rewrote it, and UpdatedInput is the last rewrite;
//   - Context and SystemMessages collect every hook's, in order;
//   - continue: false ends the chain and sets Stop with the first
//     stopReason.
type Verdict struct {
	Event Event `json:"event"`
	// Tool is the tool of a tool event, and ToolUseID the id of its call
	// (tool_use_id), when known.
	Tool      string `json:"tool,omitempty"`
	ToolUseID string `json:"tool_use_id,omitempty"`
	// Decision is the combined decision.
	Decision Decision `json:"decision,omitempty"`
	// Reason is the reason for a block: the denial the model sees, the
	// message the loop continues with after a blocked Stop.
	Reason string `json:"reason,omitempty"`
	// Approval is set when a hook asked and the approval policy decided,
	// or left the call to a person (Approval.Pending; Decision stays Ask).
	Approval *Approval `json:"approval,omitempty"`
	// UpdatedInput replaces the tool's arguments (PreToolUse).
	UpdatedInput json.RawMessage `json:"updated_input,omitempty"`
	// Context is text the hooks added for the model.
	Context string `json:"context,omitempty"`
	// SystemMessages are for the user, not the model.
	SystemMessages []string `json:"system_messages,omitempty"`
	// Stop means a hook ended the turn (continue: false).
	Stop       bool   `json:"stop,omitempty"`
	StopReason string `json:"stop_reason,omitempty"`
	// Runs are the hooks that ran, in order.
	Runs []Run `json:"runs,omitempty"`
	// Asked are the IDs of the hooks that asked about a call left to a
	// person (Approval.Pending); Reason is then their reasons.
	Asked []string `json:"asked,omitempty"`
}

// Blocked reports whether the hooks blocked the action.
func (v Verdict) Blocked() bool { return v.Decision == Block }

// answer is one hook's interpreted answer.
type answer struct {
	decision      Decision
	reason        string
	updatedInput  json.RawMessage
	context       string
	systemMessage string
	stop          bool
	stopReason    string
	failed        string
	ignored       []string
}

// interpret reads a finished hook's exit code and output as the spec of
// its format says. Failures (failed set) are resolved by the caller.
func interpret(h *Hook, exit int, stdout, stderr string) answer {
	if exit != 0 {
		return interpretExit(h, exit, stderr)
	}
	out := strings.TrimSpace(stdout)
	if out == "" {
		return answer{}
	}
	ev := h.Event
	if out[0] != '{' {
		switch {
		case h.Format == FormatTOML:
			return answer{failed: "output is not a JSON verdict"}
		case ev == SessionStart || ev == SubagentStart || ev == UserPromptSubmit:
			return answer{context: out}
		}
		return answer{ignored: []string{fmt.Sprintf(
			"plain-text output: it adds context only on SessionStart, SubagentStart and UserPromptSubmit, not %s", ev)}}
	}
	o, err := ParseOutput([]byte(out))
	if err != nil {
		return answer{failed: "invalid JSON output: " + err.Error()}
	}
	// Osprey: session start and end verdicts are observation-only.
	if h.Format == FormatTOML && (ev == SessionStart || ev == SessionEnd) {
		return answer{
			systemMessage: o.SystemMessage,
			ignored:       []string{fmt.Sprintf("the verdict: %s hooks in hooks.toml only observe", ev)},
		}
	}
	a := interpretVerdict(h, o)
	if o.HookSpecificOutput == nil {
		return a
	}
	return interpretSpecific(h, a, o)
}

// interpretExit reads a non-zero exit code: 2 blocks, with standard error
// as the reason, where the event can be blocked; anything else fails.
func interpretExit(h *Hook, exit int, stderr string) answer {
	ev := h.Event
	if exit != 2 {
		return answer{failed: fmt.Sprintf("exit status %d", exit)}
	}
	reason := strings.TrimSpace(stderr)
	switch {
	case h.Format == FormatTOML && reason == "":
		return answer{failed: "exit status 2 without a reason on standard error"}
	case !ev.canBlock() && h.Format == FormatYAML:
		return answer{failed: fmt.Sprintf("exit status 2, but %s cannot be blocked", ev)}
	case !ev.canBlock():
		return answer{ignored: []string{fmt.Sprintf("a block (exit status 2): %s cannot be blocked", ev)}}
	case reason == "":
		reason = fmt.Sprintf("blocked by hook %s", h.ID)
	}
	return answer{decision: Block, reason: reason}
}

// interpretVerdict reads the fields of a JSON verdict every event shares:
// the system message, continue and the decision.
func interpretVerdict(h *Hook, o Output) answer {
	ev := h.Event
	a := answer{systemMessage: o.SystemMessage}
	if o.Continue != nil && !*o.Continue {
		a.stop, a.stopReason = true, o.StopReason
		if a.stopReason == "" {
			a.stopReason = fmt.Sprintf("stopped by hook %s", h.ID)
		}
	}
	switch o.Decision {
	case "block":
		if ev.canBlock() {
			a.decision, a.reason = Block, o.Reason
			if a.reason == "" {
				a.reason = fmt.Sprintf("blocked by hook %s", h.ID)
			}
		} else {
			a.ignored = append(a.ignored, fmt.Sprintf("decision block: %s cannot be blocked", ev))
		}
	case "approve":
		if ev == PreToolUse {
			a.decision = Allow
		}
	}
	return a
}

// interpretSpecific adds to a, the answer of the verdict's shared fields,
// what its hookSpecificOutput says: context for every event, and for
// PreToolUse a permission decision and an updated input.
func interpretSpecific(h *Hook, a answer, o Output) answer {
	ev, s := h.Event, o.HookSpecificOutput
	a.context = s.AdditionalContext
	if ev != PreToolUse {
		if s.PermissionDecision != "" || s.UpdatedInput != nil {
			a.ignored = append(a.ignored,
				fmt.Sprintf("permissionDecision and updatedInput apply to PreToolUse only, not %s", ev))
		}
		return a
	}
	reason := s.PermissionDecisionReason
	if reason == "" {
		reason = o.Reason
	}
	switch s.PermissionDecision {
	case "deny":
		if reason == "" {
			reason = fmt.Sprintf("denied by hook %s", h.ID)
		}
		a.decision, a.reason = Block, reason
	case "allow":
		if a.decision != Block {
			a.decision = Allow
		}
	case "ask":
		if h.Format == FormatYAML {
			return answer{failed: `permissionDecision "ask" is a hook failure for hooks/*.yaml hooks`}
		}
		if a.decision != Block {
			a.decision, a.reason = Ask, reason
		}
	case "defer":
		if h.Format == FormatYAML {
			return answer{failed: `permissionDecision "defer" is a hook failure for hooks/*.yaml hooks`}
		}
		return answer{failed: `permissionDecision "defer" is not part of the hooks.toml verdict`}
	}
	a.updatedInput = s.UpdatedInput
	return a
}
