package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/approvals"
	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/extensions/userlayer"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/instructions"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/skills"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// equipment is what the extensions equip a session with for its whole run:
// the loaders' options, the built-in tools, the MCP connections, and the
// loadout in use — the system prompt, the tools the model is offered
// (hooks wrapped around them) and the hook engine for the lifecycle
// events. A reload swaps the loadout at a turn boundary after
// extension_manage changed the user layer; the rest stays.
type equipment struct {
	// opts are the run's, the persona applied; load are the loaders'
	// options they make, which a reload uses again.
	opts Options
	load LoadOptions
	// builtin are the built-in tools, extension_manage among them when
	// the session has a user layer (then manager is set).
	builtin []tools.Tool
	manager *userlayer.Manager
	// servers are the session's MCP connections, started by startMCP;
	// a reload keeps them.
	servers *mcp.Manager
	session string
	// pending is the session while it is being stored (see pendingSession).
	pending *pendingSession
	// journal records what the hooks decide.
	journal *journal.Writer

	// loadout is what the model sees, swapped whole by a reload.
	loadout
	// startContext is what SessionStart hooks added to the system
	// prompt, kept across reloads.
	startContext string
	// memory is the memory as the run started (see package memory): it
	// stays as it was for the whole run, whatever the memory tool saves,
	// so that the prompt's prefix stays cacheable.
	memory string

	// prompt is the user's prompt with the skills it names attached, and
	// promptSeq its sequence number when it was journaled before the loop
	// runs (a new session is stored with it; see pendingSession).
	prompt    string
	promptSeq int64

	// compactor compacts the conversation (see converse).
	compactor *compaction.Policy

	// capper caps and compresses the session's tool results, keeping
	// their originals where opts.Originals says (see start).
	capper *tools.Capper

	// approve is the session's approval policy, its saved approvals
	// (approvals.toml) first.
	approve hooks.ApprovalPolicy

	// follower adds the project instructions below the working directory
	// as the file tools reach them; nil when the workspace cannot be read.
	follower *instructions.Follower
	// elsewhere adds the project instructions of the session's other
	// executors once the agent first uses a tool there; nil with one
	// executor.
	elsewhere *instructions.Executors

	// turnTools, when not nil, are the only tools the prompt's turn
	// offers: a plugin command's allowed-tools (see expandCommand).
	turnTools []string

	// spawn is the session's spawn_agent tool (see subagents.go); nil
	// when it offers none.
	spawn tools.Tool
	// stop are the loop's stop conditions: the tree's budget.
	stop []agent.StopCondition
}

// newEquipment loads the layers' artifacts. A malformed artifact in a
// layer whoever runs the session controls stops the launch; one in the
// workspace is skipped with its reason in the report.
func newEquipment(opts Options, builtin []tools.Tool) (*equipment, error) {
	lo := opts.Extensions
	lo.Commands = opts.Executor
	lo.Executors = opts.executors().named()
	x, err := LoadExtensions(lo)
	if err == nil {
		err = x.Err()
	}
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	warnProblems(opts.Logger, x)
	eq := &equipment{opts: opts, load: lo, loadout: loadout{ext: x}, builtin: slices.Clip(builtin), prompt: opts.Prompt}
	eq.approve = approvals.Load(lo.Layers, opts.Logger).Then(opts.Approve)
	if opts.Memory != nil {
		eq.builtin = append(eq.builtin, opts.Memory.Tool())
	}
	if len(opts.Executors) > 0 {
		eq.elsewhere = instructions.NewExecutors(opts.executors().files)
	}
	if eq.follower, err = instructions.New(lo.workspace(), lo.Dir); err != nil {
		opts.Logger.Warn("the project instructions below the working directory are not followed", "err", err)
	}
	m, err := userlayer.New(userlayer.Options{
		Layers: lo.Layers, Workspace: lo.workspace(), WorkDir: lo.Dir, Builtins: BuiltinToolNames(),
	})
	switch {
	case err == nil:
		eq.manager = m
		eq.builtin = append(eq.builtin, userlayer.NewTool(m))
		m.Reloaded(x.report(false), nil)
	case !errors.Is(err, userlayer.ErrNoUserLayer):
		opts.Logger.Warn("extension_manage is not offered", "err", err)
	}
	// An unknown toolset stops the launch before anything starts.
	if _, err := eq.offered(x); err != nil {
		return nil, err
	}
	if opts.Prompt != "" {
		atts, err := x.Skills.Attach(opts.Prompt)
		if err != nil {
			return nil, &ConfigError{Err: fmt.Errorf("prompt: %w", err)}
		}
		eq.prompt = skills.Message(opts.Prompt, atts)
	}
	return eq, nil
}

