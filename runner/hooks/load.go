package hooks

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/aerie-run/aerie/runner/extensions"
)

// MaxFileSize bounds a hook file. Larger files are skipped unread, so a
// repository cannot stall discovery with a huge one.
const MaxFileSize = 1 << 20

// Trust decides whether a project layer's hook file may run. manifest is
// the file's absolute path; executables are the hooks' Executables, the
// path-bearing first command tokens and scripts, in order, each once.
// Trust pins (extensions.Pins) implement it.
type Trust interface {
	Trusted(l extensions.Layer, manifest string, executables []string) (ok bool, reason string)
}

// LoadOptions configure Load.
type LoadOptions struct {
	// Dir is the agent's working directory, where hook commands run:
	// relative executables resolve against it for trust pins.
	Dir string
	// Workspace is the workspace root. A project layer is opened through
	// an os.Root there, so that a layer directory swapped for a symbolic
	// link out of the workspace is not read; empty opens the layer's
	// directory as it is.
	Workspace string
	// Home expands ~/ in scripts and commands; the runner's home
	// directory when empty.
	Home string
}

// Status says what became of a hook file.
type Status string

const (
	// StatusActive files' hooks run.
	StatusActive Status = "active"
	// StatusShadowed is a farther hooks.toml: the nearest one wins.
	StatusShadowed Status = "shadowed"
	// StatusSkipped files could not be used; Problems say why.
	StatusSkipped Status = "skipped"
	// StatusUntrusted files are project files without a matching trust
	// pin.
	StatusUntrusted Status = "untrusted"
)

// File is one hook file Load found.
type File struct {
	Layer  extensions.Layer `json:"layer"`
	Path   string           `json:"path"`
	Format Format           `json:"format"`
	Status Status           `json:"status"`
	// Reason says why a file is not active.
	Reason string `json:"reason,omitempty"`
	// Hooks counts the hooks the file declares (when it parsed).
	Hooks int `json:"hooks"`
	// Executables are what a trust pin of the file covers besides the file:
	// its hooks' path-bearing programs and scripts (when it parsed).
	Executables []string `json:"executables,omitempty"`
}

// Loaded is what Load found in the layers.
type Loaded struct {
	// Hooks are the hooks to run: those of the nearest hooks.toml, then
	// those of every hooks/*.yaml in layer order and file name order.
	Hooks []Hook `json:"hooks"`
	// Files lists every hook file found, with its status.
	Files []File `json:"files"`
	// Problems are the reasons files, or fields in them, were not used.
	Problems []Problem `json:"problems,omitempty"`
}

// Load reads the hooks of layers, nearest first: the nearest hooks.toml
// (a farther one is shadowed even when the nearest is skipped), then every
// hooks/*.yaml of every layer. A malformed file is skipped with its
// problems; in a private layer it is also an error, returned with
// everything Load found. A project layer's file runs only when trust
// accepts it; a nil trust accepts none.
func Load(layers []extensions.Layer, trust Trust, opts LoadOptions) (Loaded, error) {
	var (
		out       Loaded
		errs      []error
		tomlFound bool
	)
	for _, l := range layers {
		root, err := openLayer(l, opts.Workspace)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			p := Problem{Layer: l.Name, File: l.Dir, Reason: fmt.Sprintf("cannot open the layer: %v", unwrapPath(err))}
			out.Problems = append(out.Problems, p)
			if l.Private() {
				errs = append(errs, p)
			}
			continue
		}
		ld := &layerLoad{l: l, root: root, trust: trust, opts: opts, out: &out}
		if tomlFound {
			ld.shadowed()
		} else {
			tomlFound = ld.toml()
		}
		ld.yamls()
		root.Close()
		errs = append(errs, ld.errs...)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("load hooks: %w", errors.Join(errs...))
	}
	return out, nil
}

type layerLoad struct {
	l     extensions.Layer
	root  *os.Root
	trust Trust
	opts  LoadOptions
	out   *Loaded
	errs  []error
}

func (ld *layerLoad) path(rel string) string { return filepath.Join(ld.l.Dir, rel) }

// toml loads the layer's hooks.toml and reports whether there is one.
func (ld *layerLoad) toml() bool {
	data, err := readBounded(ld.root, "hooks.toml")
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	src := Source{Layer: ld.l, File: ld.path("hooks.toml"), Dir: ld.l.Dir, Root: ld.l.Dir, Confined: ld.l.NeedsTrust(), Home: ld.opts.Home}
	if err != nil {
		ld.skip(src, FormatTOML, []Problem{{Layer: ld.l.Name, File: src.File, Reason: err.Error()}})
		return true
	}
	hooks, probs := ParseTOML(data, src, ld.opts.Dir)
	ld.use(src, FormatTOML, hooks, probs)
	return true
}

// shadowed records a farther hooks.toml.
func (ld *layerLoad) shadowed() {
	if _, err := ld.root.Stat("hooks.toml"); errors.Is(err, fs.ErrNotExist) {
		return
	}
	ld.out.Files = append(ld.out.Files, File{
		Layer: ld.l, Path: ld.path("hooks.toml"), Format: FormatTOML, Status: StatusShadowed,
		Reason: "a nearer layer's hooks.toml wins",
	})
}

