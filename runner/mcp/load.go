package mcp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/pluginroot"
)

// MaxFileSize bounds a declaration file; larger ones are not read.
const MaxFileSize = 1 << 20

// MaxFiles caps the declarations read from one layer's mcp_servers/, in
// name order. Each declares a server a session connects to (a process, for
// stdio), so a real layer holds a handful; a repository that plants ten
// thousand cannot make every session read them all. The directory's
// entries are read at most layer.MaxDirEntries at a time, as a
// custom tools directory's are.
const MaxFiles = 128

// Trust decides whether a project layer's server may be used: manifest
// is the declaration's absolute path, executables the command when it is
// a path (relative ones resolved against the working directory). The
// verdict says whether no pin covers the declaration or it changed since
// it was pinned. Trust pins (layer.Pins) implement it.
type Trust interface {
	Check(l layer.Layer, manifest string, executables []string) layer.Verdict
}

// LoadOptions configure Load.
type LoadOptions struct {
	// Dir is the working directory, where stdio servers start.
	Dir string
	// Executors are the executor ids besides "local" a server may name.
	Executors []string
	// Listing, when set, is the load's listing of the layers' top
	// directories (layer.ListLayers): a layer it shows without an mcp_servers directory
	// is not opened for it.
	Listing *layer.Listing
}

// File is one declaration Load (or AddPlugin) found, for the extensions
// report.
type File struct {
	Layer layer.Layer `json:"layer"`
	Path  string      `json:"path"`
	ID    string      `json:"id"`
	// Plugin is the declaring plugin, for a plugin's entry.
	Plugin string `json:"plugin,omitempty"`
	// Status is active (the server is connected), shadowed (a nearer
	// declaration has its id), skipped (Problems say why) or inactive:
	// disabled: true, or a project layer's declaration without a matching
	// trust pin, as Trust says.
	Status layer.Status `json:"status"`
	// Trust is the verdict of the trust check, for a declaration that
	// needs a pin: trusted, untrusted, or modified when a pin covers it
	// but it (or its command) changed since.
	Trust layer.TrustStatus `json:"trust,omitempty"`
	// Reason says why a declaration is not active.
	Reason string `json:"reason,omitempty"`
	// Digest is "sha256:…" over the declaration's bytes, when they were
	// read: a shadowed declaration is not.
	Digest string `json:"digest,omitempty"`
	// Executables are what a trust pin of an untrusted declaration must
	// cover besides it: its stdio command, when that is a path.
	Executables []string `json:"executables,omitempty"`
	// Variables are the environment variables a Claude or Codex plugin's
	// declaration read, by name: their values are never reported.
	Variables []string `json:"variables,omitempty"`
}

// Config is the MCP servers a session uses and the report of how they
// were found.
type Config struct {
	// Servers are the servers to connect, by id.
	Servers []Server `json:"servers"`
	// Files lists every declaration found, with its status.
	Files []File `json:"files"`
	// Problems are the reasons declarations, or fields of them, were not
	// used.
	Problems []layer.Problem `json:"problems,omitempty"`

	// claimed maps an id to the declaration that has it.
	claimed map[string]File
}

// Load reads mcp_servers/*.yaml in every layer, nearest first: the
// nearest declaration of an id wins, whatever becomes of it — a farther
// one is shadowed even when the nearest is skipped, untrusted or
// disabled, so that which server runs never depends on whether a file
// happens to parse. A malformed declaration is skipped with its
// problems; in a private layer it is also an error, returned with
// everything Load found. A project layer's server is used only when
// trust accepts it (nil trust accepts none): a stdio server runs the
// repository's command, and an http one would have the agent's own
// container connect where the repository says.
func Load(layers []layer.Layer, trust Trust, opts LoadOptions) (Config, error) {
	c := Config{claimed: make(map[string]File)}
	errs := make([]error, 0, len(layers))
	for _, l := range layers {
		errs = append(errs, c.loadLayer(l, trust, opts)...)
	}
	c.sort()
	if len(errs) > 0 {
		return c, fmt.Errorf("load MCP servers: %w", errors.Join(errs...))
	}
	return c, nil
}

