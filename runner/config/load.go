package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/aerie-run/aerie/runner/layer"
)

// Options says where Load looks.
type Options struct {
	// Home is the state directory, usually Home(OSEnv()). The global file
	// is Home/config.toml.
	Home string

	// WorkDir is where the upward project search starts. Empty skips the
	// project file (as setup does, which edits only the global file).
	WorkDir string

	// Workspace is the boundary the search never goes above; it must
	// contain WorkDir. Empty means WorkDir itself, so that without an
	// explicit boundary a stray .aerie in a parent directory (a home
	// directory, /tmp) is never picked up.
	Workspace string
}

// Loaded is the outcome of Load.
type Loaded struct {
	// Config is the defaults with the global, then the project file applied.
	Config Config

	// GlobalFile is the global file's path, whether or not it exists; ""
	// from LoadLayers, which reads none.
	GlobalFile string

	// ProjectFile is the project file that was applied, "" when none.
	ProjectFile string

	// LayerFiles are the mounted layers' files LoadLayers applied, nearest
	// first.
	LayerFiles []string

	// Warnings are problems that did not stop loading, for the caller to
	// log: a malformed or unreadable global file (whose values are all
	// dropped, as the spec says), a .osprey file shadowed by .aerie.
	Warnings []error
}

// Load reads the global file and the nearest project file and merges them
// over the defaults. An error means launch must stop: the project file is
// malformed, sets database_url, or cannot be read, or the working directory
// is outside the workspace. Problems with the global file are warnings.
func Load(opts Options) (Loaded, error) {
	out := Loaded{Config: Defaults(opts.Home), GlobalFile: GlobalFile(opts.Home)}

	if c, err := applyGlobal(out.GlobalFile, out.Config); err != nil {
		out.Warnings = append(out.Warnings, err)
	} else {
		out.Config = c
	}
	fix := "move it to the global config " + out.GlobalFile + " (or run aerie setup)"
	if err := out.applyProject(opts.Workspace, opts.WorkDir, fix, false); err != nil {
		return Loaded{}, err
	}
	return out, nil
}

// LayerOptions say where LoadLayers looks.
type LayerOptions struct {
	// Layers are the session's extension layers, nearest first. The
	// config.toml of each spec, namespace and platform layer is applied;
	// the project layers' files are found by the project search instead,
	// which picks the nearest one as Load does.
	Layers []layer.Layer

	// WorkDir and Workspace are the project search's, as in Options;
	// WorkDir empty skips it (a workspace the runner cannot read).
	WorkDir, Workspace string
}

// LoadLayers is Load for a runner pod, where the configuration comes with
// the extension layers: the spec's defaults, then the config.toml of every
// mounted layer from the farthest (platform) to the nearest (the spec's),
// then the nearest project file, each overriding the keys it sets. There is
// no global file, and no file may set database_url. Every problem stops
// launch, as a *FileError naming the file, its layer and the key: these
// files are the submitter's or the cluster's, and a cap someone set that
// silently did not apply would be worse than a session that does not start.
//
// The project file is the workspace's, not the submitter's: it overrides
// their layers as the spec lets a project override the global file, except
// that its plugins.disabled adds to their list rather than replacing it.
func LoadLayers(opts LayerOptions) (Loaded, error) {
	out := Loaded{Config: Defaults("")}
	out.Config.DatabaseURL = "" // a pod's store is the one its environment names
	const fix = "a runner's session store is the controller's --database-secret; remove it"
	for i := len(opts.Layers) - 1; i >= 0; i-- {
		l := opts.Layers[i]
		if l.Kind == layer.KindProject {
			continue
		}
		file, doc, err := readLayerFile(l)
		if err != nil || file == "" {
			if err != nil {
				return Loaded{}, err
			}
			continue
		}
		if out.Config, err = applyFile(out.Config, source{layer: layerName(l), path: file, doc: doc}, fix); err != nil {
			return Loaded{}, err
		}
		out.LayerFiles = append([]string{file}, out.LayerFiles...)
	}
	if err := out.applyProject(opts.Workspace, opts.WorkDir, fix, true); err != nil {
		return Loaded{}, err
	}
	return out, nil
}

// applyProject applies the nearest project file between workDir and
// workspace, if there is one. fix is what a database_url there is told to
// do. keepDisabled makes the file's plugins.disabled add to the list so
// far instead of replacing it.
func (out *Loaded) applyProject(workspace, workDir, fix string, keepDisabled bool) error {
	if workDir == "" {
		return nil
	}
	file, doc, warnings, err := findProject(workspace, workDir)
	out.Warnings = append(out.Warnings, warnings...)
	if err != nil || file == "" {
		return err
	}
	before := out.Config.Plugins.Disabled
	c, err := applyFile(out.Config, source{path: file, doc: doc, errDatabaseURL: ErrDatabaseURLInProject}, fix)
	if err != nil {
		return err
	}
	if keepDisabled {
		c.Plugins.Disabled = union(before, c.Plugins.Disabled)
	}
	out.Config, out.ProjectFile = c, file
	return nil
}

// union is a's names, then those of b that a lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// source is one configuration file to apply.
type source struct {
	// layer names the extension layer that holds the file, for errors.
	layer string
	path  string
	doc   []byte
	// global lets the file set database_url; otherwise setting it is
	// errDatabaseURL (ErrDatabaseURLInLayer when nil).
	global         bool
	errDatabaseURL error
}