// warnProblems logs what the loaders skipped in the layers, and what they
// left inactive for want of trust, each with the report's sanitized
// reason; `aerie extensions` says the same in full.
func warnProblems(log *slog.Logger, x *Extensions) {
	for _, a := range x.Set.Report.Artifacts {
		switch a.Status {
		case layer.StatusSkipped:
			log.Warn("extension skipped", "type", a.Type, "file", a.Path, "reason", a.Reason)
		case layer.StatusInactive:
			log.Warn("extension inactive", "type", a.Type, "file", a.Path, "trust", a.Trust, "reason", a.Reason)
		}
	}
	for _, f := range x.Hooks.Files {
		if f.Status == layer.StatusInactive {
			log.Warn("hook file inactive", "file", f.Path, "reason", f.Reason)
		}
	}
	if x.Plugins != nil {
		for _, e := range x.Plugins.Entries {
			if e.Status == layer.StatusSkipped {
				log.Warn("plugin skipped", "dir", e.Dir, "reason", e.Reason)
			}
		}
	}
	// The loaders' problems, in one shape; their reasons quote the files,
	// which the workspace controls.
	for _, ps := range []struct {
		msg   string
		probs []layer.Problem
	}{
		{"hook file skipped", x.Hooks.Problems},
		{"skill skipped", x.Skills.Problems},
		{"MCP server declaration skipped", x.MCP.Problems},
	} {
		for _, p := range ps.probs {
			log.Warn(ps.msg, "file", p.File, "field", p.Field, "reason", layer.SanitizeReason(p.Reason))
		}
	}
}

// offered returns the tools x offers besides the MCP servers': the
// built-ins, the custom tools, the skill tool and the caller's, with
// their descriptions overridden and the toolset applied.
func (eq *equipment) offered(x *Extensions) ([]tools.Tool, error) {
	builtin := eq.builtin
	if eq.spawn != nil {
		builtin = append(slices.Clip(builtin), eq.spawn)
	}
	return eq.offeredWith(x, builtin)
}

