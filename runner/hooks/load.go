package hooks

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"

	"github.com/aerie-run/aerie/runner/layer"
)

// MaxFileSize bounds a hook file. Larger files are skipped unread, so a
// repository cannot stall discovery with a huge one.
const MaxFileSize = 1 << 20

// MaxFiles caps the hooks/*.yaml files loaded from one layer, in name
// order; the rest are reported as left out. A hooks directory is written
// by hand and holds a handful of files, so 256 is far above any real one,
// while a repository that plants ten thousand cannot make every session
// read and parse them all, nor run ten thousand hooks on every event. The
// directory's entries are read at most layer.MaxDirEntries at a
// time, as a custom tools directory's are.
const MaxFiles = 256

// MaxLayerBytes bounds the bytes of one layer's hooks/*.yaml files
// together. Parsing a megabyte of hooks takes a sizeable fraction of a
// second, so MaxFiles files of MaxFileSize each would stall a session's
// start; real hook files are a few kilobytes. A file that would take the
// layer past the bound, in name order, is skipped unread, with the reason.
const MaxLayerBytes = 2 << 20

// Trust decides whether a project layer's hook file may run. manifest is
// the file's absolute path; executables are the hooks' Executables, the
// path-bearing first command tokens and scripts, in order, each once.
// Trust pins (layer.Pins) implement it.
type Trust interface {
	Trusted(l layer.Layer, manifest string, executables []string) (ok bool, reason string)
}

// Guarder is a Trust that can check a file again before each run of its
// hooks, as layer.Pins does: a hook file or script changed after the
// session loaded it then does not run on the trust its old bytes earned.
// Load uses the Guard for the first check too.
type Guarder interface {
	Guard(l layer.Layer, manifest string, executables []string) *layer.Guard
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
	// Listing, when set, is the load's listing of the layers' top
	// directories (layer.ListLayers): a layer it shows without a hooks.toml and a hooks directory
	// is not opened for it.
	Listing *layer.Listing
}

// File is one hook file Load found.
type File struct {
	Layer  layer.Layer `json:"layer"`
	Path   string      `json:"path"`
	Format Format      `json:"format"`
	// Status is active (its hooks run), shadowed (a farther hooks.toml:
	// the nearest one wins), skipped (Problems say why) or inactive: the
	// file needs a trust pin and has none that matches — a project file,
	// or a $AERIE_HOME file the agent wrote — and Trust says whether no
	// pin covers it or it changed since it was pinned.
	Status layer.Status `json:"status"`
	// Reason says why a file is not active.
	Reason string `json:"reason,omitempty"`
	// Trust is the verdict of the trust check, for a file that needs a
	// pin: trusted, untrusted, or modified when a pin covers the file but
	// it (or an executable it runs) changed since. Empty for a file that
	// needs none, or that was skipped before its trust was checked.
	Trust layer.TrustStatus `json:"trust,omitempty"`
	// Hooks counts the hooks the file declares (when it parsed).
	Hooks int `json:"hooks"`
	// Executables are what a trust pin of the file covers besides the file:
	// its hooks' path-bearing programs and scripts (when it parsed).
	Executables []string `json:"executables,omitempty"`
	// Shadowed lists, for the nearest hooks.toml, the farther ones it
	// shadows.
	Shadowed []layer.Copy `json:"shadowed,omitempty"`
	// ShadowedBy is, for a farther hooks.toml, the path of the nearest.
	ShadowedBy string `json:"shadowed_by,omitempty"`

	// digest is the digest of the bytes Load read, for the report; ""
	// when it read none.
	digest string
	// prov is the provenance Load read for a $AERIE_HOME file; nil when
	// it read none.
	prov *layer.Provenance
}

// Loaded is what Load found in the layers.
type Loaded struct {
	// Hooks are the hooks to run: those of the nearest hooks.toml, then
	// those of every hooks/*.yaml in layer order and file name order.
	Hooks []Hook `json:"hooks"`
	// Files lists every hook file found, with its status.
	Files []File `json:"files"`
	// Problems are the reasons files, or fields in them, were not used.
	Problems []layer.Problem `json:"problems,omitempty"`
}

