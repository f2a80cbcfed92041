package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

// Commands is the part of the executor hooks run through.
type Commands interface {
	Start(ctx context.Context, cmd executor.Command) (executor.Process, error)
}

// Options configure an Engine.
type Options struct {
	// SessionID is the session_id of every event.
	SessionID string
	// Dir is the agent's working directory: where hooks run and the cwd
	// of every event. Empty means the workspace root.
	Dir string
	// Environ is the base of the hooks' environment, filtered by
	// executor.Environ (nothing secret passes); os.Environ() when nil.
	Environ []string
	// Pass names further variables to pass from Environ (executor.Environ's
	// pass list).
	Pass []string
	// Approve decides tool calls a hooks.toml hook asks about;
	// DenyApprovals when nil.
	Approve ApprovalPolicy
	// Observe receives every verdict reached by running at least one
	// hook, with its runs, for the journal. It is called synchronously,
	// and concurrently when tools run in parallel.
	Observe func(ctx context.Context, v Verdict)
	// Logger receives hook failures, which are warnings. Nil discards.
	Logger *slog.Logger
	// On, when set, gives the executor a tool call that runs on another
	// executor than the default, by name (see tools.Placed), and its
	// working directory: the hooks of the call run there. ok false runs
	// them on the default.
	On func(name string) (cmds Commands, dir string, ok bool)
}

// Engine runs the hooks of one session. Its methods are safe for
// concurrent use, and a nil *Engine runs no hooks.
type Engine struct {
	cmds    Commands
	byEvent map[Event][]*prepared
	opts    Options
	log     *slog.Logger
	// agentID and agentType are set in a subagent's engine.
	agentID, agentType string
}

// prepared is a hook with its environment.
type prepared struct {
	*Hook
	env []string
}

// New returns an engine running hooks through cmds, in the order given
// (Load's order, then plugin hooks).
func New(cmds Commands, hooks []Hook, opts Options) *Engine {
	e := &Engine{cmds: cmds, byEvent: make(map[Event][]*prepared), opts: opts, log: opts.Logger}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.opts.Approve == nil {
		e.opts.Approve = DenyApprovals
	}
	base := opts.Environ
	if base == nil {
		base = os.Environ()
	}
	for i := range hooks {
		h := &hooks[i]
		e.byEvent[h.Event] = append(e.byEvent[h.Event],
			&prepared{Hook: h, env: executor.Environ(base, opts.Pass, h.Source.Env)})
	}
	return e
}

// ForAgent returns an engine for a subagent of the session: its events
// carry agent_id and agent_type.
func (e *Engine) ForAgent(id, typ string) *Engine {
	if e == nil {
		return nil
	}
	c := *e
	c.agentID, c.agentType = id, typ
	return &c
}

// Has reports whether any hook handles ev.
func (e *Engine) Has(ev Event) bool {
	return e != nil && len(e.byEvent[ev]) > 0
}

// Matches reports whether a hook of event ev would run for name (a tool
// name on tool events).
func (e *Engine) Matches(ev Event, name string) bool {
	if e == nil {
		return false
	}
	for _, h := range e.byEvent[ev] {
		if h.Matcher.Match(name) {
			return true
		}
	}
	return false
}

type ctxKey int

const (
	turnKey ctxKey = iota
	toolUseKey
	executorKey
)

// WithTurn returns a context whose events carry turnID as turn_id.
func WithTurn(ctx context.Context, turnID string) context.Context {
	return context.WithValue(ctx, turnKey, turnID)
}

// WithToolUse returns a context whose tool events carry id as tool_use_id:
// the id of the model's tool call, which a wrapped tool's Run does not
// otherwise receive.
func WithToolUse(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, toolUseKey, id)
}

// Input is the event object a hook reads on standard input. Fields that
// do not apply to the event are left out.
type Input struct {
	HookEventName Event  `json:"hook_event_name"`
	SessionID     string `json:"session_id"`
	TurnID        string `json:"turn_id,omitempty"`
	Cwd           string `json:"cwd"`
	// Executor names the executor a tool event's call runs on, and its
	// hooks with it, when it is not the session's default.
	Executor string `json:"executor,omitempty"`
	// Tool events.
	ToolName     string          `json:"tool_name,omitempty"`
	ToolInput    json.RawMessage `json:"tool_input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	ToolResponse *ToolResponse   `json:"tool_response,omitempty"`
	// SessionStart: startup, resume, clear or compact.
	Source string `json:"source,omitempty"`
	// SessionEnd: why the session ended.
	Reason string `json:"reason,omitempty"`
	// UserPromptSubmit.
	Prompt *string `json:"prompt,omitempty"`
	// Stop and SubagentStop.
	StopCount            *int    `json:"stop_count,omitempty"`
	StopHookActive       *bool   `json:"stop_hook_active,omitempty"`
	LastAssistantMessage *string `json:"last_assistant_message,omitempty"`
	// PreCompact: manual or auto, and the user's instructions of a
	// manual compaction (empty otherwise).
	Trigger            string  `json:"trigger,omitempty"`
	CustomInstructions *string `json:"custom_instructions,omitempty"`
	// In a subagent, and on the subagent events.
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`
}