// offeredWith is offered with builtin as the built-in tools, spawn_agent
// among them when the agent may spawn. It changes nothing of eq, so that
// children spawned at once may call it together.
func (eq *equipment) offeredWith(x *Extensions, builtin []tools.Tool) ([]tools.Tool, error) {
	opts := eq.opts
	all := append([]tools.Tool(nil), builtin...)
	for _, t := range x.Set.Tools {
		all = append(all, t)
	}
	if x.Skills.Len() > 0 {
		all = append(all, skills.NewTool(x.Skills))
	}
	all = append(all, opts.Tools...)
	for i, t := range all {
		all[i] = x.Set.Descriptions.Apply(t)
	}
	if opts.Toolset != "" {
		var err error
		if all, err = applyToolset(x.Set.Toolsets, opts.Toolset, all, opts.Logger); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// loadout is what one load of the extensions gives the model: the
// extensions loaded, the hook engine, the tools wrapped in it, and the
// system prompt with the skills catalog.
type loadout struct {
	ext    *Extensions
	engine *hooks.Engine
	reg    *tools.Registry
	system string
}

// build makes the loadout of x: the hook engine, the tools wrapped in it
// (the MCP servers' after the toolset's), and the system prompt with the
// skills catalog. It changes nothing in eq.
func (eq *equipment) build(x *Extensions) (loadout, error) {
	opts := eq.opts
	all, err := eq.offered(x)
	if err != nil {
		return loadout{}, err
	}
	if eq.servers != nil {
		all = append(all, eq.servers.Tools()...)
	}
	if eq.turnTools != nil {
		all = slices.DeleteFunc(all, func(t tools.Tool) bool { return !slices.Contains(eq.turnTools, t.Name()) })
	}
	engine := hooks.New(opts.Executor, x.Hooks.Hooks, hooks.Options{
		SessionID: eq.session,
		Dir:       opts.Extensions.Dir,
		Observe: func(_ context.Context, v hooks.Verdict) {
			emitHook(opts.Observe, v)
			if e, ok := hookEntry(v); ok && eq.journal != nil {
				eq.journal.Append(e)
			}
		},
		Approve: eq.approve,
		Logger:  opts.Logger,
		On:      opts.executors().hookOn,
	})
	if eq.capper.Compresses() {
		// The originals compression keeps are the session's, like the
		// retrieve tool that returns them.
		all = append(all, tools.NewRetrieve(eq.capper))
	}
	if opts.Result != nil {
		// The result asked for is the run's, whatever the toolset.
		all = append(all, opts.Result.Tool())
	}
	reg, err := registry(opts, eq.capper, hooks.WrapAll(all, engine))
	if err != nil {
		return loadout{}, &ConfigError{Err: err}
	}
	system := x.Set.Prompt.Text()
	if x.Skills.Len() > 0 {
		system += "\n\n" + x.Skills.Catalog()
	}
	return loadout{ext: x, engine: engine, reg: reg, system: system}, nil
}

// start makes the session's hook engine and tools.
func (eq *equipment) start(session uuid.UUID, w *journal.Writer) error {
	eq.session, eq.journal = session.String(), w
	eq.capper = sessionCapper(eq.opts, session)
	l, err := eq.build(eq.ext)
	if err != nil {
		return err
	}
	eq.loadout = l
	return nil
}

// systemPrompt is the prompt the model is given now.
func (eq *equipment) systemPrompt() string {
	p := eq.system
	for _, s := range []string{eq.memory, eq.startContext} {
		if s != "" {
			p += "\n\n" + s
		}
	}
	return p
}

// applyToolset keeps the tools of the named toolset.
func applyToolset(ts *extensions.Toolsets, name string, all []tools.Tool, log *slog.Logger) ([]tools.Tool, error) {
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.Name()
	}
	selected, missing, err := ts.Apply(name, names)
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("toolset %q: %w", name, err)}
	}
	if len(missing) > 0 {
		log.Warn("toolset names tools that are not available", "toolset", name, "tools", strings.Join(missing, ", "))
	}
	keep := map[string]bool{}
	for _, n := range selected {
		keep[n] = true
	}
	var out []tools.Tool
	for _, t := range all {
		if keep[t.Name()] {
			out = append(out, t)
		}
	}
	return out, nil
}

