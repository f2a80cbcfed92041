package executor

import (
	"context"
	"errors"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/aerie-run/aerie/runner/atomicfile"
)

// The file operations go through an os.Root: every path is resolved by
// the kernel one component at a time relative to the workspace directory
// (openat), and a ".." or a symbolic link that leads out of it fails. A
// lexical check of the name first gives absolute paths and ".." a clear
// error without a system call.

// maxLinks bounds the symbolic links WriteFile follows, as os.Root does.
const maxLinks = 8

// rel turns a name given to a file operation into a clean path relative
// to the workspace root.
func (l *Local) rel(op, name string) (string, error) {
	if name == "" {
		return ".", nil
	}
	if filepath.IsAbs(name) {
		for _, base := range []string{l.dir, l.real} {
			if r, err := filepath.Rel(base, name); err == nil && (r == "." || filepath.IsLocal(r)) {
				return r, nil
			}
		}
		return "", &fs.PathError{Op: op, Path: name, Err: ErrOutsideWorkspace}
	}
	clean := filepath.Clean(name)
	if clean != "." && !filepath.IsLocal(clean) {
		return "", &fs.PathError{Op: op, Path: name, Err: ErrOutsideWorkspace}
	}
	return clean, nil
}

// pathErr restates an error of os.Root as op on name, and an escape as
// ErrOutsideWorkspace.
func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	if isEscape(err) {
		err = ErrOutsideWorkspace
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// isEscape reports whether err is os.Root's refusal of a path that
// escapes it. The os package does not export that error (as of Go 1.26),
// so its text is the only way to recognise it.
func isEscape(err error) bool {
	return err != nil && err.Error() == "path escapes from parent"
}

// ReadFile implements Files.
func (l *Local) ReadFile(ctx context.Context, name string) ([]byte, error) {
	rel, err := l.rel("read", name)
	if err != nil {
		return nil, err
	}
	data, err := l.root.ReadFile(rel)
	return data, pathErr("read", name, err)
}

// Stat implements Files.
func (l *Local) Stat(ctx context.Context, name string) (FileInfo, error) {
	rel, err := l.rel("stat", name)
	if err != nil {
		return FileInfo{}, err
	}
	fi, err := l.root.Stat(rel)
	if err != nil {
		return FileInfo{}, pathErr("stat", name, err)
	}
	return fileInfo(rel, fi), nil
}

func fileInfo(rel string, fi fs.FileInfo) FileInfo {
	return FileInfo{Name: filepath.ToSlash(rel), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// ReadDir implements Files.
func (l *Local) ReadDir(ctx context.Context, name string) ([]FileInfo, error) {
	rel, err := l.rel("readdir", name)
	if err != nil {
		return nil, err
	}
	d, err := l.root.Open(rel)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	defer d.Close() //nolint:errcheck // read-only
	des, err := d.ReadDir(-1)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	infos := make([]FileInfo, 0, len(des))
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			continue // removed since the directory was read
		}
		infos = append(infos, fileInfo(filepath.Join(rel, de.Name()), fi))
	}
	slices.SortFunc(infos, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return infos, nil
}

// Walk implements Files. An entry that cannot be read is yielded with its
// error and the walk goes on past it; ctx ending stops the walk with
// ctx's error.
func (l *Local) Walk(ctx context.Context, name string, opts WalkOptions) iter.Seq2[FileInfo, error] {
	return func(yield func(FileInfo, error) bool) {
		rel, err := l.rel("walk", name)
		if err != nil {
			yield(FileInfo{}, err)
			return
		}
		start := filepath.ToSlash(rel)
		_ = fs.WalkDir(l.root.FS(), start, func(path string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				yield(FileInfo{Name: path}, cerr)
				return fs.SkipAll
			}
			if err != nil {
				if !yield(FileInfo{Name: path}, pathErr("walk", path, err)) {
					return fs.SkipAll
				}
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil // removed since its directory was read
			}
			if !yield(fileInfo(path, fi), nil) {
				return fs.SkipAll
			}
			if d.IsDir() && path != start && slices.Contains(opts.SkipDirs, d.Name()) {
				return fs.SkipDir
			}
			return nil
		})
	}
}

// Remove implements Files. os.Root removes the last element of the path
// with unlinkat, so a symbolic link there is removed rather than followed,
// while links in the middle are followed only if they stay inside.
func (l *Local) Remove(ctx context.Context, name string) error {
	rel, err := l.rel("remove", name)
	if err != nil {
		return err
	}
	if rel == "." {
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("cannot remove the workspace root")}
	}
	return pathErr("remove", name, l.root.Remove(rel))
}

// WriteFile implements Files.
func (l *Local) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	rel, err := l.rel("write", name)
	if err != nil {
		return err
	}
	if rel == "." {
		return &fs.PathError{Op: "write", Path: name, Err: syscall.EISDIR}
	}
	target, err := l.resolve(rel)
	if err != nil {
		return pathErr("write", name, err)
	}
	dir := filepath.Dir(target)
	if err := l.root.MkdirAll(dir, 0o755); err != nil {
		return pathErr("write", name, err)
	}
	mode := perm.Perm()
	if mode == 0 {
		mode = 0o644
	}
	switch fi, err := l.root.Stat(target); {
	case err == nil && !fi.Mode().IsRegular():
		return &fs.PathError{Op: "write", Path: name, Err: errors.New("not a regular file")}
	case err == nil:
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return pathErr("write", name, err)
	}
	if err := atomicfile.WriteIn(l.root, target, data, mode); err != nil {
		return pathErr("write", name, err)
	}
	return nil
}

// resolve follows symbolic links at the end of rel (os.Root follows those
// in the middle), so that writing a link replaces its target's contents
// rather than the link. A link that leads out of the workspace, including
// any absolute one, is refused, as os.Root refuses it for reading.
func (l *Local) resolve(rel string) (string, error) {
	for range maxLinks {
		fi, err := l.root.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return rel, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return rel, nil
		}
		link, err := l.root.Readlink(rel)
		if err != nil {
			return "", err
		}
		next := filepath.Join(filepath.Dir(rel), link)
		if filepath.IsAbs(link) || !filepath.IsLocal(next) {
			return "", ErrOutsideWorkspace
		}
		rel = next
	}
	return "", syscall.ELOOP
}