// ToolResponse is a tool's result as PostToolUse hooks see it.
type ToolResponse struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error"`
}

// StopInput describes the agent's stopping, for Stop and SubagentStop.
type StopInput struct {
	// Count is how many times Stop has fired in this turn before.
	Count int
	// Active means the agent is already going on because a Stop hook
	// blocked, so a hook can avoid keeping it going forever.
	Active bool
	// LastAssistantMessage is the text of the agent's last message.
	LastAssistantMessage string
}

// SessionStart runs the SessionStart hooks; source is startup, resume,
// clear or compact, and is what their matchers match. The verdict's
// Context goes to the model; nothing blocks a start.
func (e *Engine) SessionStart(ctx context.Context, source string) (Verdict, error) {
	return e.fire(ctx, Input{HookEventName: SessionStart, Source: source}, source)
}

// PreCompact runs the PreCompact hooks before a conversation compaction;
// trigger is manual or auto, and is what their matchers match;
// instructions are the user's for a manual compaction. They only
// observe; after the compaction, SessionStart runs with source compact.
func (e *Engine) PreCompact(ctx context.Context, trigger, instructions string) (Verdict, error) {
	return e.fire(ctx, Input{HookEventName: PreCompact, Trigger: trigger, CustomInstructions: &instructions}, trigger)
}

// SessionEnd runs the SessionEnd hooks, which only observe.
func (e *Engine) SessionEnd(ctx context.Context, reason string) (Verdict, error) {
	return e.fire(ctx, Input{HookEventName: SessionEnd, Reason: reason}, "")
}

// UserPromptSubmit runs the UserPromptSubmit hooks. A blocked verdict
// rejects the prompt with its Reason; Context goes to the model with it.
func (e *Engine) UserPromptSubmit(ctx context.Context, prompt string) (Verdict, error) {
	return e.fire(ctx, Input{HookEventName: UserPromptSubmit, Prompt: &prompt}, "")
}

// PreToolUse runs the PreToolUse hooks for a call of tool. Wrap calls it.
func (e *Engine) PreToolUse(ctx context.Context, tool string, input json.RawMessage) (Verdict, error) {
	in := Input{HookEventName: PreToolUse, ToolName: tool, ToolInput: toolInput(input), ToolUseID: toolUseID(ctx)}
	return e.fire(ctx, in, tool)
}

// PostToolUse runs the PostToolUse hooks after a call of tool returned
// res. Wrap calls it.
func (e *Engine) PostToolUse(
	ctx context.Context, tool string, input json.RawMessage, res tools.Result,
) (Verdict, error) {
	in := Input{
		HookEventName: PostToolUse, ToolName: tool, ToolInput: toolInput(input), ToolUseID: toolUseID(ctx),
		ToolResponse: &ToolResponse{Content: res.Content, IsError: res.IsError},
	}
	return e.fire(ctx, in, tool)
}

// Stop runs the Stop hooks as the agent is about to end its turn. A
// blocked verdict means: go on, with the Reason as the next user message.
func (e *Engine) Stop(ctx context.Context, s StopInput) (Verdict, error) {
	return e.fire(ctx, stopInput(Stop, s), "")
}

// SubagentStart runs the SubagentStart hooks as a subagent starts; their
// matchers match agentType. The verdict's Context goes to the subagent.
func (e *Engine) SubagentStart(ctx context.Context, agentID, agentType string) (Verdict, error) {
	return e.fire(ctx, Input{HookEventName: SubagentStart, AgentID: agentID, AgentType: agentType}, agentType)
}

// SubagentStop runs the SubagentStop hooks as a subagent is about to
// finish. A blocked verdict means the subagent goes on, with the Reason
// as its next user message.
func (e *Engine) SubagentStop(ctx context.Context, agentID, agentType string, s StopInput) (Verdict, error) {
	in := stopInput(SubagentStop, s)
	in.AgentID, in.AgentType = agentID, agentType
	return e.fire(ctx, in, agentType)
}

func stopInput(ev Event, s StopInput) Input {
	return Input{
		HookEventName:        ev,
		StopCount:            &s.Count,
		StopHookActive:       &s.Active,
		LastAssistantMessage: &s.LastAssistantMessage,
	}
}