// Load reads the hooks of layers, nearest first: the nearest hooks.toml
// (a farther one is shadowed even when the nearest is skipped), then every
// hooks/*.yaml of every layer. A malformed file is skipped with its
// problems; in a private layer it is also an error, returned with
// everything Load found. A project layer's file runs only when trust
// accepts it; a nil trust accepts none.
func Load(layers []layer.Layer, trust Trust, opts LoadOptions) (Loaded, error) {
	// Every layer is read on its own, concurrently: its hooks/*.yaml and,
	// whether it will be used or shadowed, its hooks.toml. Which
	// hooks.toml wins needs them all, so the nearest one is parsed and
	// checked afterwards, as the findings are merged in layer order.
	found := make([]*layerLoad, len(layers))
	res := new(regexps)
	sem := make(chan struct{}, loadConcurrency)
	var wg sync.WaitGroup
	for i, l := range layers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ld := &layerLoad{l: l, trust: trust, opts: opts, res: res}
			ld.read()
			found[i] = ld
		})
	}
	wg.Wait()

	var (
		out  Loaded
		errs []error
		// nearest is the index in out.Files of the nearest hooks.toml,
		// -1 until there is one.
		nearest = -1
	)
	for _, ld := range found {
		if ld.missing {
			continue
		}
		if ld.hasTOML {
			if nearest >= 0 {
				ld.shadowed(&out, nearest)
			} else {
				nearest = len(out.Files)
				ld.useTOML(&out)
			}
		}
		out.Hooks = append(out.Hooks, ld.out.Hooks...)
		out.Files = append(out.Files, ld.out.Files...)
		out.Problems = append(out.Problems, ld.out.Problems...)
		errs = append(errs, ld.errs...)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("load hooks: %w", errors.Join(errs...))
	}
	return out, nil
}

// loadConcurrency bounds the layers read at once. Reading is mostly
// system calls, which overlap well even on few cores.
const loadConcurrency = 8

// layerLoad is what one layer holds: its hooks/*.yaml, loaded into out,
// and its hooks.toml, read but parsed only when it is the nearest.
type layerLoad struct {
	l     layer.Layer
	root  *layer.Dir
	trust Trust
	opts  LoadOptions
	out   Loaded
	errs  []error
	// res compiles the matchers of every layer.
	res *regexps
	// missing: the layer's directory does not exist.
	missing bool
	// hasTOML: there is a hooks.toml (it may not be readable: tomlErr).
	hasTOML bool
	toml    read
	tomlErr error
}

func (ld *layerLoad) path(rel string) string { return filepath.Join(ld.l.Dir, rel) }

// hooksDir is the directory of a layer's YAML hook files.
const hooksDir = "hooks"

