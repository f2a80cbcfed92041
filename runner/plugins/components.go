package plugins

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aerie-run/aerie/runner/layer"
)

// Component is a kind of thing a Claude or Codex plugin ships that aerie
// can load from it. Skills are loaded by default, as the seed says; the
// others only when the configuration's [plugins] components (or the
// plugin's install record) names them.
type Component string

// The components of a plugin.
const (
	ComponentSkills   Component = "skills"
	ComponentAgents   Component = "agents"
	ComponentCommands Component = "commands"
	ComponentHooks    Component = "hooks"
	ComponentMCP      Component = "mcp"
)

// ComponentAll in a components list stands for every component.
const ComponentAll = "all"

// AllComponents are the components, in the order reports list them.
var AllComponents = []Component{ComponentSkills, ComponentAgents, ComponentCommands, ComponentHooks, ComponentMCP}

// DefaultComponents is what a Claude or Codex plugin contributes when no
// configuration says otherwise: its skills only.
var DefaultComponents = Components{ComponentSkills}

// Components is a set of components, in AllComponents order, without
// repeats.
type Components []Component

// Has reports whether c is in the set.
func (cs Components) Has(c Component) bool { return slices.Contains(cs, c) }

// Strings returns the set's names.
func (cs Components) Strings() []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// ParseComponents reads a components list (the names of AllComponents, or
// "all"). An empty list is an empty set: a plugin contributes nothing. The
// error names the bad item and the names that are allowed.
func ParseComponents(names []string) (Components, error) {
	seen := map[Component]bool{}
	for i, n := range names {
		n = strings.TrimSpace(n)
		if n == ComponentAll {
			for _, c := range AllComponents {
				seen[c] = true
			}
			continue
		}
		if !slices.Contains(AllComponents, Component(n)) {
			return nil, fmt.Errorf("item %d: unknown component %q; want %s or %s",
				i, n, strings.Join(Components(AllComponents).Strings(), ", "), ComponentAll)
		}
		seen[Component(n)] = true
	}
	out := Components{}
	for _, c := range AllComponents {
		if seen[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// SplitComponents reads a comma-separated components list, the form of a
// command-line flag.
func SplitComponents(s string) (Components, error) {
	if strings.TrimSpace(s) == "" {
		return Components{}, nil
	}
	return ParseComponents(strings.Split(s, ","))
}

// ComponentState is what became of one component a Claude or Codex plugin
// ships.
type ComponentState struct {
	Component Component `json:"component"`
	// Name is the agent type or command a file of agents/ or commands/
	// defines (<plugin>:<name>), when it was read.
	Name string `json:"name,omitempty"`
	// Path is the component's file or directory in the plugin.
	Path string `json:"path"`
	// Event and Matcher are those of a hook of hooks/hooks.json, as
	// written.
	Event   string `json:"event,omitempty"`
	Matcher string `json:"matcher,omitempty"`
	// Status is active (loaded), inactive (not enabled by components) or
	// skipped (enabled, but aerie does not load it).
	Status layer.Status `json:"status"`
	Reason string       `json:"reason,omitempty"`
}

// componentPaths are where a Claude or Codex plugin keeps each component
// other than skills, relative to its root.
var componentPaths = []struct {
	c    Component
	path string
	dir  bool
}{
	{ComponentAgents, "agents", true},
	{ComponentCommands, "commands", true},
	{ComponentHooks, HooksFile, false},
	{ComponentMCP, ".mcp.json", false},
}

// perFile are the components reported file by file when they load (hooks
// hook by hook, the MCP servers by runner/mcp, server by server).
var perFile = Components{ComponentAgents, ComponentCommands, ComponentHooks, ComponentMCP}

// componentStates reports the components the plugin at rel (root on disk)
// ships: its skill directories skills, and those of componentPaths that
// are present.
func componentStates(fsys fs.FS, rel, root string, skills []string, comps Components) []ComponentState {
	var out []ComponentState
	add := func(c Component, p string) {
		s := ComponentState{Component: c, Path: filepath.Join(root, filepath.FromSlash(p)), Status: layer.StatusActive}
		switch {
		case !comps.Has(c):
			s.Status, s.Reason = layer.StatusInactive, fmt.Sprintf(
				"not enabled by components; add %q to [plugins] components or aerie plugin install --components", c)
		case perFile.Has(c):
			return // its files are reported as they load
		}
		out = append(out, s)
	}
	for _, s := range skills {
		if st, err := fs.Stat(fsys, path.Join(rel, s)); err == nil && st.IsDir() {
			add(ComponentSkills, s)
		}
	}
	for _, cp := range componentPaths {
		if st, err := fs.Stat(fsys, path.Join(rel, cp.path)); err == nil && st.IsDir() == cp.dir {
			add(cp.c, cp.path)
		}
	}
	return out
}

// loadClaude loads the components of the Claude or Codex plugin p at rel
// that comps enables beyond its skills, and reports each file. Its hooks
// run in workdir.
func loadClaude(
	fsys fs.FS, l layer.Layer, rel string, p *Plugin, m *Manifest, comps Components, workdir string,
) []ComponentState {
	var out []ComponentState
	present := func(dir string) bool {
		st, err := fs.Stat(fsys, path.Join(rel, dir))
		return err == nil && st.IsDir()
	}
	if comps.Has(ComponentAgents) && present("agents") {
		out = append(out, loadAgents(fsys, rel, p)...)
	}
	if comps.Has(ComponentCommands) && present("commands") {
		out = append(out, loadCommands(fsys, rel, p, l.Kind == layer.KindProject)...)
	}
	if st, err := fs.Stat(fsys, path.Join(rel, HooksFile)); comps.Has(ComponentHooks) && err == nil && !st.IsDir() {
		out = append(out, loadHooks(fsys, l, rel, p, workdir)...)
	}
	if comps.Has(ComponentMCP) {
		out = append(out, loadMCP(fsys, rel, p, m)...)
	}
	return out
}

// reportReason is the state's reason as the extensions report gives it: a
// hook's matcher first, since the report has no field for it.
func (s ComponentState) reportReason() string {
	if s.Matcher == "" {
		return s.Reason
	}
	m := "matcher " + s.Matcher
	if s.Reason == "" {
		return m
	}
	return m + "; " + s.Reason
}

// loadMCP reads the plugin's MCP server declarations into p.ClaudeMCP: its
// .mcp.json when present, the files its manifest m names, and the servers
// m declares itself. A named file that cannot be read is reported.
func loadMCP(fsys fs.FS, rel string, p *Plugin, m *Manifest) []ComponentState {
	var out []ComponentState
	if _, err := fs.Stat(fsys, path.Join(rel, MCPFile)); err == nil {
		out = append(out, readMCP(fsys, rel, p, MCPFile))
	}
	for _, f := range m.MCPFiles {
		out = append(out, readMCP(fsys, rel, p, f))
	}
	if m.MCPInline != nil {
		p.ClaudeMCP = append(p.ClaudeMCP, MCPSource{File: p.Manifest, Data: m.MCPInline})
	}
	var failed []ComponentState
	for _, s := range out {
		if s.Status != layer.StatusActive {
			failed = append(failed, s)
		}
	}
	return failed
}

// readMCP reads the declarations file f of the plugin; the state says
// whether it could be read (its servers are reported by runner/mcp).
func readMCP(fsys fs.FS, rel string, p *Plugin, f string) ComponentState {
	s := ComponentState{
		Component: ComponentMCP, Path: filepath.Join(p.Root, filepath.FromSlash(f)), Status: layer.StatusActive,
	}
	data, err := readLimited(fsys, path.Join(rel, f))
	if err != nil {
		s.Status, s.Reason = layer.StatusSkipped, fmt.Sprintf("cannot read the MCP servers' declarations: %v", err)
		return s
	}
	p.ClaudeMCP = append(p.ClaudeMCP, MCPSource{File: s.Path, Data: data})
	return s
}
