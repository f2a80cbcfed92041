package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/extensions/userlayer"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/memory"
	"github.com/aerie-run/aerie/runner/moa"
	"github.com/aerie-run/aerie/runner/plugins"
	"github.com/aerie-run/aerie/runner/skills"
	"github.com/aerie-run/aerie/runner/tools"
)

// LoadOptions say where a session's extensions come from.
type LoadOptions struct {
	// Layers are the extension layers, nearest first.
	Layers []layer.Layer
	// Workspace is the workspace root; empty means Dir.
	Workspace string
	// Dir is the agent's working directory.
	Dir string
	// Getenv reads AERIE_SYSTEM_PROMPT_FILE and
	// AERIE_TOOL_DESCRIPTIONS_FILE; nil is an empty environment.
	Getenv func(string) string
	// UserHome is the user's home directory, whose .agents/skills and
	// .claude/skills hold skills; empty skips them.
	UserHome string
	// DisabledPlugins names plugins not to use (plugins.disabled).
	DisabledPlugins []string
	// PluginComponents are the components of Claude and Codex plugins to
	// load (plugins.components); nil is plugins.DefaultComponents.
	PluginComponents plugins.Components
	// System is the base system prompt, the persona's: a SYSTEM.md or
	// AERIE_SYSTEM_PROMPT_FILE replaces it, APPEND_SYSTEM.md files and
	// project instructions (AGENTS.md) extend it.
	System string
	// Commands runs custom tools; nil loads them for the report only.
	Commands extensions.Commands
	// Executors are the session's executors besides the default, by
	// name, which custom tool manifests and MCP server declarations may
	// name; Run sets them from Options.Executors.
	Executors []extensions.NamedCommands
	// Pins are trust pins the session's submitter gives besides the
	// layers' trust.toml files (an AgentSession's spec.trust.pinsFrom).
	Pins []layer.Pin
	// MCPVariables resolve the ${VAR} of Claude and Codex plugins' MCP
	// servers: the environment of aerie run (mcp.LocalVariables), or in a
	// pod only the session's secrets (mcp.PodVariables). The zero value
	// resolves none.
	MCPVariables mcp.Variables
}

// executorNames are the names of Executors.
func (o LoadOptions) executorNames() []string {
	names := make([]string, 0, len(o.Executors))
	for _, e := range o.Executors {
		names = append(names, e.Name)
	}
	return names
}

func (o LoadOptions) workspace() string {
	if o.Workspace != "" {
		return o.Workspace
	}
	return o.Dir
}

// Extensions is everything the layers hold for a session: custom tools,
// prompts, descriptions and toolsets, hooks, plugins, skills and MCP
// server declarations.
type Extensions struct {
	Set     *extensions.Set
	Hooks   hooks.Loaded
	Plugins *plugins.Set
	Skills  *skills.Set
	MCP     mcp.Config
	// Errs are the loaders' problems in layers whoever runs the session
	// controls (besides Set.Report.Problems): a run does not start with
	// them.
	Errs []error

	workspace string
}

// LoadExtensions loads a session's extensions. A run, its reloads and
// `aerie extensions` all call it, so that the report never disagrees with
// what a run loads. Its error means the options are unusable (the working
// directory is outside the workspace); problems with artifacts are in the
// report, and those that stop a run in Err.
func LoadExtensions(o LoadOptions) (*Extensions, error) {
	ws := o.workspace()
	// Every loader looks for a few names at the top of each layer: one
	// listing of each answers them all.
	listing := layer.ListLayers(o.Layers, ws)
	defer func() { _ = listing.Close() }() // read-only directory handles: closing them loses nothing
	// Plugins and skills need nothing the other loaders find: they are
	// read meanwhile. Each loader reads its layers concurrently already;
	// this fills the processors while one of them waits for its slowest
	// layer.
	var (
		plugs      *plugins.Set
		sk         *skills.Set
		plugErr    error
		skillsErr  error
		pluginsRan = make(chan struct{})
	)
	go func() {
		defer close(pluginsRan)
		plugs, plugErr = plugins.Load(o.Layers,
			plugins.Options{WorkDir: o.Dir, Disabled: o.DisabledPlugins, Listing: listing,
				Components: o.PluginComponents})
		var pluginRoots []skills.Root
		if plugs != nil {
			for _, r := range plugs.SkillRoots() {
				pluginRoots = append(pluginRoots, skills.Root{Name: "plugin " + r.Namespace, Dir: r.Dir, Namespace: r.Namespace})
			}
		}
		roots := skills.Roots(o.Layers, skills.Options{
			WorkDir: o.Dir, Workspace: ws, Home: o.UserHome, Plugins: pluginRoots, Listing: listing,
		})
		sk, skillsErr = skills.DiscoverIn(roots, listing)
	}()
	set, err := extensions.Load(layer.Source{
		Layers: o.Layers, Workspace: o.Workspace, WorkDir: o.Dir, Getenv: o.Getenv, Listing: listing,
	}, extensions.Options{
		Builtins: BuiltinToolNames(), Persona: o.System, Commands: o.Commands, Executors: o.Executors, Pins: o.Pins,
	})
	if err != nil {
		<-pluginsRan
		return nil, fmt.Errorf("extensions: %w", err)
	}
	x := &Extensions{Set: set, workspace: ws}
	var hooksErr, mcpErr error
	x.Hooks, hooksErr = hooks.Load(o.Layers, set.Pins, hooks.LoadOptions{Dir: o.Dir, Workspace: ws, Listing: listing})
	x.MCP, mcpErr = mcp.Load(o.Layers, set.Pins, mcp.LoadOptions{
		Dir: o.Dir, Listing: listing, Executors: o.executorNames(),
	})
	<-pluginsRan

	// The findings and errors in the loaders' order: hooks, plugins (whose
	// hooks come after the layers'), skills, MCP servers.
	x.fail("hooks", hooksErr)
	x.Plugins = plugs
	x.fail("plugins", plugErr)
	if x.Plugins != nil {
		x.Hooks.Hooks = append(x.Hooks.Hooks, x.Plugins.Hooks()...)
	}
	x.Skills = sk
	x.fail("skills", skillsErr)
	x.fail("MCP servers", mcpErr)
	if x.Plugins != nil {
		for _, p := range x.Plugins.Plugins {
			if len(p.MCPServers) == 0 {
				continue
			}
			x.fail("plugin "+p.Name, x.MCP.AddPlugin(p.Name, p.Root, PluginServers(p)))
		}
		for _, p := range x.Plugins.Plugins {
			vars := o.MCPVariables
			if p.Project {
				// The repository could send the runner's variables to a
				// server of its choosing, or start a command it chose.
				vars = vars.Deny("a plugin in the project's layer reads no variable of the environment; " +
					"install it (aerie plugin install) to give it credentials")
				vars.NoStdio = plugins.ProjectMCP
			}
			for _, src := range p.ClaudeMCP {
				x.fail("plugin "+p.Name, x.MCP.AddClaudePlugin(p.Name, p.Root, src.File, src.Data, vars))
			}
		}
	}
	return x, nil
}