// converse runs the SessionStart hooks, then resume (which continues what
// the session's last run left pending), then the UserPromptSubmit hooks
// and the loop, with compactor compacting its conversation: it is told
// what every request carries besides the messages (the system prompt, the
// tools) now and after each reload.
func (eq *equipment) converse(
	ctx context.Context, source string, model agent.Model, compactor *compaction.Policy,
	w *journal.Writer, snap transcript.Snapshot,
	resume func(context.Context, transcript.Snapshot) (transcript.Snapshot, *transcript.ApprovalRequest),
) agent.Result {
	if p, ok := agent.PendingApproval(snap); ok {
		var paused bool
		if snap, paused = eq.resolveApproval(ctx, w, snap, p); paused {
			return agent.Paused(ctx, w, p, eq.opts.Observe, usageOf(snap))
		}
	}
	eq.sessionStart(ctx, source)
	snap, await := resume(ctx, snap)
	if await != nil {
		// A subagent paused again: so does the tree, without a request.
		return agent.AwaitingOther(ctx, w, *await, eq.opts.Observe, usageOf(snap))
	}
	// The hooks of this prompt's turn — UserPromptSubmit, the tool hooks,
	// Stop — share its id (turn_id).
	ctx = hooks.WithTurn(ctx, uuid.NewString())
	prompt, endTurn, err := eq.userPrompt(ctx, eq.prompt)
	if err != nil {
		return agent.Result{Outcome: transcript.OutcomeFailed, Reason: err.Error(), Err: err}
	}
	if endTurn != "" {
		return agent.Result{Outcome: transcript.OutcomeCompleted, Reason: endTurn}
	}
	return eq.loop(model, compactor, w, snap).Run(ctx, prompt)
}

// usageOf is the stored session's cumulative usage.
func usageOf(snap transcript.Snapshot) transcript.Usage {
	if snap.Usage != nil {
		return *snap.Usage
	}
	return transcript.Usage{}
}

// compactNow compacts the conversation at the user's request (a /compact
// prompt) with the focus instructions, if any, and ends the run without a
// model request (see agent.Loop.Compact).
func (eq *equipment) compactNow(
	ctx context.Context, model agent.Model, compactor *compaction.Policy, w *journal.Writer, snap transcript.Snapshot,
	focus string,
) agent.Result {
	return eq.loop(model, compactor, w, snap).Compact(ctx, focus)
}

// loop makes the loop that continues snap, with compactor compacting its
// conversation.
func (eq *equipment) loop(
	model agent.Model, compactor *compaction.Policy, w *journal.Writer, snap transcript.Snapshot,
) *agent.Loop {
	opts := eq.opts
	var usage transcript.Usage
	if snap.Usage != nil {
		usage = *snap.Usage
	}
	eq.compactor = compactor
	eq.compactor.SetFixed(eq.systemPrompt(), eq.reg.Definitions())
	history, seqs := agent.HistoryWithSeqs(snap)
	if eq.follower != nil {
		eq.follower.Seed(history)
	}
	if eq.elsewhere != nil {
		eq.elsewhere.Seed(history)
	}
	var loop *agent.Loop
	loop = agent.New(agent.Config{
		Model:       model,
		Tools:       eq.loopTools(),
		Journal:     w,
		System:      eq.systemPrompt(),
		Stop:        eq.stops(),
		Concurrent:  concurrent,
		MaxDuration: opts.Budget.MaxDuration,
		OnStop:      eq.stopHook(),
		// At each turn boundary a required MCP server lost mid-session
		// is reconnected (or the turn fails), and what extension_manage
		// changed takes effect.
		BeforeRequest: eq.turnBoundary(func() *agent.Loop { return loop }),
		Compactor:     compactor,
		HistorySeqs:   seqs,
		PromptSeq:     eq.promptSeq,
		Observe:       opts.Observe,
		Logger:        opts.Logger.With("session", eq.session),
	}, history, usage)
	return loop
}

// compactHooks tell the session's hooks of its compactions: PreCompact
// before one, SessionStart with source compact after it, whose added
// context enters the replacement, so that the model reads it after the
// cut; the system prompt stays as it is.
type compactHooks struct{ eq *equipment }

// hookTrigger is the trigger PreCompact hooks are told: Claude Code's two,
// manual and auto; overflow recovery is automatic.
func hookTrigger(t compaction.Trigger) string {
	if t == compaction.TriggerManual {
		return string(compaction.TriggerManual)
	}
	return string(compaction.TriggerAuto)
}

func (h compactHooks) Pre(ctx context.Context, trigger compaction.Trigger, focus string) {
	if _, err := h.eq.engine.PreCompact(ctx, hookTrigger(trigger), focus); err != nil {
		h.eq.opts.Logger.Warn("PreCompact hooks", "err", err)
	}
}