// read reads the layer: its hooks.toml's bytes and its YAML files' hooks.
func (ld *layerLoad) read() {
	noTOML, noYAML := ld.opts.Listing.Absent(ld.l, "hooks.toml"), ld.opts.Listing.Absent(ld.l, hooksDir)
	if noTOML && noYAML {
		return
	}
	// The listing holds the layer open, as openLayer opens it.
	root, err := ld.opts.Listing.Dir(ld.l), error(nil)
	if root == nil {
		if root, err = openLayer(ld.l, ld.opts.Workspace); err == nil {
			defer root.Close()
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		ld.missing = true
		return
	}
	if err != nil {
		p := layer.Problem{
			Layer: ld.l.Name, File: ld.l.Dir, Reason: fmt.Sprintf("cannot open the layer: %v", unwrapPath(err)),
		}
		ld.out.Problems = append(ld.out.Problems, p)
		if ld.l.Private() {
			ld.errs = append(ld.errs, p)
		}
		return
	}
	ld.root = root
	if !noTOML {
		ld.toml, ld.tomlErr = readBounded(root, "hooks.toml", MaxFileSize)
		ld.hasTOML = !errors.Is(ld.tomlErr, fs.ErrNotExist)
	}
	if !noYAML {
		ld.yamls()
	}
	ld.root = nil
}

// toml loads the layer's hooks.toml, the nearest one, into out.
func (ld *layerLoad) useTOML(out *Loaded) {
	src := Source{
		Layer: ld.l, File: ld.path("hooks.toml"), Dir: ld.l.Dir, Root: ld.l.Dir,
		Confined: ld.l.NeedsTrust(), Home: ld.opts.Home,
	}
	// Its findings come before those of the layer's YAML files.
	yamls, yamlErrs := ld.out, ld.errs
	ld.out, ld.errs = Loaded{}, nil
	if ld.tomlErr != nil {
		ld.skip(src, FormatTOML, read{}, []layer.Problem{{Layer: ld.l.Name, File: src.File, Reason: ld.tomlErr.Error()}})
	} else {
		hooks, probs := ParseTOML(ld.toml.data, src, ld.opts.Dir)
		ld.use(src, FormatTOML, ld.toml, hooks, probs)
	}
	out.Hooks = append(out.Hooks, ld.out.Hooks...)
	out.Files = append(out.Files, ld.out.Files...)
	out.Problems = append(out.Problems, ld.out.Problems...)
	ld.out, ld.errs = yamls, append(ld.errs, yamlErrs...)
}

// shadowed records a farther hooks.toml in out, and lists it among the
// copies the nearest one, out.Files[nearest], shadows: whatever became of
// the nearest, a farther hooks.toml never replaces it.
func (ld *layerLoad) shadowed(out *Loaded, nearest int) {
	w := &out.Files[nearest]
	reason := "shadowed by " + w.Path
	if w.Status != layer.StatusActive {
		state := string(w.Status)
		if w.Trust != "" {
			state = string(w.Trust) // modified says more than untrusted
		}
		reason = fmt.Sprintf("not used: the nearer %s is %s, and a farther hooks.toml never replaces it", w.Path, state)
	}
	f := File{
		Layer: ld.l, Path: ld.path("hooks.toml"), Format: FormatTOML, Status: layer.StatusShadowed,
		ShadowedBy: w.Path, Reason: reason, digest: ld.toml.digest(),
	}
	w.Shadowed = append(w.Shadowed, layer.Copy{Layer: f.Layer.Name, Path: f.Path})
	out.Files = append(out.Files, f)
}

// yamls loads the layer's hooks/*.yaml in file name order.
func (ld *layerLoad) yamls() {
	// The entries come sorted, and with their types, from the directory.
	entries, more, err := ld.root.ReadDir(hooksDir, layer.MaxDirEntries)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	dir := Source{Layer: ld.l, File: ld.path(hooksDir)}
	if err != nil {
		ld.skip(dir, FormatYAML, read{}, []layer.Problem{{
			Layer: ld.l.Name, File: dir.File,
			Reason: fmt.Sprintf("cannot read the hooks directory: %v", unwrapPath(err)),
		}})
		return
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") && !e.IsDir() {
			names = append(names, e.Name()) // scripts and other files are not configuration
		}
	}
	if len(names) > MaxFiles || more {
		ld.skip(dir, FormatYAML, read{}, []layer.Problem{{Layer: ld.l.Name, File: dir.File, Reason: leftOut(names, more)}})
		names = names[:min(len(names), MaxFiles)]
	}
	// The layer's files share their scripts' checks.
	scripts := map[string]scriptCheck{}
	var size int64 // of the files read so far
	for _, name := range names {
		rel := hooksDir + "/" + name
		src := Source{
			Layer: ld.l, File: ld.path(rel), Dir: ld.path(hooksDir), Root: ld.l.Dir,
			Confined: ld.l.NeedsTrust(), Home: ld.opts.Home,
		}
		rd, err := readBounded(ld.root, rel, min(MaxFileSize, MaxLayerBytes-size))
		var large *tooLarge
		if errors.As(err, &large) && large.size <= MaxFileSize {
			err = fmt.Errorf("not read: its %d bytes would take the layer's hook files past the %d bytes "+
				"they may hold together (the files before it in name order hold %d); "+
				"keep hooks in smaller files, or spread them over layers", large.size, MaxLayerBytes, size)
		}
		if err != nil {
			ld.skip(src, FormatYAML, read{}, []layer.Problem{{Layer: ld.l.Name, File: src.File, Reason: err.Error()}})
			continue
		}
		size += int64(len(rd.data))
		hooks, probs := parseYAML(rd.data, src, ld.opts.Dir, ld.root, ld.res, scripts, nil)
		ld.use(src, FormatYAML, rd, hooks, probs)
	}
}

// leftOut says which of a hooks directory's YAML files, names in name
// order, are not loaded, and how to load them all.
func leftOut(names []string, more bool) string {
	var b strings.Builder
	if len(names) > MaxFiles {
		fmt.Fprintf(&b, "only the first %d hook files in name order are loaded; the other %d, from hooks/%s on, are not",
			MaxFiles, len(names)-MaxFiles, names[MaxFiles])
	} else {
		fmt.Fprintf(&b, "only %d hook files are loaded", len(names))
	}
	if more {
		fmt.Fprintf(&b, ", and the directory has more than %d entries, of which only the first %d read were looked at",
			layer.MaxDirEntries, layer.MaxDirEntries)
	}
	b.WriteString("; keep the hooks in fewer files, or spread them over layers")
	return b.String()
}

