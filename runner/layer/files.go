package layer

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Read limits. Discovery reads files that anyone with write access to the
// workspace controls, so every read is bounded: a huge file, a FIFO or a
// directory of a hundred thousand entries costs a skipped artifact and a
// reason, never a stalled or exhausted runner.
const (
	// MaxArtifactBytes caps a manifest, a prompt file, toolsets.toml and
	// tool-descriptions.toml: the spec's 256 KiB artifact maximum.
	MaxArtifactBytes = 256 << 10
	// MaxTrustBytes caps trust.toml, which grows with every pin.
	MaxTrustBytes = 1 << 20
	// MaxProvenanceBytes caps a provenance sidecar.
	MaxProvenanceBytes = 64 << 10
	// MaxExecutableBytes caps an executable hashed for a trust pin.
	MaxExecutableBytes = 64 << 20
	// MaxDirEntries caps the entries read from one directory of a layer
	// (tools/, hooks/, mcp_servers/, a skills directory) at a time.
	MaxDirEntries = 1 << 16
)

// Sentinel errors of bounded reads.
var (
	// ErrTooLarge means a file is over its read limit.
	ErrTooLarge = errors.New("file is too large")
	// ErrNotRegular means a path names a directory, device, FIFO or
	// socket rather than a regular file.
	ErrNotRegular = errors.New("not a regular file")
)

// Files reads one layer's directory: through a Dir, so that a symbolic
// link cannot lead a read outside it, or from the binary's embedded
// artifacts. Names are slash-separated and relative to the layer.
type Files struct{ f files }

// ReadFile returns the file name, refusing anything but a regular file
// (ErrNotRegular) and a file over max bytes (ErrTooLarge).
func (f Files) ReadFile(name string, max int64) ([]byte, error) { return f.f.readFile(name, max) }

// Lstat describes name without following a final symbolic link.
func (f Files) Lstat(name string) (fs.FileInfo, error) { return f.f.lstat(name) }

// ReadDir returns the sorted names in the directory name, at most
// MaxDirEntries of them; more reports that some were left out.
func (f Files) ReadDir(name string) (names []string, more bool, err error) { return f.f.readDir(name) }

// Path returns name as a path for people: absolute on disk,
// "bundled:<name>" for an embedded file.
func (f Files) Path(name string) string { return f.f.pathOf(name) }

// OpenBase opens, without following it out of the base, a file by its
// path from the base of the layer's trust pins: the workspace root for a
// project layer, the layer's directory for the others.
func (f Files) OpenBase(rel string) (*File, error) { return f.f.openBase(rel) }

// There reports whether the layer holds anything at name (a file, a
// directory, a link, dangling or not): from the load's listing when it
// has one, otherwise from an lstat.
func (f Files) There(name string) bool { return there(f.f, name) }

// Digest returns the digest of the file name, for an artifact that is
// reported but not used; "" when it cannot be read.
func (f Files) Digest(name string) string { return fileDigest(f.f, name) }

// Provenance returns the provenance of the artifact file name, reading
// its sidecar; data, when not nil, are the artifact's bytes, compared
// with the digest the sidecar records.
func (f Files) Provenance(name string, data []byte) Provenance {
	return readProvenance(f.f, name, data)
}

// files is what Files reads through.
type files interface {
	// readFile returns the file name (slash-separated, relative to the
	// layer), refusing non-regular files and files over max bytes.
	readFile(name string, max int64) ([]byte, error)
	// lstat reports whether name is there at all, without following a
	// final symbolic link.
	lstat(name string) (fs.FileInfo, error)
	// readDir returns the sorted names in the directory name, at most
	// MaxDirEntries of them; more reports that some were left out.
	readDir(name string) (names []string, more bool, err error)
	// pathOf returns the name as a path for people: absolute on disk,
	// "bundled:<name>" for embedded files.
	pathOf(name string) string
	// openBase opens, without following it out of the base, a file by its
	// path from the base of the layer's trust pins: the workspace root
	// for a project layer, the layer's directory for the others.
	openBase(rel string) (*File, error)
}

// rootFiles is a layer on disk read through a Dir: the workspace's for
// project layers (prefix is the layer's directory inside it), the layer's
// own for the others.
//
// A project layer also has sub, a Dir opened at the layer itself. Every
// read tries it first, since a path from the layer is shorter; only when
// sub refuses a path as escaping it (a symbolic link to elsewhere in the
// workspace) is the read repeated through the workspace, which decides.
type rootFiles struct {
	root   *Dir
	sub    *Dir   // nil: read through root only
	dir    string // absolute directory of the layer
	prefix string // the layer's directory relative to root, "." for itself
	// top is the load's listing of the layer's directory; nil when there
	// is none. A name at the top that it does not hold is not opened.
	top map[string]struct{}
}

// unlisted reports whether the listing of the layer shows that there is
// nothing at name, and the error an open of it would give.
func (r rootFiles) unlisted(name string) (bool, error) {
	if r.top == nil || strings.Contains(name, "/") {
		return false, nil
	}
	if _, ok := r.top[name]; ok {
		return false, nil
	}
	return true, &fs.PathError{Op: opOpenat, Path: name, Err: syscall.ENOENT}
}

