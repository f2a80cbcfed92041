package plugins

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/pluginroot"
)

// Dir is the directory of plugins in a layer.
const Dir = "plugins"

// TypePlugin is the extensions report type of a plugin.
const TypePlugin layer.Type = "plugin"

// TypeComponent is the extensions report type of a component a Claude or
// Codex plugin ships (one per agent or command file), listed after its
// plugin.
const TypeComponent layer.Type = "plugin_component"

// noManifest says that a directory holds none of the manifests a plugin
// may have.
const noManifest = "no plugin manifest (.aerie-plugin/plugin.yaml, .openvaala-plugin/plugin.yaml, " +
	".codex-plugin/plugin.json or .claude-plugin/plugin.json)"

// Options tune Load.
type Options struct {
	// WorkDir is the agent's working directory, which hook commands run in.
	WorkDir string
	// Disabled names plugins that are not used whatever layer holds them
	// (plugins.disabled in the configuration).
	Disabled []string
	// Listing, when set, is the load's listing of the layers' top
	// directories (layer.ListLayers): a layer it shows without a plugins directory
	// is not opened for it.
	Listing *layer.Listing
	// Components are the components loaded from a Claude or Codex plugin
	// whose install record names none ([plugins] components); nil is
	// DefaultComponents. A native plugin's manifest says what it bundles.
	Components Components
}

// components returns the components to load from a plugin of format
// with the install record in, or the problem with the record's list.
func (o Options) components(format Format, in *Install, file string) (Components, error) {
	if format != FormatClaude && format != FormatCodex {
		return AllComponents, nil
	}
	if in != nil && len(in.Components) > 0 {
		cs, err := ParseComponents(in.Components)
		if err != nil {
			return nil, layer.Problem{File: file, Field: "components",
				Reason: err.Error() + "; reinstall the plugin with aerie plugin install --components"}
		}
		return cs, nil
	}
	if o.Components == nil {
		return DefaultComponents, nil
	}
	return o.Components, nil
}