// use adds a parsed file's hooks, or skips it for its problems or for
// want of trust. rd is the file as read.
func (ld *layerLoad) use(src Source, f Format, rd read, hooks []Hook, probs []layer.Problem) {
	if len(probs) > 0 {
		ld.skip(src, f, rd, probs)
		return
	}
	needs, prov := ld.needsTrust(src.File)
	var trust layer.TrustStatus
	if needs {
		reason := "no trust pins"
		trust = layer.Untrusted
		switch t := ld.trust.(type) {
		case nil:
		case Guarder:
			g := t.Guard(ld.l, src.File, Executables(hooks))
			// The layer's directory is open while its YAML files are read
			// (not for the nearest hooks.toml, checked afterwards): the
			// pin is computed from the bytes just read, and the scripts
			// are read through it.
			v := g.VerifyRead(rd.data, rd.info, ld.root)
			trust, reason = v.Status, v.Reason
			for i := range hooks {
				hooks[i].Source.guard = g
			}
		default:
			// A Trust that is not a Guarder says yes or no; it cannot
			// tell a changed file from one never pinned.
			if ok, r := t.Trusted(ld.l, src.File, Executables(hooks)); ok {
				trust = layer.Trusted
			} else {
				reason = r
			}
		}
		if trust != layer.Trusted {
			// The problem says modified rather than untrusted when a pin
			// covers the file: the fix is to restore it, or to review it
			// and pin it again.
			p := layer.Problem{Layer: ld.l.Name, File: src.File, Reason: string(trust) + ": " + reason}
			ld.out.Problems = append(ld.out.Problems, p)
			ld.out.Files = append(ld.out.Files, File{
				Layer: ld.l, Path: src.File, Format: f, Status: layer.StatusInactive, Reason: reason,
				Trust: trust, Hooks: len(hooks), Executables: Executables(hooks), digest: rd.digest(), prov: prov,
			})
			return
		}
	}
	ld.out.Hooks = append(ld.out.Hooks, hooks...)
	ld.out.Files = append(ld.out.Files, File{
		Layer: ld.l, Path: src.File, Format: f, Status: layer.StatusActive,
		Trust: trust, Hooks: len(hooks), Executables: Executables(hooks), digest: rd.digest(), prov: prov,
	})
}

// needsTrust reports whether the hook file at path runs only with a trust
// pin: every file of the workspace, and a file in $AERIE_HOME that the
// agent wrote through extension_manage (or whose provenance sidecar is
// malformed) — the manager never grants trust. prov is the provenance of
// a $AERIE_HOME file, which the report shows.
func (ld *layerLoad) needsTrust(path string) (needs bool, prov *layer.Provenance) {
	if ld.l.NeedsTrust() {
		return true, nil
	}
	if ld.l.Kind != layer.KindHome {
		return false, nil
	}
	p := layer.ReadProvenance(ld.l, path)
	return p.State != layer.ProvenanceLegacy, &p
}

// skip records a file that cannot be used; rd is what was read of it.
func (ld *layerLoad) skip(src Source, f Format, rd read, probs []layer.Problem) {
	ld.out.Problems = append(ld.out.Problems, probs...)
	reason := layer.Summary(probs)
	ld.out.Files = append(ld.out.Files, File{
		Layer: ld.l, Path: src.File, Format: f, Status: layer.StatusSkipped, Reason: reason, digest: rd.digest(),
	})
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
func openLayer(l layer.Layer, workspace string) (*layer.Dir, error) {
	if l.Kind != layer.KindProject || workspace == "" {
		return layer.OpenDir(l.Dir)
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
	ws, err := layer.OpenDir(workspace)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	return ws.OpenDir(rel)
}

// relLocal returns target's path from base when it is inside base.
func relLocal(base, target string) (string, bool) {
	rel, err := filepath.Rel(base, target)
	return rel, err == nil && filepath.IsLocal(rel)
}

// read is a hook file as read: its bytes, and what a stat of the open
// file said before the read (its identity, for trust checks).
type read struct {
	data []byte
	info fs.FileInfo
}

// digest is the report's digest of the bytes; "" when none were read.
func (r read) digest() string {
	if r.info == nil {
		return ""
	}
	return layer.Digest(r.data)
}

// tooLarge is the error of a file over the size it may have.
type tooLarge struct{ size, max int64 }

func (e *tooLarge) Error() string {
	return fmt.Sprintf("larger than %d bytes (%d); not read", e.max, e.size)
}

// readBounded reads the regular file name in root, refusing one larger
// than max bytes without reading it (a *tooLarge). It does not block on a
// FIFO planted in place of a hook file.
func readBounded(root *layer.Dir, name string, max int64) (read, error) {
	f, err := root.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return read{}, err
		}
		return read{}, fmt.Errorf("cannot open: %v", unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return read{}, fmt.Errorf("cannot stat: %v", unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return read{}, errors.New("not a regular file")
	}
	if fi.Size() > max {
		return read{}, &tooLarge{size: fi.Size(), max: max}
	}
	// The size the file had when checked: one that grows meanwhile is read
	// as it was.
	data := make([]byte, fi.Size())
	n, err := io.ReadFull(f, data)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return read{}, fmt.Errorf("cannot read: %v", unwrapPath(err))
	}
	return read{data: data[:n], info: fi}, nil
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