func (h compactHooks) Post(ctx context.Context, _ compaction.Trigger) string {
	v, err := h.eq.engine.SessionStart(ctx, "compact")
	if err != nil {
		h.eq.opts.Logger.Warn("SessionStart hooks", "source", "compact", "err", err)
		return ""
	}
	return v.Context
}

// sessionCapper is the capper of the session's tool results: opts.Capper
// (the default limits when nil) keeping the originals where opts.Originals
// says.
func sessionCapper(opts Options, session uuid.UUID) *tools.Capper {
	c := tools.NewCapper()
	if opts.Capper != nil {
		c = new(*opts.Capper)
	}
	if c.Logger == nil {
		c.Logger = opts.Logger
	}
	c.Originals = nil
	if opts.Originals != nil {
		c.Originals = opts.Originals(session)
	}
	return c
}

// registry makes the registry of the tools offered: each wrapped by
// opts.Wrap, their results passed through capper.
func registry(opts Options, capper *tools.Capper, all []tools.Tool) (*tools.Registry, error) {
	if opts.Wrap != nil {
		for i, t := range all {
			all[i] = opts.Wrap(t)
		}
	}
	reg, err := tools.NewRegistry(capper, all...)
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	return reg, nil
}

// startMCP connects the session's MCP servers, whose tools build adds. A
// required server that cannot connect stops the launch; others are
// skipped with a warning.
func (eq *equipment) startMCP(ctx context.Context) error {
	if len(eq.ext.MCP.Servers) == 0 {
		return nil
	}
	eq.servers = mcp.New(eq.ext.MCP.Servers, mcp.Options{
		Commands: eq.opts.Executor, Dir: eq.opts.Extensions.Dir, Logger: eq.opts.Logger,
		On: eq.opts.executors().mcpOn,
	})
	if err := eq.servers.Start(ctx); err != nil {
		_ = eq.servers.Close()
		eq.servers = nil
		return &ConfigError{Err: fmt.Errorf("MCP servers: %w", err)}
	}
	return nil
}

// ensureMCP reconnects the servers that were lost, before a turn.
func (eq *equipment) ensureMCP(ctx context.Context) error {
	if eq.servers == nil {
		return nil
	}
	return eq.servers.Ensure(ctx)
}

// restorer returns the compaction policy's Restore: the project
// instructions and the skills the compacted messages carried come back in
// the replacement. With the usable window known (tokens, 0 unknown) the
// skills take at most an eighth of it, and never more than their own cap.
func (eq *equipment) restorer(window int64) func(compacted, tail []provider.Message) string {
	total := 0
	if window > 0 {
		total = int(min(int64(skills.RestoreTotalBytes), window*compaction.BytesPerToken/8))
	}
	return func(compacted, tail []provider.Message) string { return eq.restore(compacted, tail, total) }
}

func (eq *equipment) restore(compacted, tail []provider.Message, skillBytes int) string {
	var parts []string
	if eq.follower != nil {
		if r := eq.follower.Restore(tail); r != "" {
			parts = append(parts, r)
		}
	}
	if eq.elsewhere != nil {
		if r := eq.elsewhere.Restore(context.Background(), tail); r != "" {
			parts = append(parts, r)
		}
	}
	sr := skills.Restorer{
		Set:        func() *skills.Set { return eq.ext.Skills },
		Reads:      eq.reads,
		TotalBytes: skillBytes,
	}
	if r := sr.Restore(compacted, tail); r != "" {
		parts = append(parts, r)
	}
	return strings.Join(parts, "\n\n")
}