// Entry is one plugin directory found in a layer and what became of it.
type Entry struct {
	// Name is the directory's name.
	Name  string      `json:"name"`
	Layer layer.Layer `json:"layer"`
	// Dir is the plugin's absolute directory.
	Dir string `json:"dir"`
	// Manifest is the absolute path of the manifest used, if any.
	Manifest string `json:"manifest,omitempty"`
	// Digest is "sha256:…" over the manifest's bytes, when they were read.
	Digest      string `json:"digest,omitempty"`
	Format      Format `json:"format,omitempty"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Enabled is false when the plugin is disabled by the configuration
	// or by its install record.
	Enabled bool `json:"enabled"`
	// Status is active, inactive (disabled), shadowed or skipped.
	Status layer.Status `json:"status"`
	// Reason says why a plugin is not active.
	Reason string `json:"reason,omitempty"`
	// ShadowedBy is the directory of the nearer plugin of the same name.
	ShadowedBy string `json:"shadowed_by,omitempty"`
	// Install is the plugin's install record, if it has one.
	Install *Install `json:"install,omitempty"`
	// Components are the components loaded from the plugin.
	Components Components `json:"components,omitempty"`
	// ComponentStates are the components a Claude or Codex plugin ships
	// and what became of each.
	ComponentStates []ComponentState `json:"component_states,omitempty"`
	// Err is the problem behind a skipped entry.
	Err error `json:"-"`
}

// Set is the outcome of Load.
type Set struct {
	// Plugins are the enabled plugins, by name.
	Plugins []Plugin
	// Entries are every plugin directory found, layer by layer, nearest
	// first, then by name.
	Entries []Entry
}

// MCPServers returns every enabled plugin's servers, in plugin-name order.
func (s *Set) MCPServers() []MCPServer {
	var out []MCPServer
	for _, p := range s.Plugins {
		out = append(out, p.MCPServers...)
	}
	return out
}

// Hooks returns every enabled plugin's hooks, in plugin-name order: the
// order they run in, after the layers' hooks.
func (s *Set) Hooks() []hooks.Hook {
	var out []hooks.Hook
	for _, p := range s.Plugins {
		out = append(out, p.Hooks...)
	}
	return out
}

// SkillRoots returns every enabled plugin's skill directories, in
// plugin-name order.
func (s *Set) SkillRoots() []SkillRoot {
	var out []SkillRoot
	for _, p := range s.Plugins {
		out = append(out, p.Skills...)
	}
	return out
}

// Artifacts returns the entries as extensions report artifacts of type
// "plugin", with the digest of the manifest read and their reasons
// sanitized (a manifest error quotes the manifest). A shadowed plugin names the artifact path of the nearer one,
// which lists it among its copies.
func (s *Set) Artifacts() []layer.Artifact {
	out := make([]layer.Artifact, 0, len(s.Entries))
	winners := map[string]int{} // a winner's directory → its index in out
	for _, e := range s.Entries {
		p := e.Manifest
		if p == "" {
			p = e.Dir
		}
		a := layer.Artifact{
			Type: TypePlugin, Name: e.Name, Layer: e.Layer.Name, LayerKind: e.Layer.Kind,
			Path: p, Status: e.Status, Digest: e.Digest, Reason: layer.SanitizeReason(e.Reason), Err: e.Err,
		}
		if e.ShadowedBy == "" {
			winners[e.Dir] = len(out)
		} else if w, ok := winners[e.ShadowedBy]; ok {
			a.ShadowedBy = out[w].Path
			out[w].Shadowed = append(out[w].Shadowed, layer.Copy{Layer: a.Layer, Path: a.Path})
		} else {
			a.ShadowedBy = e.ShadowedBy
		}
		out = append(out, a)
		for _, c := range e.ComponentStates {
			out = append(out, layer.Artifact{
				Type: TypeComponent, Name: cmp.Or(c.Name, e.Name+" "+string(c.Component)), Layer: e.Layer.Name,
				LayerKind: e.Layer.Kind, Path: c.Path, Status: c.Status, Reason: layer.SanitizeReason(c.reportReason()),
			})
		}
	}
	return out
}

// Load finds the plugins of layers (nearest first) and loads the enabled
// ones. The nearest plugin of a name wins; farther ones are shadowed. The
// error joins every problem that stops the configuration from loading: a
// broken manifest of an enabled plugin outside a project layer, and two
// enabled plugins declaring the same MCP server id. The Set is complete
// even then, for reports.
func Load(layers []layer.Layer, opts Options) (*Set, error) {
	disabled := map[string]bool{}
	for _, n := range opts.Disabled {
		disabled[n] = true
	}
	set := &Set{}
	var errs []error
	winners := map[string]int{} // name → index in set.Entries
	for _, l := range layers {
		if l.Dir == "" || opts.Listing.Absent(l, Dir) {
			continue // the bundled layer holds no plugins
		}
		fsys, err := layerFS(l)
		if err != nil {
			continue // a layer directory that vanished holds nothing
		}
		dirents, err := fs.ReadDir(fsys, Dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				e := Entry{Name: Dir, Layer: l, Dir: filepath.Join(l.Dir, Dir), Status: layer.StatusSkipped,
					Reason: fmt.Sprintf("cannot read the plugins directory: %v", err), Err: err}
				set.Entries = append(set.Entries, e)
				if l.Private() {
					errs = append(errs, fmt.Errorf("read plugins: %w", err))
				}
			}
			continue
		}
		for _, de := range dirents {
			name := de.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			e, p, err := loadOne(fsys, l, name, disabled[name], opts)
			if i, ok := winners[name]; ok && e.Status != layer.StatusSkipped {
				e.Status, e.ShadowedBy = layer.StatusShadowed, set.Entries[i].Dir
				e.ComponentStates = nil
				e.Reason = "a nearer layer has a plugin of the same name"
				set.Entries = append(set.Entries, e)
				continue
			}
			if err != nil && l.Private() && e.Enabled {
				errs = append(errs, err)
			}
			if e.Status != layer.StatusSkipped {
				winners[name] = len(set.Entries)
			}
			set.Entries = append(set.Entries, e)
			if p != nil {
				set.Plugins = append(set.Plugins, *p)
			}
		}
	}
	sort.Slice(set.Plugins, func(i, j int) bool { return set.Plugins[i].Name < set.Plugins[j].Name })
	errs = append(errs, checkMCPIDs(set.Plugins)...)
	return set, errors.Join(errs...)
}

func checkMCPIDs(ps []Plugin) []error {
	var errs []error
	owner := map[string]string{}
	for _, p := range ps {
		for _, s := range p.MCPServers {
			if prev, ok := owner[s.ID]; ok {
				errs = append(errs, fmt.Errorf("plugins %s and %s both declare the MCP server %q; disable one of them",
					prev, p.Name, s.ID))
				continue
			}
			owner[s.ID] = p.Name
		}
	}
	return errs
}

// layerFS reads a project layer through an os.Root, so that a plugin that
// is a symbolic link out of the repository is not read; other layers are
// the user's own, and links in them are followed.
func layerFS(l layer.Layer) (fs.FS, error) {
	if l.Kind == layer.KindProject {
		r, err := os.OpenRoot(l.Dir)
		if err != nil {
			return nil, err
		}
		return r.FS(), nil
	}
	if _, err := os.Stat(l.Dir); err != nil {
		return nil, err
	}
	return os.DirFS(l.Dir), nil
}

// loadOne reads the plugin directory name of layer. It returns the entry,
// the plugin when it is enabled and loads, and the problem otherwise.
func loadOne(fsys fs.FS, l layer.Layer, name string, disabled bool, opts Options) (Entry, *Plugin, error) {
	rel := path.Join(Dir, name)
	root := filepath.Join(l.Dir, Dir, name)
	e := Entry{Name: name, Layer: l, Dir: root, Enabled: !disabled}
	skip := func(err error) (Entry, *Plugin, error) {
		e.Status, e.Reason, e.Err = layer.StatusSkipped, err.Error(), err
		if !e.Enabled {
			// A disabled plugin never stops the configuration from
			// loading: disabling is how a user gets past a broken one.
			e.Status = layer.StatusInactive
			e.Reason = "disabled; " + e.Reason
		}
		return e, nil, err
	}
	st, err := fs.Stat(fsys, rel)
	if err != nil {
		return skip(fmt.Errorf("read plugin %s: %w", root, err))
	}
	if !st.IsDir() {
		e.Status, e.Reason = layer.StatusSkipped, "not a directory"
		return e, nil, nil
	}
	if inst, err := readInstall(fsys, rel); err != nil {
		return skip(err)
	} else if inst != nil {
		e.Install = inst
		if !inst.Enabled {
			e.Enabled = false
		}
	}
	m, err := readManifest(fsys, rel, root, &e)
	if err != nil {
		return skip(err)
	}
	if m == nil {
		e.Status, e.Reason = layer.StatusSkipped, noManifest
		return e, nil, nil
	}
	e.Version, e.Description = m.Version, m.Description
	if m.Name != name {
		return skip(layer.Problem{File: e.Manifest, Field: fieldName,
			Reason: fmt.Sprintf("name %q must equal the plugin's directory name %q; rename one of them", m.Name, name)})
	}
	if !e.Enabled {
		e.Status, e.Reason = layer.StatusInactive, verb(false)
		return e, nil, nil
	}
	comps, err := opts.components(m.Format, e.Install, filepath.Join(root, InstallFile))
	if err != nil {
		return skip(err)
	}
	e.Components = comps
	if m.Format == FormatClaude || m.Format == FormatCodex {
		e.ComponentStates = componentStates(fsys, rel, root, m.Skills, comps)
	}
	p := &Plugin{Name: name, Version: m.Version, Description: m.Description, Root: root,
		Format: m.Format, Manifest: e.Manifest, Layer: l.Name, Install: e.Install, Project: l.Kind == layer.KindProject}
	for _, s := range m.Skills {
		if !comps.Has(ComponentSkills) {
			break
		}
		if st, err := fs.Stat(fsys, path.Join(rel, s)); err == nil && st.IsDir() {
			p.Skills = append(p.Skills, SkillRoot{Dir: filepath.Join(root, filepath.FromSlash(s)), Namespace: name})
		}
	}
	if p.Project {
		e.ComponentStates = append(e.ComponentStates, p.withoutProjectCode(m)...)
	} else if m.Hooks != nil {
		src := hooks.Source{Layer: l, File: e.Manifest, Dir: root, Root: root, Confined: true,
			Env: pluginroot.Environ(root, pluginroot.Native)}
		hs, probs := hooks.DecodeYAMLEvents(m.Hooks, "hooks", src, opts.WorkDir)
		if len(probs) > 0 {
			// The hooks' problems name the manifest, and its layer.
			errs := make([]error, len(probs))
			for i, pr := range probs {
				errs[i] = pr
			}
			return skip(errors.Join(errs...))
		}
		p.Hooks = hs
	}
	for _, s := range m.MCPServers {
		if p.Project && s.Type == TransportStdio {
			continue // withoutProjectCode reported it
		}
		p.MCPServers = append(p.MCPServers, s.place(name, e.Manifest, root))
	}
	if m.Format == FormatClaude || m.Format == FormatCodex {
		e.ComponentStates = append(e.ComponentStates, loadClaude(fsys, l, rel, p, m, comps, opts.WorkDir)...)
	}
	e.Status = layer.StatusActive
	return e, p, nil
}

// readManifest reads the manifest of the plugin at rel (root on disk) and
// fills e's manifest, digest and format: the first manifest file present,
// with the skills its marketplace entry adds; or, without one, the manifest
// its marketplace entry gave it in the install record. It returns nil when
// there is neither.
func readManifest(fsys fs.FS, rel, root string, e *Entry) (*Manifest, error) {
	var extra *Manifest
	if e.Install != nil && e.Install.Manifest != nil {
		file := filepath.Join(root, InstallFile)
		em, err := e.Install.Manifest.manifest(file)
		if err != nil {
			return nil, err
		}
		extra = em
	}
	var mf *ManifestFile
	for i := range ManifestFiles {
		if _, err := fs.Stat(fsys, path.Join(rel, ManifestFiles[i].Path)); err == nil {
			mf = &ManifestFiles[i]
			break
		}
	}
	if mf == nil {
		if extra == nil || extra.Name == "" {
			return nil, nil
		}
		e.Manifest, e.Format = filepath.Join(root, InstallFile), extra.Format
		if data, err := readLimited(fsys, path.Join(rel, InstallFile)); err == nil {
			e.Digest = layer.Digest(data)
		}
		return extra, nil
	}
	e.Manifest, e.Format = filepath.Join(root, filepath.FromSlash(mf.Path)), mf.Format
	data, err := readLimited(fsys, path.Join(rel, mf.Path))
	if err != nil {
		return nil, layer.Problem{File: e.Manifest, Reason: err.Error()}
	}
	e.Digest = layer.Digest(data)
	m, err := ParseManifest(mf.Format, e.Manifest, data)
	if err != nil {
		return nil, err
	}
	if extra != nil {
		for _, s := range extra.Skills {
			if !contains(m.Skills, s) {
				m.Skills = append(m.Skills, s)
			}
		}
	}
	return m, nil
}

func readLimited(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > MaxManifestSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxManifestSize)
	}
	buf := make([]byte, 0, st.Size())
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > MaxManifestSize {
			return nil, fmt.Errorf("larger than %d bytes", MaxManifestSize)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return buf, nil
			}
			return nil, err
		}
	}
}

// Agents returns every enabled plugin's agents, in plugin-name order.
func (s *Set) Agents() []Agent {
	var out []Agent
	for _, p := range s.Plugins {
		out = append(out, p.Agents...)
	}
	return out
}

// Agent returns the agent type name (<plugin>:<agent>) of an enabled
// plugin.
func (s *Set) Agent(name string) (Agent, bool) {
	for _, p := range s.Plugins {
		for _, a := range p.Agents {
			if a.Name == name {
				return a, true
			}
		}
	}
	return Agent{}, false
}

// Command returns the command name (<plugin>:<command>) of an enabled
// plugin.
func (s *Set) Command(name string) (Command, bool) {
	for _, p := range s.Plugins {
		for _, c := range p.Commands {
			if c.Name == name {
				return c, true
			}
		}
	}
	return Command{}, false
}