// applyFile returns c with the file applied, checked as a whole: the one
// merge of every configuration file. Its error is a *FileError naming the
// file, its layer and the key at fault; fix is what a database_url the file
// may not set is told to do.
func applyFile(c Config, s source, fix string) (Config, error) {
	l, err := parse(s.path, s.doc)
	if err == nil && l.DatabaseURL != nil && !s.global {
		line, col := locate(s.doc, []string{keyDatabaseURL})
		err = &FileError{
			Path: s.path, Line: line, Column: col, Key: keyDatabaseURL,
			Err: cmp.Or(s.errDatabaseURL, ErrDatabaseURLInLayer), Fix: fix,
		}
	}
	if err == nil {
		n := l.apply(c)
		if err = n.Validate(); err == nil {
			return n, nil
		}
		err = placeKeyError(s.path, s.doc, err)
	}
	if fe, ok := errors.AsType[*FileError](err); ok {
		fe.Layer = s.layer
	}
	return c, err
}

// applyGlobal returns base with the global file applied. A missing file is
// not an error; any other problem is returned as a *FileError and base is to
// be used unchanged.
func applyGlobal(file string, base Config) (Config, error) {
	doc, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return base, nil
	}
	const fix = "using the defaults until it is fixed"
	if err != nil {
		return base, &FileError{Path: file, Err: err, Fix: fix}
	}
	c, err := applyFile(base, source{path: file, doc: doc, global: true}, "")
	if fe, ok := errors.AsType[*FileError](err); ok {
		fe.Fix = fix
	}
	return c, err
}

// maxFileBytes bounds a configuration file read from a layer, as every
// artifact of a layer is bounded.
const maxFileBytes = layer.MaxArtifactBytes

// readLayerFile reads the config.toml of a mounted layer, through the
// layer's directory so that a link in it cannot lead out of it; file is ""
// when the layer has none.
func readLayerFile(l layer.Layer) (file string, doc []byte, err error) {
	file = filepath.Join(l.Dir, FileName)
	d, err := layer.OpenDir(l.Dir)
	if err != nil {
		if absent(err) {
			return "", nil, nil
		}
		return "", nil, &FileError{
			Layer: layerName(l), Path: file, Err: err, Fix: "fix the layer or remove it from the session",
		}
	}
	defer d.Close() //nolint:errcheck // read-only
	doc, err = d.ReadFile(FileName, maxFileBytes)
	switch {
	case absent(err):
		return "", nil, nil
	case err != nil:
		return "", nil, &FileError{Layer: layerName(l), Path: file, Err: layer.ExplainEscape(err), Fix: "fix or remove it"}
	}
	return file, doc, nil
}

// layerName names a mounted layer for an error: its kind, name and what
// holds it.
func layerName(l layer.Layer) string {
	s := fmt.Sprintf("%s layer %s", l.Kind, l.Name)
	if l.Source != "" {
		s += " (" + l.Source + ")"
	}
	return s
}

// findProject returns the nearest project config file between workDir and
// workspace, with its contents; file is "" when there is none.
//
// Files are read through an os.Root at the workspace so that a symlink in the
// repository cannot make aerie read a file outside it (its own secrets, say)
// as configuration.
func findProject(workspace, workDir string) (file string, doc []byte, warnings []error, err error) {
	if workspace == "" {
		workspace = workDir
	}
	workspace, rel, err := within(workspace, workDir)
	if err != nil {
		return "", nil, nil, err
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return "", nil, nil, fmt.Errorf("open workspace for project config: %w", err)
	}
	defer root.Close()

	// At one level .aerie wins over .osprey (layer.ProjectDirs); a
	// shadowed .osprey file is reported as a warning so the choice is
	// never silent.
	projectDirs := layer.ProjectDirs()
	for dir := rel; ; dir = filepath.Dir(dir) {
		for i, name := range projectDirs {
			p := filepath.Join(dir, name, FileName)
			doc, err := root.ReadFile(p)
			if absent(err) {
				continue
			}
			abs := filepath.Join(workspace, p)
			if err != nil {
				return "", nil, warnings, &FileError{Path: abs, Err: err, Fix: "fix or remove it"}
			}
			for _, shadowed := range projectDirs[i+1:] {
				sp := filepath.Join(dir, shadowed, FileName)
				if _, err := root.Stat(sp); err == nil {
					warnings = append(warnings, &FileError{
						Path: filepath.Join(workspace, sp),
						Err:  fmt.Errorf("ignored: %s at the same level takes precedence", abs),
						Fix:  "merge it into " + abs + " and remove it",
					})
				}
			}
			return abs, doc, warnings, nil
		}
		if dir == "." {
			return "", nil, warnings, nil
		}
	}
}

// absent reports whether a read failed because there is no file there: not
// found, or a path component that is a file rather than a directory.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// within returns workspace made absolute and workDir relative to it, or an
// error when workDir is outside workspace. Symlinks are resolved only when
// the lexical paths disagree, so /tmp vs /private/tmp style aliases work.
func within(workspace, workDir string) (string, string, error) {
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return "", "", fmt.Errorf("resolve workspace %s: %w", workspace, err)
	}
	wd, err := filepath.Abs(workDir)
	if err != nil {
		return "", "", fmt.Errorf("resolve working directory %s: %w", workDir, err)
	}
	if rel, ok := relInside(ws, wd); ok {
		return ws, rel, nil
	}
	rws, err1 := filepath.EvalSymlinks(ws)
	rwd, err2 := filepath.EvalSymlinks(wd)
	if err1 == nil && err2 == nil {
		if rel, ok := relInside(rws, rwd); ok {
			return rws, rel, nil
		}
	}
	return "", "", fmt.Errorf(
		"working directory %s is outside the workspace %s; run inside the workspace or widen it", wd, ws)
}

func relInside(base, target string) (string, bool) {
	rel, err := filepath.Rel(base, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}