func (x *Extensions) fail(what string, err error) {
	if err != nil {
		x.Errs = append(x.Errs, fmt.Errorf("%s: %w", what, err))
	}
}

// Err is every problem that stops a run: artifacts skipped in layers
// whoever runs the session controls, and the loaders' errors.
func (x *Extensions) Err() error {
	var errs []error
	if probs := x.Set.Report.Problems(); len(probs) > 0 {
		errs = append(errs, fmt.Errorf("extensions: %w (aerie extensions shows the report)", errors.Join(probs...)))
	}
	return errors.Join(append(errs, x.Errs...)...)
}

// Report is the extensions report: every artifact of every loader, with
// its layer, status, trust, provenance and reason.
func (x *Extensions) Report() layer.Report { return x.report(true) }

// report is Report; without full it leaves out what costs a read per
// skill and only the report shows: what the sidecars of the skills in
// $AERIE_HOME say, and the digests of the SKILL.md files discovery read
// only in part. extension_manage learns what a load made of its artifacts
// from their status, trust and reason alone.
func (x *Extensions) report(full bool) layer.Report {
	r := x.Set.Report
	hookArts, skillArts, mcpArts := x.Hooks.Artifacts(x.workspace), x.Skills.Artifacts(full), x.MCP.Artifacts(x.workspace)
	var pluginArts []layer.Artifact
	if x.Plugins != nil {
		pluginArts = x.Plugins.Artifacts()
	}
	// One allocation: a report may list a thousand artifacts (and none
	// leaves Artifacts nil, as appends to nil would).
	var arts []layer.Artifact
	if n := len(r.Artifacts) + len(hookArts) + len(pluginArts) + len(skillArts) + len(mcpArts); n > 0 {
		arts = make([]layer.Artifact, 0, n)
	}
	arts = append(arts, r.Artifacts...)
	arts = append(arts, hookArts...)
	arts = append(arts, pluginArts...)
	arts = append(arts, skillArts...)
	r.Artifacts = append(arts, mcpArts...)
	if full {
		r.Artifacts = withSkillProvenance(r.Layers, r.Artifacts)
	}
	return r
}

// withSkillProvenance adds to the skills of the $AERIE_HOME layer what
// their sidecars say: extension_manage writes skills there.
func withSkillProvenance(layers []layer.Layer, arts []layer.Artifact) []layer.Artifact {
	for _, l := range layers {
		if l.Kind != layer.KindHome || l.Dir == "" {
			continue
		}
		// The layer is opened once for all its skills.
		var (
			idx   []int
			paths []string
		)
		for i := range arts {
			a := &arts[i]
			if a.Type != skills.TypeSkill || a.Layer != l.Name || a.Provenance != nil {
				continue
			}
			idx = append(idx, i)
			paths = append(paths, a.Path+"/"+userlayer.SkillFile)
		}
		if len(paths) == 0 {
			continue
		}
		for j, p := range layer.ReadProvenances(l, paths) {
			a := &arts[idx[j]]
			a.LayerKind, a.Provenance, a.ActivationBoundary = l.Kind, &p, p.ActivationBoundary
		}
	}
	return arts
}

// BuiltinToolNames are the names of the built-in tools, which custom
// tools cannot take: the tools every session has, the skill tool of a
// session with skills, and extension_manage of a session with a user
// layer — a custom tool must not take a name that appears with a skill or
// a reload.
func BuiltinToolNames() []string {
	ts := tools.Builtin(nil, nil, nil)
	names := make([]string, 0, len(ts)+2)
	for _, t := range ts {
		names = append(names, t.Name())
	}
	return append(names, skills.ToolName, userlayer.ToolName, tools.RetrieveName, moa.Name, memory.ToolName)
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
