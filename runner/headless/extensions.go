package headless

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/plugins"
	"github.com/aerie-run/aerie/runner/skills"
	"github.com/aerie-run/aerie/runner/tools"
)

// kit is what the extensions contribute to a run: the system prompt, the
// tools the model is offered (hooks wrapped around them), and the hook
// engine for the lifecycle events.
type kit struct {
	set     *extensions.Set
	plugins *plugins.Set
	hooks   hooks.Loaded
	skills  *skills.Set
	mcp     mcp.Config
	// servers are the session's MCP connections, started by startMCP.
	servers *mcp.Manager
	engine  *hooks.Engine
	system  string
	tools   []tools.Tool
	// prompt is the user's prompt with the skills it names attached.
	prompt string
}

// loadExtensions reads the layers' artifacts. A malformed artifact in a layer
// whoever runs the session controls stops the launch; one in the workspace
// is skipped with its reason in the report.
func loadExtensions(opts Options, builtin []tools.Tool) (*kit, error) {
	names := make([]string, len(builtin))
	for i, t := range builtin {
		names[i] = t.Name()
	}
	set, err := extensions.Load(extensions.Source{
		Layers: opts.Layers, Workspace: opts.Workspace, WorkDir: opts.Dir, Getenv: opts.Getenv,
	}, extensions.Options{Builtins: names, Persona: opts.System, Commands: opts.Executor})
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("extensions: %w", err)}
	}
	if probs := set.Report.Problems(); len(probs) > 0 {
		return nil, &ConfigError{Err: fmt.Errorf("extensions: %w (aerie extensions shows the report)", errors.Join(probs...))}
	}
	loaded, err := hooks.Load(opts.Layers, set.Pins, hooks.LoadOptions{Dir: opts.Dir})
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("hooks: %w", err)}
	}
	for _, p := range loaded.Problems {
		opts.Logger.Warn("hook file skipped", "file", p.File, "field", p.Field, "reason", p.Reason)
	}
	k := &kit{set: set, hooks: loaded, system: set.Prompt.Text(), prompt: opts.Prompt}

	// Plugins add skills, hooks (after the layers') and MCP servers.
	k.plugins, err = plugins.Load(opts.Layers, plugins.Options{WorkDir: opts.Dir, Disabled: opts.DisabledPlugins})
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("plugins: %w", err)}
	}
	k.hooks.Hooks = append(k.hooks.Hooks, k.plugins.Hooks()...)
	var pluginRoots []skills.Root
	for _, r := range k.plugins.SkillRoots() {
		pluginRoots = append(pluginRoots, skills.Root{Name: "plugin " + r.Namespace, Dir: r.Dir, Namespace: r.Namespace})
	}

	ws := opts.Workspace
	if ws == "" {
		ws = opts.Dir
	}
	k.skills, err = skills.Discover(skills.Roots(opts.Layers, skills.Options{WorkDir: opts.Dir, Workspace: ws, Home: opts.UserHome, Plugins: pluginRoots}))
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("skills: %w", err)}
	}
	for _, p := range k.skills.Problems {
		opts.Logger.Warn("skill skipped", "problem", fmt.Sprint(p))
	}
	if k.skills.Len() > 0 {
		k.system += "\n\n" + k.skills.Catalog()
	}
	if opts.Prompt != "" {
		atts, err := k.skills.Attach(opts.Prompt)
		if err != nil {
			return nil, &ConfigError{Err: fmt.Errorf("prompt: %w", err)}
		}
		k.prompt = skills.Message(opts.Prompt, atts)
	}
	k.mcp, err = mcp.Load(opts.Layers, set.Pins, mcp.LoadOptions{Dir: opts.Dir})
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("MCP servers: %w", err)}
	}
	for _, p := range k.plugins.Plugins {
		if len(p.MCPServers) == 0 {
			continue
		}
		if err := k.mcp.AddPlugin(p.Name, p.Root, PluginServers(p)); err != nil {
			return nil, &ConfigError{Err: fmt.Errorf("plugin %s: %w", p.Name, err)}
		}
	}
	for _, p := range k.mcp.Problems {
		opts.Logger.Warn("MCP server declaration skipped", "problem", fmt.Sprint(p))
	}

	all := append([]tools.Tool(nil), builtin...)
	for _, t := range set.Tools {
		all = append(all, t)
	}
	if k.skills.Len() > 0 {
		all = append(all, skills.NewTool(k.skills))
	}
	all = append(all, opts.Tools...)
	for i, t := range all {
		all[i] = set.Descriptions.Apply(t)
	}
	if opts.Toolset != "" {
		if all, err = applyToolset(set.Toolsets, opts.Toolset, all, opts); err != nil {
			return nil, err
		}
	}
	k.tools = all
	return k, nil
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

