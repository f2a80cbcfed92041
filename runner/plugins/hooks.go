package plugins

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/pluginroot"
)

// HooksFile is where a Claude or Codex plugin keeps its hooks, relative
// to its root.
const HooksFile = "hooks/hooks.json"

// projectHooks is why a project layer's plugin hooks do not run.
const projectHooks = "a project layer's plugin hooks do not run: the repository wrote them; " +
	"install the plugin into $AERIE_HOME or a layer of the session instead"

// ProjectMCP is why a project layer's plugin stdio MCP servers do not run.
const ProjectMCP = "a project layer's plugin stdio MCP servers do not run: the repository wrote them; " +
	"install the plugin into $AERIE_HOME or a layer of the session instead"

// withoutProjectCode reports what the native manifest m of p, a plugin of
// a project layer, declares that would run a command of the repository's
// choosing: its hooks and its stdio MCP servers, which do not run. A
// hooks.toml of a project layer runs with a trust pin; a plugin has none
// to run on, as loadHooks says of a Claude plugin's hooks.
func (p *Plugin) withoutProjectCode(m *Manifest) []ComponentState {
	var out []ComponentState
	if m.Hooks != nil {
		out = append(out, ComponentState{Component: ComponentHooks, Name: p.Name + " hooks", Path: p.Manifest,
			Status: layer.StatusSkipped, Reason: projectHooks})
	}
	for _, s := range m.MCPServers {
		if s.Type == TransportStdio {
			out = append(out, ComponentState{Component: ComponentMCP, Name: p.Name + " mcp " + s.ID, Path: p.Manifest,
				Status: layer.StatusSkipped, Reason: ProjectMCP})
		}
	}
	return out
}

// loadHooks reads hooks/hooks.json of the Claude or Codex plugin p at rel
// in layer l, adds the hooks that run to p.Hooks and reports each hook,
// and each part of the file that does not run, with its event and
// matcher. A project layer's plugin runs none: unlike its hooks.toml, a
// plugin has no trust pin to run on.
func loadHooks(fsys fs.FS, l layer.Layer, rel string, p *Plugin, workdir string) []ComponentState {
	file := filepath.Join(p.Root, filepath.FromSlash(HooksFile))
	state := ComponentState{Component: ComponentHooks, Name: p.Name + " hooks", Path: file, Status: layer.StatusSkipped}
	if l.Kind == layer.KindProject {
		state.Reason = projectHooks
		return []ComponentState{state}
	}
	data, err := readLimited(fsys, path.Join(rel, HooksFile))
	if err != nil {
		state.Reason = fmt.Sprintf("cannot read %s: %v", HooksFile, err)
		return []ComponentState{state}
	}
	env := pluginroot.Environ(p.Root, pluginroot.Claude)
	src := hooks.Source{Layer: l, File: file, Dir: p.Root, Root: p.Root, Confined: true, Env: env}
	hs, parts, probs := hooks.ParseClaude(data, src, workdir)
	if len(probs) > 0 {
		reasons := make([]string, len(probs))
		for i, pr := range probs {
			reasons[i] = strings.TrimPrefix(pr.Field+": ", ": ") + pr.Reason
		}
		state.Reason = strings.Join(reasons, "; ")
		return []ComponentState{state}
	}
	if len(parts) == 0 {
		state.Status, state.Reason = layer.StatusActive, "declares no hooks"
		return []ComponentState{state}
	}
	p.Hooks = append(p.Hooks, hs...)
	out := make([]ComponentState, 0, len(parts))
	for _, pt := range parts {
		s := ComponentState{Component: ComponentHooks, Name: p.Name + " hooks " + pt.Field, Path: file,
			Event: pt.Event, Matcher: pt.Matcher, Status: layer.StatusActive, Reason: pt.Reason}
		if pt.Skipped {
			s.Status = layer.StatusSkipped
		}
		out = append(out, s)
	}
	return out
}
