package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

	// GlobalFile is the global file's path, whether or not it exists.
	GlobalFile string

	// ProjectFile is the project file that was applied, "" when none.
	ProjectFile string

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

	if opts.WorkDir == "" {
		return out, nil
	}
	file, doc, warnings, err := findProject(opts.Workspace, opts.WorkDir)
	out.Warnings = append(out.Warnings, warnings...)
	if err != nil || file == "" {
		return out, err
	}
	l, err := parse(file, doc)
	if err != nil {
		return Loaded{}, err
	}
	if l.DatabaseURL != nil {
		line, col := locate(doc, []string{keyDatabaseURL})
		return Loaded{}, &FileError{
			Path: file, Line: line, Column: col, Key: keyDatabaseURL,
			Err: ErrDatabaseURLInProject,
			Fix: "move it to the global config " + out.GlobalFile + " (or run aerie setup)",
		}
	}
	c := l.apply(out.Config)
	if err := c.Validate(); err != nil {
		return Loaded{}, placeKeyError(file, doc, err)
	}
	out.Config, out.ProjectFile = c, file
	return out, nil
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
	l, err := parse(file, doc)
	if err == nil {
		c := l.apply(base)
		if err = c.Validate(); err == nil {
			return c, nil
		}
		err = placeKeyError(file, doc, err)
	}
	if fe, ok := errors.AsType[*FileError](err); ok {
		fe.Fix = fix
	}
	return base, err
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
			p := filepath.Join(dir, name, "config.toml")
			doc, err := root.ReadFile(p)
			if absent(err) {
				continue
			}
			abs := filepath.Join(workspace, p)
			if err != nil {
				return "", nil, warnings, &FileError{Path: abs, Err: err, Fix: "fix or remove it"}
			}
			for _, shadowed := range projectDirs[i+1:] {
				sp := filepath.Join(dir, shadowed, "config.toml")
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
