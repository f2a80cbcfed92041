package userlayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/layer"
)

// maxListed bounds the entries list reads from one directory (tools/,
// skills/), as discovery bounds its manifests.
const maxListed = extensions.MaxManifests

// list reports the user layer's artifacts of kind (every kind when empty):
// metadata only, never their bodies.
func (m *Manager) list(ctx context.Context, kind Kind) (Result, error) {
	res := Result{Operation: OpList, Kind: kind, Artifacts: []Entry{}}
	root, err := os.OpenRoot(m.home.Dir)
	if err != nil {
		return Result{}, storage(fmt.Errorf("open the user layer: %w", err))
	}
	defer root.Close()
	kinds := Kinds
	if kind != "" {
		kinds = []Kind{kind}
	}
	var notes []string
	for _, k := range kinds {
		if err := ctx.Err(); err != nil {
			return Result{}, storage(fmt.Errorf("list: %w", context.Cause(ctx)))
		}
		switch k {
		case KindTool:
			names, more, err := listDir(root, extensions.ToolsDir)
			if err != nil {
				return Result{}, err
			}
			for _, n := range names {
				if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".toml") {
					continue
				}
				if e, ok := m.entry(root, k, strings.TrimSuffix(n, ".toml"), extensions.ToolsDir+"/"+n, ""); ok {
					res.Artifacts = append(res.Artifacts, e)
				}
			}
			if more {
				notes = append(notes, fmt.Sprintf("only the first %d entries of tools/ are listed", maxListed))
			}
		case KindSkill:
			names, more, err := listDir(root, "skills")
			if err != nil {
				return Result{}, err
			}
			for _, n := range names {
				if strings.HasPrefix(n, ".") {
					continue
				}
				if fi, err := root.Lstat("skills/" + n); err != nil || !fi.IsDir() {
					continue
				}
				dir := filepath.Join(m.home.Dir, "skills", n)
				if e, ok := m.entry(root, k, n, Path(k, n), dir); ok {
					res.Artifacts = append(res.Artifacts, e)
				}
			}
			if more {
				notes = append(notes, fmt.Sprintf("only the first %d entries of skills/ are listed", maxListed))
			}
		default:
			if e, ok := m.entry(root, k, fileOf(k), fileOf(k), ""); ok {
				res.Artifacts = append(res.Artifacts, e)
			}
		}
	}
	res.Note = strings.Join(notes, "; ")
	return res, nil
}

// listDir returns the sorted names in the directory dir of the layer, at
// most maxListed; a missing directory is empty, and a symbolic link is not
// followed.
func listDir(root *os.Root, dir string) ([]string, bool, error) {
	fi, err := root.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, storage(fmt.Errorf("inspect %s: %w", dir, err))
	}
	if !fi.IsDir() {
		return nil, false, nil // not the manager's: a link or a file
	}
	f, err := root.Open(dir)
	if err != nil {
		return nil, false, storage(fmt.Errorf("open %s: %w", dir, err))
	}
	defer f.Close() //nolint:errcheck // read-only
	names, err := f.Readdirnames(maxListed + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, storage(fmt.Errorf("read %s: %w", dir, err))
	}
	slices.Sort(names)
	if len(names) > maxListed {
		return names[:maxListed], true, nil
	}
	return names, false, nil
}

// entry describes the artifact at rel, if there is one. key is where the
// report finds it (a skill's directory), rel's absolute path when empty.
func (m *Manager) entry(root *os.Root, kind Kind, name, rel, key string) (Entry, bool) {
	abs := filepath.Join(m.home.Dir, filepath.FromSlash(rel))
	if key == "" {
		key = abs
	}
	e := Entry{Kind: kind, Name: name, Path: abs}
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Entry{}, false
	case err != nil:
		e.State, e.Reason = layer.StatusInactive, "cannot inspect it: "+sanitize(err.Error())
		return e, true
	case !fi.Mode().IsRegular():
		e.State = layer.StatusInactive
		e.Reason = "not a regular file (a symbolic link, a directory…): the manager does not handle it"
		return e, true
	}
	d, size, err := digestFile(root, rel)
	if err != nil {
		e.State, e.Reason = layer.StatusInactive, "cannot read it: "+sanitize(err.Error())
		return e, true
	}
	e.Digest, e.Size = d, size
	e.Provenance = layer.ReadProvenance(m.home, abs)
	e.Provenance.Sidecar = ""
	m.state(&e, key)
	return e, true
}