// reads returns the absolute paths of the files a read_file call reads:
// a read of a skill's SKILL.md loads the skill.
func (eq *equipment) reads(name string, args json.RawMessage) []string {
	if eq.reg == nil {
		return nil
	}
	t, ok := eq.reg.Lookup(name)
	if !ok {
		return nil
	}
	for {
		// ReadFile, or read_file routed to several executors.
		if rf, ok := t.(instructions.FileTool); ok && t.Name() == "read_file" {
			var out []string
			for _, p := range rf.FilePaths(args) {
				if !filepath.IsAbs(p) {
					p = filepath.Join(eq.load.workspace(), p)
				}
				out = append(out, filepath.Clean(p))
			}
			return out
		}
		u, ok := t.(interface{ Unwrap() tools.Tool })
		if !ok {
			return nil
		}
		t = u.Unwrap()
	}
}

// closeFollower releases the workspace the follower reads.
func (eq *equipment) closeFollower() {
	if eq.follower != nil {
		_ = eq.follower.Close() // a read-only root: nothing to lose
		eq.follower = nil
	}
}

// closeMCP ends the MCP connections (stdio servers exit, or are torn down
// with the session's other process groups).
func (eq *equipment) closeMCP() {
	if eq.servers == nil {
		return
	}
	if err := eq.servers.Close(); err != nil {
		eq.opts.Logger.Warn("close MCP servers", "err", err)
	}
	eq.servers = nil
}

// emitHook reports a hook verdict as an event: what the hooks decided and
// why, including an approval decided for a hook that asked.
func emitHook(observe func(events.Event), v hooks.Verdict) {
	reason := v.Reason
	if v.Approval != nil {
		reason = strings.TrimSpace(fmt.Sprintf("%s (approval: %+v)", reason, *v.Approval))
	}
	if v.Stop {
		reason = strings.TrimSpace(reason + " (ended the turn: " + v.StopReason + ")")
	}
	emit(observe, events.Event{
		Type: events.Hook, Tool: v.Tool, Status: string(v.Event) + ":" + decisionName(v),
		Reason: reason, Text: v.Context, Messages: v.SystemMessages,
	})
}

func decisionName(v hooks.Verdict) string {
	if v.Decision == "" {
		return "none"
	}
	return string(v.Decision)
}

// sessionStart runs the SessionStart hooks; the context they add extends
// the system prompt.
func (eq *equipment) sessionStart(ctx context.Context, source string) {
	if eq.opts.Memory != nil {
		var errs []error
		eq.memory, errs = eq.opts.Memory.Prompt(ctx)
		for _, err := range errs {
			eq.opts.Logger.Warn("memory left out of the system prompt", "err", err)
		}
	}
	v, err := eq.engine.SessionStart(ctx, source)
	if err != nil {
		eq.opts.Logger.Warn("SessionStart hooks", "err", err)
		return
	}
	eq.startContext = v.Context
}

// promptFinal reports whether the prompt is journaled as it is: no
// UserPromptSubmit hook can block it or add to it first.
func (eq *equipment) promptFinal() bool {
	return eq.prompt != "" && !slices.ContainsFunc(eq.ext.Hooks.Hooks, func(h hooks.Hook) bool {
		return h.Event == hooks.UserPromptSubmit
	})
}

// hasStartHooks reports whether hooks run before the first model request.
func (eq *equipment) hasStartHooks() bool {
	return eq.engine.Has(hooks.SessionStart) || eq.engine.Has(hooks.UserPromptSubmit)
}

// userPrompt runs the UserPromptSubmit hooks: a block stops the run with the
// reason; added context follows the prompt. endTurn is set when a hook
// ended the turn (continue: false) before it began: the run then ends
// without a model request.
func (eq *equipment) userPrompt(ctx context.Context, prompt string) (_ string, endTurn string, _ error) {
	if prompt == "" {
		return prompt, "", nil
	}
	v, err := eq.engine.UserPromptSubmit(ctx, prompt)
	if err != nil {
		eq.opts.Logger.Warn("UserPromptSubmit hooks", "err", err)
		return prompt, "", nil
	}
	if v.Blocked() {
		return "", "", fmt.Errorf("a UserPromptSubmit hook blocked the prompt: %s", v.Reason)
	}
	if v.Stop {
		return "", "a UserPromptSubmit hook ended the turn: " + v.StopReason, nil
	}
	if v.Context != "" {
		prompt += "\n\n" + v.Context
	}
	return prompt, "", nil
}