// toolInput returns the call's arguments as the event's tool_input: an
// empty call is {}, and arguments that are not JSON are passed as a
// string rather than dropped.
func toolInput(in json.RawMessage) json.RawMessage {
	t := strings.TrimSpace(string(in))
	switch {
	case t == "":
		return json.RawMessage("{}")
	case json.Valid([]byte(t)):
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(string(in))
	return b
}

// toolUseID is the id of the tool call: WithToolUse's, or else the one
// the tool registry passes on.
func toolUseID(ctx context.Context) string {
	if id, _ := ctx.Value(toolUseKey).(string); id != "" {
		return id
	}
	return tools.CallID(ctx)
}

// where is the executor the hooks of ctx's event run on, its working
// directory, and its name when it is not the default: a tool call's
// executor (see tools.Placed), else the default.
func (e *Engine) where(ctx context.Context) (Commands, string, string) {
	if name, _ := ctx.Value(executorKey).(string); name != "" && e.opts.On != nil {
		if c, dir, ok := e.opts.On(name); ok {
			return c, dir, name
		}
	}
	return e.cmds, e.opts.Dir, ""
}

// fire runs the hooks of in's event that match target, in order, and
// combines their answers (see Verdict).
func (e *Engine) fire(ctx context.Context, in Input, target string) (Verdict, error) {
	v := Verdict{Event: in.HookEventName, Tool: in.ToolName, ToolUseID: in.ToolUseID}
	if e == nil {
		return v, nil
	}
	var hooks []*prepared
	for _, h := range e.byEvent[in.HookEventName] {
		if !in.HookEventName.matched() || h.Matcher.Match(target) {
			hooks = append(hooks, h)
		}
	}
	if len(hooks) == 0 {
		return v, nil
	}
	var cmds Commands
	in.SessionID = e.opts.SessionID
	cmds, in.Cwd, in.Executor = e.where(ctx)
	in.TurnID, _ = ctx.Value(turnKey).(string)
	if e.agentID != "" && in.AgentID == "" {
		in.AgentID, in.AgentType = e.agentID, e.agentType
	}
	var (
		reasons, contexts []string
		asked, askReasons []string
	)
	for _, h := range hooks {
		if g := h.Source.guard; g != nil {
			// The file, or a script it runs, may have changed since the
			// session loaded it: it runs only as it was trusted.
			if tv := g.Verify(); tv.Status != layer.Trusted {
				run := Run{
					Hook: h.ID, Exit: -1,
					Skipped: fmt.Sprintf("not run: %s since trust was checked: %s", tv.Status, tv.Reason),
				}
				e.log.Warn("hook skipped", "hook", h.ID, "event", string(in.HookEventName), "tool", in.ToolName,
					"session", e.opts.SessionID, "reason", run.Skipped)
				v.Runs = append(v.Runs, run)
				continue
			}
		}
		run, a, err := e.run(ctx, cmds, h, in)
		if err != nil {
			return v, fmt.Errorf("run %s hooks: %w", in.HookEventName, err)
		}
		if a.failed != "" {
			e.log.Warn("hook failed", "hook", h.ID, "event", string(in.HookEventName), "tool", in.ToolName,
				"session", e.opts.SessionID, "error", a.failed)
			run.Failed = a.failed
			a = answer{}
			if h.Format == FormatYAML && h.OnFailure == FailBlock {
				a = answer{decision: Block, reason: fmt.Sprintf("hook %s failed (%s) and blocks on failure", h.ID, run.Failed)}
			}
		}
		run.Decision, run.Reason, run.Ignored = a.decision, a.reason, strings.Join(a.ignored, "; ")
		v.Runs = append(v.Runs, run)

		switch a.decision {
		case Block:
			reasons = append(reasons, a.reason)
		case Ask:
			asked, askReasons = append(asked, h.ID), appendNonEmpty(askReasons, a.reason)
		}
		if a.decision.rank() > v.Decision.rank() {
			v.Decision = a.decision
		}
		if a.updatedInput != nil {
			in.ToolInput, v.UpdatedInput = a.updatedInput, a.updatedInput
		}
		contexts = appendNonEmpty(contexts, a.context)
		if a.systemMessage != "" {
			v.SystemMessages = append(v.SystemMessages, a.systemMessage)
		}
		if a.stop && !v.Stop {
			v.Stop, v.StopReason = true, a.stopReason
		}
		if v.Stop || (a.decision == Block && (in.HookEventName == PreToolUse || in.HookEventName == UserPromptSubmit)) {
			break
		}
	}
	v.Context = strings.Join(contexts, "\n")
	if v.Decision == Ask {
		reasons = e.approve(ctx, &v, in, asked, askReasons, reasons)
	}
	if v.Decision == Block {
		v.Reason = strings.Join(reasons, "\n")
	}
	if e.opts.Observe != nil {
		e.opts.Observe(ctx, v)
	}
	return v, nil
}

// approve settles a verdict the hooks asked about: by a person's decision
// the context carries, else by the approval policy. A pending approval
// keeps the Ask with the hooks' reason; a denial adds its reason to the
// block reasons, which it returns.
func (e *Engine) approve(ctx context.Context, v *Verdict, in Input, asked, askReasons, reasons []string) []string {
	ap, ok := decisionFrom(ctx)
	if !ok {
		ap = e.opts.Approve(ctx, ApprovalRequest{
			Tool: in.ToolName, Input: in.ToolInput, Hooks: asked, Reason: strings.Join(askReasons, "; "),
		})
	}
	v.Approval = &ap
	switch {
	case ap.Pending:
		v.Reason, v.Asked = ap.Reason, asked
	case ap.Allowed:
		v.Decision = Allow
	default:
		v.Decision = Block
		reasons = append(reasons, ap.Reason)
	}
	return reasons
}

func appendNonEmpty(list []string, s string) []string {
	if s == "" {
		return list
	}
	return append(list, s)
}

// waitSlack bounds how long after its timeout a torn-down hook may take
// to be seen exiting: the teardown's grace period and then some. It only
// matters if the executor itself is stuck.
const waitSlack = time.Minute

// run runs one hook on in and interprets its answer. The error is the
// caller's context ending; everything the hook does wrong is a failure in
// the answer.
func (e *Engine) run(ctx context.Context, cmds Commands, h *prepared, in Input) (Run, answer, error) {
	run := Run{Hook: h.ID, Exit: -1}
	stdin, err := json.Marshal(in)
	if err != nil {
		return run, answer{failed: fmt.Sprintf("encode the event: %v", err)}, nil
	}
	stdin = append(stdin, '\n')
	hctx, cancel := context.WithTimeout(ctx, h.Timeout)
	// Ending hctx also tears down whatever the hook left running.
	defer cancel()
	start := time.Now()
	p, err := cmds.Start(hctx, executor.Command{
		Script: h.Command, Shell: h.Shell, Dir: in.Cwd, Env: h.env, Stdin: true,
	})
	if err != nil {
		if ctx.Err() != nil {
			return run, answer{}, ctx.Err()
		}
		return run, answer{failed: fmt.Sprintf("cannot start: %v", err)}, nil
	}
	go func() {
		// A hook that does not read its input gets EPIPE here, not us.
		w := p.Stdin()
		_, _ = w.Write(stdin)
		_ = w.Close()
	}()
	type capped struct {
		s         string
		truncated bool
	}
	read := func(r io.ReadCloser) <-chan capped {
		ch := make(chan capped, 1)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(r, OutputLimit+1))
			_ = r.Close() // discard the rest; the executor keeps draining
			c := capped{truncated: len(b) > OutputLimit}
			if c.truncated {
				b = b[:OutputLimit]
			}
			c.s = string(trimPartialRune(b))
			ch <- c
		}()
		return ch
	}
	outc, errc := read(p.Stdout()), read(p.Stderr())
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), h.Timeout+waitSlack)
	defer wcancel()
	exit, werr := p.Wait(wctx)
	stdout, stderr := <-outc, <-errc
	run.Duration = time.Since(start)
	run.Truncated = stdout.truncated || stderr.truncated
	if err := ctx.Err(); err != nil {
		return run, answer{}, err
	}
	switch {
	case werr != nil:
		return run, answer{failed: fmt.Sprintf("wait: %v", werr)}, nil
	case exit.TornDown && hctx.Err() != nil:
		return run, answer{failed: fmt.Sprintf("timed out after %s", h.Timeout)}, nil
	case exit.Signal != "":
		return run, answer{failed: "killed by " + exit.Signal}, nil
	}
	run.Exit = exit.Code
	if exit.Code != 2 && strings.TrimSpace(stderr.s) != "" {
		// The spec sends a hook's standard error to the log unless it
		// is a block's reason.
		e.log.Info("hook stderr", "hook", h.ID, "event", string(in.HookEventName), "session", e.opts.SessionID,
			"stderr", firstBytes(stderr.s, 4096))
	}
	return run, interpret(h.Hook, exit.Code, stdout.s, stderr.s), nil
}

// firstBytes returns at most n bytes of s, cut on a rune boundary.
func firstBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(trimPartialRune([]byte(s[:n])))
}

// trimPartialRune drops an incomplete UTF-8 sequence that truncation
// left at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}