func (c *Config) loadLayer(l layer.Layer, trust Trust, opts LoadOptions) []error {
	var errs []error
	fail := func(p layer.Problem) {
		c.Problems = append(c.Problems, p)
		if l.Private() {
			errs = append(errs, p)
		}
	}
	if opts.Listing.Absent(l, "mcp_servers") {
		return nil
	}
	root, err := layer.OpenDir(l.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		fail(layer.Problem{Layer: l.Name, File: l.Dir, Reason: fmt.Sprintf("cannot open the layer: %v", unwrapPath(err))})
		return errs
	}
	defer root.Close()
	dir := filepath.Join(l.Dir, "mcp_servers")
	entries, more, err := root.ReadDir("mcp_servers", layer.MaxDirEntries)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		fail(layer.Problem{Layer: l.Name, File: dir, Reason: fmt.Sprintf("cannot read the directory: %v", unwrapPath(err))})
		return errs
	}
	declarations := 0
	for i, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		id, isYAML := strings.CutSuffix(name, ".yaml")
		switch {
		case strings.HasPrefix(name, "."):
			continue // editor and system files
		case !isYAML:
			if ext := filepath.Ext(name); ext == ".yml" || ext == ".json" {
				c.Files = append(c.Files, File{Layer: l, Path: path, Status: layer.StatusSkipped,
					Reason: fmt.Sprintf("only mcp_servers/*.yaml files declare servers; rename it %s.yaml",
						strings.TrimSuffix(name, ext))})
			}
			continue
		}
		if declarations++; declarations > MaxFiles {
			var rest int
			for _, e := range entries[i:] {
				if strings.HasSuffix(e.Name(), ".yaml") && !strings.HasPrefix(e.Name(), ".") {
					rest++
				}
			}
			more = false // said below
			reason := fmt.Sprintf("only the first %d declarations in name order are read; "+
				"the other %d, from mcp_servers/%s on, are not; declare fewer servers, or spread them over layers",
				MaxFiles, rest, name)
			c.Files = append(c.Files, File{Layer: l, Path: dir, Status: layer.StatusSkipped, Reason: reason})
			fail(layer.Problem{Layer: l.Name, File: dir, Reason: reason})
			break
		}
		if first, dup := c.claimed[id]; dup {
			c.Files = append(c.Files, File{Layer: l, Path: path, ID: id, Status: layer.StatusShadowed,
				Reason: fmt.Sprintf("the declaration in %s (%s) comes first", first.Layer.Name, first.Path)})
			continue
		}
		c.loadDeclaration(root, l, id, path, trust, opts, fail)
	}
	if more {
		reason := fmt.Sprintf("the directory has more than %d entries; only the first %d read were looked at; "+
			"declare fewer servers, or spread them over layers", layer.MaxDirEntries, layer.MaxDirEntries)
		c.Files = append(c.Files, File{Layer: l, Path: dir, Status: layer.StatusSkipped, Reason: reason})
		fail(layer.Problem{Layer: l.Name, File: dir, Reason: reason})
	}
	return errs
}

// loadDeclaration reads and checks the declaration path of server id in
// layer l, checks its trust, and records it: its File, and the server when
// it is active. fail records a problem.
func (c *Config) loadDeclaration(
	root *layer.Dir, l layer.Layer, id, path string, trust Trust, opts LoadOptions, fail func(layer.Problem),
) {
	f := File{Layer: l, Path: path, ID: id}
	src := Source{Layer: l, File: path, Executors: opts.Executors}
	data, err := readBounded(root, "mcp_servers/"+filepath.Base(path))
	var srv Server
	var probs []layer.Problem
	if err != nil {
		probs = []layer.Problem{{Layer: l.Name, File: path, Reason: err.Error()}}
	} else {
		f.Digest = layer.Digest(data)
		srv, probs = ParseFile(data, id, src)
	}
	switch {
	case len(probs) > 0:
		f.Status, f.Reason = layer.StatusSkipped, layer.Summary(probs)
		for _, p := range probs {
			fail(p)
		}
	case srv.Disabled:
		f.Status, f.Reason = layer.StatusInactive, disabledReason
	case l.NeedsTrust():
		v := layer.Verdict{Status: layer.Untrusted, Reason: "no trust pins"}
		exes := executables(srv, opts.Dir)
		if trust != nil {
			v = trust.Check(l, path, exes)
		}
		f.Trust = v.Status
		if v.Status != layer.Trusted {
			// Modified rather than untrusted when a pin covers the
			// declaration: the fix is to restore it, or to review it
			// and pin it again.
			f.Status, f.Reason, f.Executables = layer.StatusInactive, v.Reason, exes
			c.Problems = append(c.Problems, layer.Problem{Layer: l.Name, File: path, Reason: string(v.Status) + ": " + v.Reason})
			break
		}
		f.Status = layer.StatusActive
	default:
		f.Status = layer.StatusActive
	}
	if f.Status == layer.StatusActive {
		c.Servers = append(c.Servers, srv)
	}
	c.claimed[id] = f
	c.Files = append(c.Files, f)
}