// yamls loads the layer's hooks/*.yaml in file name order.
func (ld *layerLoad) yamls() {
	dir, err := ld.root.Open("hooks")
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var entries []fs.DirEntry
	if err == nil {
		entries, err = dir.ReadDir(-1)
		dir.Close()
	}
	if err != nil {
		src := Source{Layer: ld.l, File: ld.path("hooks")}
		ld.skip(src, FormatYAML, []Problem{{Layer: ld.l.Name, File: src.File, Reason: fmt.Sprintf("cannot read the hooks directory: %v", unwrapPath(err))}})
		return
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") || e.IsDir() {
			continue // scripts and other files are not configuration
		}
		rel := "hooks/" + e.Name()
		src := Source{Layer: ld.l, File: ld.path(rel), Dir: ld.path("hooks"), Root: ld.l.Dir, Confined: ld.l.NeedsTrust(), Home: ld.opts.Home}
		data, err := readBounded(ld.root, rel)
		if err != nil {
			ld.skip(src, FormatYAML, []Problem{{Layer: ld.l.Name, File: src.File, Reason: err.Error()}})
			continue
		}
		hooks, probs := ParseYAML(data, src, ld.opts.Dir)
		ld.use(src, FormatYAML, hooks, probs)
	}
}

// use adds a parsed file's hooks, or skips it for its problems or for
// want of trust.
func (ld *layerLoad) use(src Source, f Format, hooks []Hook, probs []Problem) {
	if len(probs) > 0 {
		ld.skip(src, f, probs)
		return
	}
	if ld.needsTrust(src.File) {
		ok, reason := false, "no trust pins"
		if ld.trust != nil {
			ok, reason = ld.trust.Trusted(ld.l, src.File, Executables(hooks))
		}
		if !ok {
			p := Problem{Layer: ld.l.Name, File: src.File, Reason: "untrusted: " + reason}
			ld.out.Problems = append(ld.out.Problems, p)
			ld.out.Files = append(ld.out.Files, File{Layer: ld.l, Path: src.File, Format: f, Status: StatusUntrusted, Reason: reason, Hooks: len(hooks), Executables: Executables(hooks)})
			return
		}
	}
	ld.out.Hooks = append(ld.out.Hooks, hooks...)
	ld.out.Files = append(ld.out.Files, File{Layer: ld.l, Path: src.File, Format: f, Status: StatusActive, Hooks: len(hooks), Executables: Executables(hooks)})
}

// needsTrust reports whether the hook file at path runs only with a trust
// pin: every file of the workspace, and a file in $AERIE_HOME that the
// agent wrote through extension_manage (or whose provenance sidecar is
// malformed) — the manager never grants trust.
func (ld *layerLoad) needsTrust(path string) bool {
	if ld.l.NeedsTrust() {
		return true
	}
	return ld.l.Kind == extensions.KindHome && extensions.ReadProvenance(ld.l, path).State != extensions.ProvenanceLegacy
}

func (ld *layerLoad) skip(src Source, f Format, probs []Problem) {
	ld.out.Problems = append(ld.out.Problems, probs...)
	reason := probs[0].Reason
	if probs[0].Field != "" {
		reason = probs[0].Field + ": " + reason
	}
	if len(probs) > 1 {
		reason = fmt.Sprintf("%s (and %d more problems)", reason, len(probs)-1)
	}
	ld.out.Files = append(ld.out.Files, File{Layer: ld.l, Path: src.File, Format: f, Status: StatusSkipped, Reason: reason})
	if ld.l.Private() {
		for _, p := range probs {
			ld.errs = append(ld.errs, p)
		}
	}
}

// Executables returns the executables of hooks, each once, in order.
func Executables(hooks []Hook) []string {
	var out []string
	seen := make(map[string]bool)
	for _, h := range hooks {
		for _, e := range h.Executables {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	return out
}

// openLayer opens the layer's directory as a root: a project layer's
// through the workspace's root when the workspace is known, so that only
// a directory inside the workspace is ever opened.
func openLayer(l extensions.Layer, workspace string) (*os.Root, error) {
	if l.Kind != extensions.KindProject || workspace == "" {
		return os.OpenRoot(l.Dir)
	}
	rel, ok := relLocal(workspace, l.Dir)
	if !ok {
		// The same directories, spelt through different links (/tmp and
		// /private/tmp).
		ws, err1 := filepath.EvalSymlinks(workspace)
		dir, err2 := filepath.EvalSymlinks(l.Dir)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("project layer %s: %w", l.Dir, errors.Join(err1, err2))
		}
		if rel, ok = relLocal(ws, dir); !ok {
			return nil, fmt.Errorf("project layer %s is outside the workspace %s", l.Dir, workspace)
		}
		workspace = ws
	}
	ws, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	return ws.OpenRoot(rel)
}

// relLocal returns target's path from base when it is inside base.
func relLocal(base, target string) (string, bool) {
	rel, err := filepath.Rel(base, target)
	return rel, err == nil && filepath.IsLocal(rel)
}

// readBounded reads the regular file name in root, refusing one larger
// than MaxFileSize without reading it. O_NONBLOCK: a FIFO planted in place
// of a hook file must not hang the load waiting for a writer.
func readBounded(root *os.Root, name string) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("cannot open: %v", unwrapPath(err))
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
		return nil, fmt.Errorf("larger than %d bytes (%d); not read", MaxFileSize, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read: %v", unwrapPath(err))
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("larger than %d bytes; not read", MaxFileSize)
	}
	return data, nil
}

// unwrapPath drops the *PathError's operation and path, which the
// problem already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