// PluginServers are a plugin's MCP servers as runner/mcp declares them.
func PluginServers(p plugins.Plugin) []mcp.Server {
	out := make([]mcp.Server, 0, len(p.MCPServers))
	for _, s := range p.MCPServers {
		out = append(out, mcp.Server{
			ID: s.ID, Type: mcp.Type(s.Type), Command: s.Command, Args: s.Args, Env: s.Env,
			URL: s.URL, Headers: s.Headers, Tools: s.Tools, Required: s.Required, Disabled: s.Disabled,
			StartupTimeout: time.Duration(s.StartupTimeoutSeconds) * time.Second,
			ToolTimeout:    time.Duration(s.ToolTimeoutSeconds) * time.Second,
			File:           s.File, Plugin: p.Name, PluginRoot: p.Root,
		})
	}
	return out
}

// startMCP connects the session's MCP servers and adds their tools. A
// required server that cannot connect stops the launch; others are skipped
// with a warning.
func (k *kit) startMCP(ctx context.Context, opts Options) error {
	if len(k.mcp.Servers) == 0 {
		return nil
	}
	k.servers = mcp.New(k.mcp.Servers, mcp.Options{Commands: opts.Executor, Dir: opts.Dir, Logger: opts.Logger})
	if err := k.servers.Start(ctx); err != nil {
		_ = k.servers.Close()
		k.servers = nil
		return &ConfigError{Err: fmt.Errorf("MCP servers: %w", err)}
	}
	for _, t := range k.servers.Tools() {
		k.tools = append(k.tools, t)
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

// startHooks makes the hook engine of the session and wraps the tools in
// it. What the hooks decide is journaled by w.
func (k *kit) startHooks(opts Options, session string, w *journal.Writer) {
	k.engine = hooks.New(opts.Executor, k.hooks.Hooks, hooks.Options{
		SessionID: session,
		Dir:       opts.Dir,
		Observe: func(_ context.Context, v hooks.Verdict) {
			emitHook(opts.Observe, v)
			if e, ok := hookEntry(v); ok {
				w.Append(e)
			}
		},
		Logger: opts.Logger,
	})
	k.tools = hooks.WrapAll(k.tools, k.engine)
}

// emitHook reports a hook verdict as an event: what the hooks decided and
// why, including an approval decided for a hook that asked.
func emitHook(observe func(agent.Event), v hooks.Verdict) {
	reason := v.Reason
	if v.Approval != nil {
		reason = strings.TrimSpace(fmt.Sprintf("%s (approval: %+v)", reason, *v.Approval))
	}
	emit(observe, agent.Event{Type: agent.EventHook, Tool: v.Tool, Status: string(v.Event) + ":" + decisionName(v), Reason: reason, Text: v.Context})
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
	if v.Context != "" {
		k.system += "\n\n" + v.Context
	}
}

// userPrompt runs the UserPromptSubmit hooks: a block stops the run with the
// reason; added context follows the prompt.
func (k *kit) userPrompt(ctx context.Context, prompt string, opts Options) (string, error) {
	if prompt == "" {
		return prompt, nil
	}
	v, err := k.engine.UserPromptSubmit(ctx, prompt)
	if err != nil {
		opts.Logger.Warn("UserPromptSubmit hooks", "err", err)
		return prompt, nil
	}
	if v.Blocked() {
		return "", fmt.Errorf("a UserPromptSubmit hook blocked the prompt: %s", v.Reason)
	}
	if v.Context != "" {
		prompt += "\n\n" + v.Context
	}
	return prompt, nil
}

// onStop runs the Stop hooks when the model ends its turn: a block keeps
// the loop going with the hooks' reason.
func (k *kit) onStop(opts Options) agent.StopHook {
	count := 0
	return func(ctx context.Context, answer string) (string, bool) {
		v, err := k.engine.Stop(ctx, hooks.StopInput{Count: count, Active: count > 0, LastAssistantMessage: answer})
		count++
		if err != nil {
			opts.Logger.Warn("Stop hooks", "err", err)
			return "", false
		}
		if !v.Blocked() {
			return "", false
		}
		reason := v.Reason
		if reason == "" {
			reason = "A Stop hook asked you to continue."
		}
		return reason, true
	}
}

func (k *kit) sessionEnd(ctx context.Context, outcome agent.Outcome, opts Options) {
	if _, err := k.engine.SessionEnd(ctx, string(outcome)); err != nil {
		opts.Logger.Warn("SessionEnd hooks", "err", err)
	}
}

// report is the extensions report with the hook files in it.
func (k *kit) report(opts Options) extensions.Report {
	r := k.set.Report
	ws := opts.Workspace
	if ws == "" {
		ws = opts.Dir
	}
	r.Artifacts = append(append([]extensions.Artifact(nil), r.Artifacts...), k.hooks.Artifacts(ws)...)
	r.Artifacts = append(r.Artifacts, k.plugins.Artifacts()...)
	r.Artifacts = append(r.Artifacts, SkillArtifacts(k.skills)...)
	r.Artifacts = append(r.Artifacts, MCPArtifacts(k.mcp)...)
	return r
}