// executables returns what a trust pin must cover besides the manifest:
// a stdio server's command when it is a path.
func executables(srv Server, dir string) []string {
	if srv.Type != TypeStdio || !strings.ContainsRune(srv.Command, '/') {
		return nil
	}
	if filepath.IsAbs(srv.Command) || dir == "" {
		return []string{srv.Command}
	}
	return []string{filepath.Join(dir, srv.Command)}
}

// disabledReason is the reason of a declaration that says disabled: true.
const disabledReason = "disabled: true in its declaration"

// AddPlugin adds the servers an enabled plugin declares (see ParseEntry),
// root being its absolute directory. A server whose id a mcp_servers
// file declares is skipped: the file wins. Two plugins declaring the
// same id is an error. In a stdio server's command, args and env,
// ${AERIE_PLUGIN_ROOT} (or ${OPENVAALA_PLUGIN_ROOT}) becomes root, and
// the server gets both as variables too.
func (c *Config) AddPlugin(plugin, root string, servers []Server) error {
	if c.claimed == nil {
		c.claimed = make(map[string]File)
	}
	var errs []error
	for _, srv := range servers {
		f := File{Layer: srv.Layer, Path: srv.File, ID: srv.ID, Plugin: plugin}
		if first, dup := c.claimed[srv.ID]; dup {
			if first.Plugin != "" {
				p := layer.Problem{
					Layer: srv.Layer.Name, File: srv.File, Field: "mcp_servers",
					Reason: fmt.Sprintf("plugins %s and %s both declare the MCP server %q; disable one of them",
						first.Plugin, plugin, srv.ID),
				}
				c.Problems = append(c.Problems, p)
				errs = append(errs, p)
				f.Status, f.Reason = layer.StatusSkipped, p.Reason
			} else {
				f.Status = layer.StatusShadowed
				f.Reason = fmt.Sprintf("%s in %s wins over the plugin's entry", first.Path, first.Layer.Name)
			}
			c.Files = append(c.Files, f)
			continue
		}
		srv.Plugin, srv.PluginRoot = plugin, root
		if srv.Type == TypeStdio {
			srv.Command = pluginroot.Expand(srv.Command, root, pluginroot.Native)
			srv.Args = pluginroot.ExpandEach(srv.Args, root, pluginroot.Native)
			srv.Env = pluginroot.Env(srv.Env, root, pluginroot.Native)
		}
		f.Status, f.Variables = layer.StatusActive, srv.Resolved.Names
		if len(srv.Resolved.Uses) > 0 {
			f.Reason = fmt.Sprintf("resolved from the environment: %s; each value is used there only, by %s, and never shown",
				strings.Join(srv.Resolved.Uses, ", "), user(srv))
		}
		if srv.Disabled {
			f.Status, f.Reason = layer.StatusInactive, disabledReason
		} else {
			c.Servers = append(c.Servers, srv)
		}
		c.claimed[srv.ID] = f
		c.Files = append(c.Files, f)
	}
	c.sort()
	if len(errs) > 0 {
		return fmt.Errorf("add the MCP servers of plugin %s: %w", plugin, errors.Join(errs...))
	}
	return nil
}