// stops are the run's stop conditions: the result contract's, when one
// is asked for, then the budget's.
func (eq *equipment) stops() []agent.StopCondition {
	if eq.opts.Result == nil {
		return eq.stop
	}
	return append([]agent.StopCondition{eq.opts.Result.Stop()}, eq.stop...)
}

// stopHook is asked when the model ends its turn: the Stop hooks first,
// then, when they let the run end, the result contract, which wants a
// result first.
func (eq *equipment) stopHook() agent.StopHook {
	lifecycle := eq.onStop()
	if eq.opts.Result == nil {
		return lifecycle
	}
	contract := eq.opts.Result.OnStop()
	return func(ctx context.Context, answer string) (string, bool) {
		if reason, block := lifecycle(ctx, answer); block {
			return reason, true
		}
		return contract(ctx, answer)
	}
}

// onStop runs the Stop hooks when the model ends its turn: a block keeps
// the loop going with the hooks' reason, unless a hook also answered
// continue: false, which ends the turn as the model meant to.
func (eq *equipment) onStop() agent.StopHook {
	return stopHook(eq.opts.Logger, "Stop", func(ctx context.Context, in hooks.StopInput) (hooks.Verdict, error) {
		return eq.engine.Stop(ctx, in)
	})
}

// stopHook makes the loop's StopHook of the hooks of event (Stop, or
// SubagentStop in a child), which fire runs.
func stopHook(
	log *slog.Logger, event string, fire func(context.Context, hooks.StopInput) (hooks.Verdict, error),
) agent.StopHook {
	count := 0
	return func(ctx context.Context, answer string) (string, bool) {
		v, err := fire(ctx, hooks.StopInput{Count: count, Active: count > 0, LastAssistantMessage: answer})
		count++
		if err != nil {
			log.Warn(event+" hooks", "err", err)
			return "", false
		}
		if !v.Blocked() || v.Stop {
			return "", false
		}
		reason := v.Reason
		if reason == "" {
			reason = "A " + event + " hook asked you to continue."
		}
		return reason, true
	}
}

// childTools are the tools of a child agent: the session's, never more
// than its own model is offered, with the built-ins running the child's
// commands (cmds) and spawn its own spawn_agent, narrowed by toolset, and
// wrapped in the child's hook engine.
func (eq *equipment) childTools(
	id uuid.UUID, cmds []tools.Commands, spawn tools.Tool, toolset string, only []string, engine *hooks.Engine,
) (*tools.Registry, error) {
	opts := eq.opts
	builtin := append(tools.BuiltinOn(opts.executors().places(cmds, nil)), spawn)
	all, err := eq.offeredWith(eq.ext, builtin)
	if err != nil {
		return nil, err
	}
	if eq.servers != nil {
		all = append(all, eq.servers.Tools()...)
	}
	parent := map[string]bool{}
	for _, d := range eq.reg.Definitions() {
		parent[d.Name] = true
	}
	all = slices.DeleteFunc(all, func(t tools.Tool) bool {
		return !parent[t.Name()] || only != nil && !slices.Contains(only, t.Name())
	})
	if toolset != "" {
		if all, err = applyToolset(eq.ext.Set.Toolsets, toolset, all, opts.Logger); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				err = ce.Err
			}
			return nil, err
		}
	}
	capper := sessionCapper(opts, id)
	if capper.Compresses() {
		all = append(all, tools.NewRetrieve(capper))
	}
	return registry(opts, capper, hooks.WrapAll(all, engine))
}

func (eq *equipment) sessionEnd(ctx context.Context, outcome transcript.Outcome) {
	if _, err := eq.engine.SessionEnd(ctx, string(outcome)); err != nil {
		eq.opts.Logger.Warn("SessionEnd hooks", "err", err)
	}
}