// there reports whether the layer holds anything at name (a file, a
// directory, a link, dangling or not): from the load's listing when it
// has one, otherwise from an lstat.
func there(f files, name string) bool {
	if r, ok := f.(rootFiles); ok && r.top != nil && !strings.Contains(name, "/") {
		_, ok := r.top[name]
		return ok
	}
	_, err := f.lstat(name)
	return !Absent(err)
}

func (r rootFiles) rel(name string) string {
	return filepath.Join(r.prefix, filepath.FromSlash(name))
}

// open opens name (slash-separated, in the layer) for reading without
// blocking on a FIFO.
func (r rootFiles) open(name string) (*File, error) {
	if no, err := r.unlisted(name); no {
		return nil, err
	}
	if r.sub != nil {
		f, err := r.sub.Open(name)
		if !errors.Is(err, ErrEscapes) {
			return f, err
		}
	}
	return r.root.Open(r.rel(name))
}

func (r rootFiles) readFile(name string, max int64) ([]byte, error) {
	f, err := r.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadBounded(max)
}

func (r rootFiles) openBase(rel string) (*File, error) {
	if r.sub != nil {
		if inner, ok := relInside(r.prefix, rel); ok {
			f, err := r.sub.Open(filepath.ToSlash(inner))
			if !errors.Is(err, ErrEscapes) {
				return f, err
			}
		}
	}
	return r.root.Open(filepath.ToSlash(rel))
}

func (r rootFiles) lstat(name string) (fs.FileInfo, error) {
	if r.sub != nil {
		fi, err := r.sub.Lstat(name)
		if !errors.Is(err, ErrEscapes) {
			return fi, err
		}
	}
	return r.root.Lstat(filepath.ToSlash(r.rel(name)))
}

func (r rootFiles) readDir(name string) ([]string, bool, error) {
	des, more, err := r.readEntries(name)
	if err != nil {
		return nil, false, err
	}
	names := make([]string, len(des))
	for i, de := range des {
		names[i] = de.Name()
	}
	return names, more, nil
}

func (r rootFiles) readEntries(name string) ([]fs.DirEntry, bool, error) {
	if no, err := r.unlisted(name); no {
		return nil, false, err
	}
	if r.sub != nil {
		des, more, err := r.sub.ReadDir(name, MaxDirEntries)
		if !errors.Is(err, ErrEscapes) {
			return des, more, err
		}
	}
	return r.root.ReadDir(filepath.ToSlash(r.rel(name)), MaxDirEntries)
}

// close releases the directories.
func (r rootFiles) close() {
	if r.sub != nil {
		r.sub.Close()
	}
	r.root.Close()
}

func (r rootFiles) pathOf(name string) string {
	return filepath.Join(r.dir, filepath.FromSlash(name))
}

// fsFiles is a layer held in an fs.FS: the artifacts embedded in the
// binary.
type fsFiles struct {
	fsys   fs.FS
	prefix string // shown before names: "bundled:"
}

func (e fsFiles) readFile(name string, max int64) ([]byte, error) {
	fi, err := fs.Stat(e.fsys, name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %d bytes, over the %s limit", ErrTooLarge, fi.Size(), ByteSize(max))
	}
	return fs.ReadFile(e.fsys, name)
}

func (e fsFiles) lstat(name string) (fs.FileInfo, error) { return fs.Stat(e.fsys, name) }

func (e fsFiles) readDir(name string) ([]string, bool, error) {
	des, err := fs.ReadDir(e.fsys, name)
	if err != nil {
		return nil, false, err
	}
	names := make([]string, 0, len(des))
	for _, de := range des {
		names = append(names, de.Name())
	}
	more := len(names) > MaxDirEntries
	if more {
		names = names[:MaxDirEntries]
	}
	return names, more, nil
}

func (e fsFiles) pathOf(name string) string { return e.prefix + path.Clean(name) }

func (e fsFiles) openBase(string) (*File, error) {
	return nil, errors.New("the bundled layer is not on disk")
}

// Absent reports whether err means there is nothing at the path: not
// found, or a path component that is a file rather than a directory.
func Absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// ByteSize writes n bytes the way the spec does (256 KiB), for messages.
func ByteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// within returns workspace made absolute and target relative to it, or an
// error when target is outside workspace. Symbolic links are resolved only
// when the lexical paths disagree, so /tmp vs /private/tmp style aliases
// work.
func within(workspace, target string) (string, string, error) {
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return "", "", fmt.Errorf("resolve workspace %s: %w", workspace, err)
	}
	t, err := filepath.Abs(target)
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %w", target, err)
	}
	if rel, ok := relInside(ws, t); ok {
		return ws, rel, nil
	}
	rws, err1 := filepath.EvalSymlinks(ws)
	rt, err2 := filepath.EvalSymlinks(t)
	if err1 == nil && err2 == nil {
		if rel, ok := relInside(rws, rt); ok {
			return rws, rel, nil
		}
	}
	return "", "", fmt.Errorf("%s is outside the workspace %s", t, ws)
}

// relInside returns target relative to base when it is base or below it.
func relInside(base, target string) (string, bool) {
	rel, err := filepath.Rel(base, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}