// user says who uses a server's resolved values.
func user(srv Server) string {
	if srv.Type == TypeStdio {
		return "the server's own process, which gets no other of the runner's variables"
	}
	return "the runner's requests to the server"
}

// AddClaudePlugin adds the servers of a Claude or Codex plugin: data is
// its .mcp.json, or the mcpServers of its manifest, in file, read in
// Claude's format as ImportClaude reads it (the type defaults to stdio).
// ${CLAUDE_PLUGIN_ROOT} (and aerie's placeholders) become root, and a
// stdio server gets CLAUDE_PLUGIN_ROOT as a variable too; every other
// ${VAR} and ${VAR:-default} in command, args, env, url and headers
// resolves through vars. An entry with a problem — a variable that does
// not resolve, a field aerie cannot translate — is skipped with it, in
// the report and Problems, and the plugin's other servers still load: a
// plugin's component is not the run's configuration. The others are
// added as AddPlugin adds an aerie plugin's, whose error it returns.
func (c *Config) AddClaudePlugin(plugin, root, file string, data []byte, vars Variables) (err error) {
	ps := &problems{src: Source{File: file, Plugin: plugin}, budget: nodeBudget}
	var errs []error
	defer func() {
		if r := recover(); r != nil {
			p := ps.problem("", fmt.Sprintf("cannot parse JSON: internal error: %v", r))
			c.skipPlugin(plugin, file, "", []layer.Problem{p})
		}
	}()
	fileProbs := -1 // the file's own problems come before its entries'
	claudeEntries(data, ps, func(e claudeEntry) {
		if fileProbs < 0 {
			fileProbs = e.first
		}
		var got Resolved
		e.values(func(n *yaml.Node, path string) {
			vars.expandNode(n, path, strings.TrimPrefix(path, e.path+"."), root, &got, ps)
		})
		srv, ok := e.translate(ps)
		probs := e.problems(ps)
		for i := range probs {
			probs[i].Reason = got.Mask(probs[i].Reason)
		}
		if !ok {
			c.skipPlugin(plugin, file, e.id, probs)
			return
		}
		srv.Resolved = got
		if srv.Type == TypeStdio && vars.NoStdio != "" {
			c.Files = append(c.Files, File{
				Path: file, ID: srv.ID, Plugin: plugin, Status: layer.StatusSkipped, Reason: vars.NoStdio,
			})
			return
		}
		if srv.Type == TypeStdio {
			if _, set := srv.Env[pluginroot.VarClaude]; !set {
				if srv.Env == nil {
					srv.Env = map[string]string{}
				}
				srv.Env[pluginroot.VarClaude] = root
			}
		}
		// One at a time, so that the report lists the entries in order.
		errs = append(errs, c.AddPlugin(plugin, root, []Server{srv}))
	})
	if fileProbs < 0 {
		fileProbs = len(ps.list)
	}
	if fileProbs > 0 {
		c.skipPlugin(plugin, file, "", ps.list[:fileProbs])
	}
	return errors.Join(errs...)
}

// skipPlugin records a plugin's entry id (the whole file when "") that is
// skipped for probs.
func (c *Config) skipPlugin(plugin, file, id string, probs []layer.Problem) {
	c.Problems = append(c.Problems, probs...)
	c.Files = append(c.Files, File{
		Path: file, ID: id, Plugin: plugin, Status: layer.StatusSkipped, Reason: layer.Summary(probs),
	})
}

func (c *Config) sort() {
	slices.SortFunc(c.Servers, func(a, b Server) int { return strings.Compare(a.ID, b.ID) })
}

// readBounded reads the regular file name in root, refusing one larger
// than MaxFileSize without reading it.
func readBounded(root *layer.Dir, name string) ([]byte, error) {
	// It does not block on a FIFO in place of a file.
	f, err := root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cannot open: %v", describe(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot stat: %v", unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("larger than 1 MB (%d bytes); not read", fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read: %v", unwrapPath(err))
	}
	if len(data) > MaxFileSize {
		return nil, errors.New("larger than 1 MB; not read")
	}
	return data, nil
}

func describe(err error) string {
	if errors.Is(err, layer.ErrEscapes) {
		return "it leads outside the layer"
	}
	return unwrapPath(err).Error()
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
