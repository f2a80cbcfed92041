package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/transcript"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/extensions/userlayer"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/skills"
	"github.com/aerie-run/aerie/runner/tools"
)

// kit is what the extensions contribute to a run: the system prompt, the
// tools the model is offered (hooks wrapped around them), and the hook
// engine for the lifecycle events. Its reload swaps them all at a turn
// boundary after extension_manage changed the user layer.
type kit struct {
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

	// What the model sees, swapped whole by a reload.
	ext    *Extensions
	engine *hooks.Engine
	reg    *tools.Registry
	// system is the composed prompt with the skills catalog; startContext
	// is what SessionStart hooks added to it, kept across reloads.
	system, startContext string

	// prompt is the user's prompt with the skills it names attached.
	prompt string
}

// newKit loads the layers' artifacts. A malformed artifact in a layer
// whoever runs the session controls stops the launch; one in the workspace
// is skipped with its reason in the report.
func newKit(opts Options, builtin []tools.Tool) (*kit, error) {
	lo := LoadOptions{
		Layers: opts.Layers, Workspace: opts.Workspace, Dir: opts.Dir, Getenv: opts.Getenv,
		UserHome: opts.UserHome, DisabledPlugins: opts.DisabledPlugins, Persona: opts.System, Commands: opts.Executor,
		Pins: opts.Pins,
	}
	x, err := LoadExtensions(lo)
	if err == nil {
		err = x.Err()
	}
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	warnProblems(opts.Logger, x)
	k := &kit{load: lo, ext: x, builtin: slices.Clip(builtin), prompt: opts.Prompt}
	m, err := userlayer.New(userlayer.Options{Layers: opts.Layers, Workspace: lo.workspace(), WorkDir: opts.Dir, Builtins: BuiltinToolNames()})
	switch {
	case err == nil:
		k.manager = m
		k.builtin = append(k.builtin, userlayer.NewTool(m))
		m.Reloaded(x.report(false), nil)
	case !errors.Is(err, userlayer.ErrNoUserLayer):
		opts.Logger.Warn("extension_manage is not offered", "err", err)
	}
	// An unknown toolset stops the launch before anything starts.
	if _, err := k.offered(x, opts); err != nil {
		return nil, err
	}
	if opts.Prompt != "" {
		atts, err := x.Skills.Attach(opts.Prompt)
		if err != nil {
			return nil, &ConfigError{Err: fmt.Errorf("prompt: %w", err)}
		}
		k.prompt = skills.Message(opts.Prompt, atts)
	}
	return k, nil
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
func (k *kit) offered(x *Extensions, opts Options) ([]tools.Tool, error) {
	all := append([]tools.Tool(nil), k.builtin...)
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
		if all, err = applyToolset(x.Set.Toolsets, opts.Toolset, all, opts); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// loadout is what one load of the extensions gives the model.
type loadout struct {
	ext    *Extensions
	engine *hooks.Engine
	reg    *tools.Registry
	system string
}

// build makes the loadout of x: the hook engine, the tools wrapped in it
// (the MCP servers' after the toolset's), and the system prompt with the
// skills catalog. It changes nothing in k.
func (k *kit) build(x *Extensions, opts Options) (loadout, error) {
	all, err := k.offered(x, opts)
	if err != nil {
		return loadout{}, err
	}
	if k.servers != nil {
		for _, t := range k.servers.Tools() {
			all = append(all, t)
		}
	}
	engine := hooks.New(opts.Executor, x.Hooks.Hooks, hooks.Options{
		SessionID: k.session,
		Dir:       opts.Dir,
		Observe: func(_ context.Context, v hooks.Verdict) {
			emitHook(opts.Observe, v)
			if e, ok := hookEntry(v); ok && k.journal != nil {
				k.journal.Append(e)
			}
		},
		Approve: opts.Approve,
		Logger:  opts.Logger,
	})
	reg, err := registry(opts, hooks.WrapAll(all, engine))
	if err != nil {
		return loadout{}, &ConfigError{Err: err}
	}
	system := x.Set.Prompt.Text()
	if x.Skills.Len() > 0 {
		system += "\n\n" + x.Skills.Catalog()
	}
	return loadout{ext: x, engine: engine, reg: reg, system: system}, nil
}

func (k *kit) use(l loadout) {
	k.ext, k.engine, k.reg, k.system = l.ext, l.engine, l.reg, l.system
}

// start makes the session's hook engine and tools.
func (k *kit) start(opts Options, session string, w *journal.Writer) error {
	k.session, k.journal = session, w
	l, err := k.build(k.ext, opts)
	if err != nil {
		return err
	}
	k.use(l)
	return nil
}

// systemPrompt is the prompt the model is given now.
func (k *kit) systemPrompt() string {
	if k.startContext == "" {
		return k.system
	}
	return k.system + "\n\n" + k.startContext
}

// applyToolset keeps the tools of the named toolset.
func applyToolset(ts *extensions.Toolsets, name string, all []tools.Tool, opts Options) ([]tools.Tool, error) {
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.Name()
	}
	selected, missing, err := ts.Apply(name, names)
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("toolset %q: %w", name, err)}
	}
	if len(missing) > 0 {
		opts.Logger.Warn("toolset names tools that are not available", "toolset", name, "tools", strings.Join(missing, ", "))
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

// startMCP connects the session's MCP servers, whose tools build adds. A
// required server that cannot connect stops the launch; others are
// skipped with a warning.
func (k *kit) startMCP(ctx context.Context, opts Options) error {
	if len(k.ext.MCP.Servers) == 0 {
		return nil
	}
	k.servers = mcp.New(k.ext.MCP.Servers, mcp.Options{Commands: opts.Executor, Dir: opts.Dir, Logger: opts.Logger})
	if err := k.servers.Start(ctx); err != nil {
		_ = k.servers.Close()
		k.servers = nil
		return &ConfigError{Err: fmt.Errorf("MCP servers: %w", err)}
	}
	return nil
}

// ensureMCP reconnects the servers that were lost, before a turn.
func (k *kit) ensureMCP(ctx context.Context) error {
	if k.servers == nil {
		return nil
	}
	return k.servers.Ensure(ctx)
}

// closeMCP ends the MCP connections (stdio servers exit, or are torn down
// with the session's other process groups).
func (k *kit) closeMCP(opts Options) {
	if k.servers == nil {
		return
	}
	if err := k.servers.Close(); err != nil {
		opts.Logger.Warn("close MCP servers", "err", err)
	}
	k.servers = nil
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
	emit(observe, events.Event{Type: events.Hook, Tool: v.Tool, Status: string(v.Event) + ":" + decisionName(v), Reason: reason, Text: v.Context, Messages: v.SystemMessages})
}

func decisionName(v hooks.Verdict) string {
	if v.Decision == "" {
		return "none"
	}
	return string(v.Decision)
}

// sessionStart runs the SessionStart hooks; the context they add extends
// the system prompt.
func (k *kit) sessionStart(ctx context.Context, source string, opts Options) {
	v, err := k.engine.SessionStart(ctx, source)
	if err != nil {
		opts.Logger.Warn("SessionStart hooks", "err", err)
		return
	}
	k.startContext = v.Context
}

// hasStartHooks reports whether hooks run before the first model request.
func (k *kit) hasStartHooks() bool {
	return k.engine.Has(hooks.SessionStart) || k.engine.Has(hooks.UserPromptSubmit)
}

// userPrompt runs the UserPromptSubmit hooks: a block stops the run with the
// reason; added context follows the prompt. endTurn is set when a hook
// ended the turn (continue: false) before it began: the run then ends
// without a model request.
func (k *kit) userPrompt(ctx context.Context, prompt string, opts Options) (_ string, endTurn string, _ error) {
	if prompt == "" {
		return prompt, "", nil
	}
	v, err := k.engine.UserPromptSubmit(ctx, prompt)
	if err != nil {
		opts.Logger.Warn("UserPromptSubmit hooks", "err", err)
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

// onStop runs the Stop hooks when the model ends its turn: a block keeps
// the loop going with the hooks' reason, unless a hook also answered
// continue: false, which ends the turn as the model meant to.
func (k *kit) onStop(opts Options) agent.StopHook {
	count := 0
	return func(ctx context.Context, answer string) (string, bool) {
		v, err := k.engine.Stop(ctx, hooks.StopInput{Count: count, Active: count > 0, LastAssistantMessage: answer})
		count++
		if err != nil {
			opts.Logger.Warn("Stop hooks", "err", err)
			return "", false
		}
		if !v.Blocked() || v.Stop {
			return "", false
		}
		reason := v.Reason
		if reason == "" {
			reason = "A Stop hook asked you to continue."
		}
		return reason, true
	}
}

func (k *kit) sessionEnd(ctx context.Context, outcome transcript.Outcome, opts Options) {
	if _, err := k.engine.SessionEnd(ctx, string(outcome)); err != nil {
		opts.Logger.Warn("SessionEnd hooks", "err", err)
	}
}
