package layer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The operations a Dir's errors name: the system calls it makes, and the
// reading of a directory's entries.
const (
	opOpenat     = "openat"
	opLstatat    = "lstatat"
	opReaddirent = "readdirent"
)

// Dir is a directory opened for reading what is below it and never what
// is outside: a path that leads out of it, through ".." or a symbolic
// link, fails as it does in an os.Root, with an error wrapping ErrEscapes. Discovery reads every layer, and
// the workspace files around it, through one.
//
// It exists for speed. os.Root resolves a path one component at a time,
// with an open and a close for each directory on the way, and an
// *os.File registers with the runtime's poller; reading a small file
// through them costs about ten system calls, and a session's discovery
// reads a thousand files. Where the kernel has openat2 (Linux 5.6 and
// later) a Dir resolves each path in a single call (RESOLVE_BENEATH) and
// reads through a bare descriptor: open, fstat, read, close. Whatever
// openat2 refuses — a path leading out, too many links — is decided again
// by an os.Root on the same directory, so the answer and its error are
// those of os.Root; without openat2 (an old kernel, a seccomp filter) a
// Dir is an os.Root.
//
// A Dir is safe for concurrent use. Names are slash-separated and
// relative.
type Dir struct {
	path string
	// top is the path of the directory the Dir was opened beneath (by
	// OpenDir on it and its descendants), path itself for one opened by
	// the package's OpenDir.
	top string
	// fd is an O_PATH descriptor of the directory; -1 when the Dir is an
	// os.Root only.
	fd int
	// root decides what openat2 refuses, and everything without it;
	// opened on first use when fd is set.
	root     *os.Root
	rootOnce sync.Once
	rootErr  error
}

// ErrEscapes means a path leads out of the Dir it was resolved in,
// through ".." or a symbolic link. Every error of a Dir for such a path
// wraps it, whether openat2 or an os.Root refused the path.
var ErrEscapes = errors.New("path escapes from parent")

// osEscapes is os.Root's error for a path that leads out of it, which the
// os package does not export (as of Go 1.26): learned once, from a root
// asked for "..". nil if that fails, and then os.Root's refusals stay
// as they are.
var osEscapes = sync.OnceValue(func() error {
	r, err := os.OpenRoot("/")
	if err != nil {
		return nil
	}
	defer r.Close()
	_, err = r.Lstat("..")
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return nil
})

// fromRoot returns an error of d's os.Root with its refusal of a path that
// leads out as ErrEscapes.
func fromRoot(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok && pe.Err != nil && pe.Err == osEscapes() {
		return &fs.PathError{Op: pe.Op, Path: pe.Path, Err: ErrEscapes}
	}
	return err
}

// openat2OK reports whether the kernel resolves paths beneath a
// directory (openat2 with RESOLVE_BENEATH), probed once on dirfd.
var (
	openat2Once sync.Once
	openat2OK   bool
)

func probeOpenat2(dirfd int) bool {
	openat2Once.Do(func() {
		fd, err := unix.Openat2(dirfd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH})
		if err == nil {
			unix.Close(fd)
			openat2OK = true
		}
	})
	return openat2OK
}

// OpenDir opens the directory at dirPath (absolute, or relative to the
// working directory). dirPath itself may be a symbolic link: it is the
// caller's to trust; what is below it is not.
func OpenDir(dirPath string) (*Dir, error) {
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Open(dirPath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dirPath, Err: err}
	}
	if !probeOpenat2(fd) {
		unix.Close(fd)
		r, err := os.OpenRoot(dirPath)
		if err != nil {
			return nil, err
		}
		return &Dir{path: dirPath, top: dirPath, fd: -1, root: r}, nil
	}
	return &Dir{path: dirPath, top: dirPath, fd: fd}, nil
}

// Path returns the directory's path, as opened.
func (d *Dir) Path() string { return d.path }

// Close releases the directory.
func (d *Dir) Close() error {
	var err error
	if d.fd >= 0 {
		err = unix.Close(d.fd)
		d.fd = -1
	}
	if d.root != nil {
		if e := d.root.Close(); err == nil {
			err = e
		}
	}
	return err
}

// osRoot returns the os.Root of the directory, opening it through the
// descriptor the first time, so that it is the same directory even if
// its path now leads elsewhere.
func (d *Dir) osRoot() (*os.Root, error) {
	if d.fd < 0 {
		return d.root, nil
	}
	d.rootOnce.Do(func() {
		d.root, d.rootErr = os.OpenRoot(fmt.Sprintf("/proc/self/fd/%d", d.fd))
	})
	return d.root, d.rootErr
}

// openBeneath opens name below d with openat2. redo reports an error that
// an os.Root must decide again: the path leads out, or through too many
// links, or a rename raced with it.
func (d *Dir) openBeneath(name string, flags uint64) (fd int, redo bool, err error) {
	how := &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for range 3 {
		fd, err = unix.Openat2(d.fd, name, how)
		switch err {
		case nil:
			return fd, false, nil
		case unix.EINTR, unix.EAGAIN:
			continue
		case unix.EXDEV, unix.ELOOP:
			return -1, true, err
		}
		return -1, false, err
	}
	return -1, true, err
}

// checkName refuses a name an os.Root would refuse before looking.
func checkName(name string) error {
	if name == "" || path.IsAbs(name) {
		return ErrEscapes
	}
	return nil
}

// OpenDir opens the directory name below d.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, &fs.PathError{Op: opOpenat, Path: name, Err: err}
	}
	if d.fd >= 0 {
		fd, redo, err := d.openBeneath(name, unix.O_PATH|unix.O_DIRECTORY)
		if err == nil {
			return &Dir{path: path.Join(d.path, name), top: d.top, fd: fd}, nil
		}
		if !redo {
			return nil, &fs.PathError{Op: opOpenat, Path: name, Err: err}
		}
	}
	root, err := d.osRoot()
	if err != nil {
		return nil, err
	}
	sub, err := root.OpenRoot(name)
	if err != nil {
		return nil, fromRoot(err)
	}
	// A sub-root decides everything itself: it is rare (a link to
	// elsewhere in the directory) and stays so.
	return &Dir{path: path.Join(d.path, name), top: d.top, fd: -1, root: sub}, nil
}

// isDir reports whether name below d is a directory, following links
// that stay below d, as an os.Root's Stat does: a directory opens with
// O_DIRECTORY in one system call, where os.Root would open every
// directory on the way.
func (d *Dir) isDir(name string) bool {
	if checkName(name) != nil {
		return false
	}
	if d.fd >= 0 {
		fd, redo, err := d.openBeneath(name, unix.O_PATH|unix.O_DIRECTORY)
		if err == nil {
			unix.Close(fd)
			return true
		}
		if !redo {
			return false
		}
	}
	root, err := d.osRoot()
	if err != nil {
		return false
	}
	fi, err := root.Stat(name)
	return err == nil && fi.IsDir()
}

// fileFlags open a file for reading without blocking on a FIFO, waiting
// for a terminal or leaking into a child.
const fileFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY

// Open opens name below d for reading. It does not block on a FIFO, and
// it opens whatever is there; File.Stat says what it is.
func (d *Dir) Open(name string) (*File, error) {
	if err := checkName(name); err != nil {
		return nil, &fs.PathError{Op: opOpenat, Path: name, Err: err}
	}
	if d.fd >= 0 {
		fd, redo, err := d.openBeneath(name, fileFlags)
		if err == nil {
			return &File{fd: fd, name: name}, nil
		}
		if !redo {
			return nil, &fs.PathError{Op: opOpenat, Path: name, Err: err}
		}
	}
	root, err := d.osRoot()
	if err != nil {
		return nil, err
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fromRoot(err)
	}
	return &File{fd: -1, os: f, name: name}, nil
}

// ReadFile reads the regular file name, refusing anything else
// (ErrNotRegular) and a file over max bytes (ErrTooLarge) without reading
// it.
func (d *Dir) ReadFile(name string, max int64) ([]byte, error) {
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadBounded(max)
}

// Lstat describes name without following it if it is a symbolic link.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	if err := checkName(name); err != nil {
		return nil, &fs.PathError{Op: opLstatat, Path: name, Err: err}
	}
	if d.fd >= 0 {
		parent, base := ".", name
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			parent, base = name[:i], name[i+1:]
		}
		if base != "" && base != "." && base != ".." {
			dirfd, redo := d.fd, false
			var err error
			if parent != "." {
				dirfd, redo, err = d.openBeneath(parent, unix.O_PATH|unix.O_DIRECTORY)
				if err == nil {
					defer unix.Close(dirfd)
				}
			}
			if err == nil {
				var st unix.Stat_t
				err := ignoringEINTR0(func() error {
					return unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
				})
				if err != nil {
					return nil, &fs.PathError{Op: opLstatat, Path: name, Err: err}
				}
				return statInfo(base, &st), nil
			}
			if !redo {
				return nil, &fs.PathError{Op: opLstatat, Path: name, Err: err}
			}
		}
	}
	root, err := d.osRoot()
	if err != nil {
		return nil, err
	}
	fi, err := root.Lstat(name)
	return fi, fromRoot(err)
}

// ReadDir returns the entries of the directory name, sorted by name, at
// most max of them (all when max ≤ 0); more reports that some were left
// out. Their types come from the directory itself: unlike an os.Root's
// ReadDir, it does not stat every entry.
func (d *Dir) ReadDir(name string, max int) (entries []fs.DirEntry, more bool, err error) {
	if err := checkName(name); err != nil {
		return nil, false, &fs.PathError{Op: opOpenat, Path: name, Err: err}
	}
	if d.fd >= 0 {
		// Read with bare system calls: open, getdents until the end,
		// close, and no entry allocated on its own.
		fd, redo, err := d.openBeneath(name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err == nil {
			defer unix.Close(fd)
			return d.readDirFD(fd, name, max)
		}
		if !redo {
			return nil, false, &fs.PathError{Op: opOpenat, Path: name, Err: err}
		}
	}
	f, err := d.openDir(name)
	if err != nil {
		return nil, false, err
	}
	defer f.Close() //nolint:errcheck // read-only
	if max <= 0 {
		entries, err = f.ReadDir(-1)
		slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		return entries, false, err
	}
	for len(entries) < max {
		n := min(1024, max-len(entries))
		des, err := f.ReadDir(n)
		entries = append(entries, des...)
		if errors.Is(err, io.EOF) || (err == nil && len(des) == 0) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		if len(des) < n {
			break // ReadDir stops short only at the end of the directory
		}
	}
	if len(entries) == max {
		// One more entry means some were left out.
		des, _ := f.ReadDir(1)
		more = len(des) > 0
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, more, nil
}

// direntBufs are the buffers getdents fills.
var direntBufs = sync.Pool{New: func() any { return new([8192]byte) }}

// readDirFD is ReadDir of the directory open at fd, name below d: the
// entries in name order, at most max of them (all when max ≤ 0). An
// entry's type comes from the directory, or from an lstat where the file
// system does not say (as os.File.ReadDir does).
func (d *Dir) readDirFD(fd int, name string, max int) ([]fs.DirEntry, bool, error) {
	buf := direntBufs.Get().(*[8192]byte)
	defer direntBufs.Put(buf)
	var (
		list []dirEntry
		more bool
	)
read:
	for {
		n, err := ignoringEINTR(func() (int, error) { return unix.Getdents(fd, buf[:]) })
		if err != nil {
			return nil, false, &fs.PathError{Op: opReaddirent, Path: path.Join(d.path, name), Err: err}
		}
		if n <= 0 {
			break
		}
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, false, &fs.PathError{Op: opReaddirent, Path: path.Join(d.path, name), Err: syscall.EIO}
			}
			typ, nb := b[18], b[19:reclen]
			b = b[reclen:]
			if i := bytes.IndexByte(nb, 0); i >= 0 {
				nb = nb[:i]
			}
			if string(nb) == "." || string(nb) == ".." {
				continue
			}
			if max > 0 && len(list) == max {
				more = true
				break read
			}
			e := dirEntry{name: string(nb), dir: d, parent: name}
			switch typ {
			case unix.DT_REG:
			case unix.DT_DIR:
				e.typ = fs.ModeDir
			case unix.DT_LNK:
				e.typ = fs.ModeSymlink
			case unix.DT_FIFO:
				e.typ = fs.ModeNamedPipe
			case unix.DT_SOCK:
				e.typ = fs.ModeSocket
			case unix.DT_CHR:
				e.typ = fs.ModeDevice | fs.ModeCharDevice
			case unix.DT_BLK:
				e.typ = fs.ModeDevice
			default:
				var st unix.Stat_t
				err := ignoringEINTR0(func() error { return unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) })
				if errors.Is(err, unix.ENOENT) {
					continue // gone since the directory was read
				}
				if err != nil {
					return nil, false, &fs.PathError{Op: "lstat", Path: path.Join(d.path, name, e.name), Err: err}
				}
				e.typ = statInfo(e.name, &st).Mode().Type()
			}
			list = append(list, e)
		}
	}
	slices.SortFunc(list, func(a, b dirEntry) int { return strings.Compare(a.name, b.name) })
	var entries []fs.DirEntry
	if len(list) > 0 {
		entries = make([]fs.DirEntry, len(list))
		for i := range list {
			entries[i] = &list[i]
		}
	}
	return entries, more, nil
}

// dirEntry is an entry readDirFD found.
type dirEntry struct {
	name string
	typ  fs.FileMode
	// dir and parent are where it was found, for Info.
	dir    *Dir
	parent string
}

func (e *dirEntry) Name() string               { return e.name }
func (e *dirEntry) IsDir() bool                { return e.typ.IsDir() }
func (e *dirEntry) Type() fs.FileMode          { return e.typ }
func (e *dirEntry) Info() (fs.FileInfo, error) { return e.dir.Lstat(path.Join(e.parent, e.name)) }
func (e *dirEntry) String() string             { return fs.FormatDirEntry(e) }

// openDir opens the directory name for listing, as a plain *os.File: one
// that is not marked as opened in a root, so that its ReadDir takes the
// entries' types from the directory rather than from an lstat of each.
func (d *Dir) openDir(name string) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, &fs.PathError{Op: opOpenat, Path: name, Err: err}
	}
	if d.fd >= 0 {
		fd, redo, err := d.openBeneath(name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err == nil {
			return os.NewFile(uintptr(fd), path.Join(d.path, name)), nil
		}
		if !redo {
			return nil, &fs.PathError{Op: opOpenat, Path: name, Err: err}
		}
	}
	root, err := d.osRoot()
	if err != nil {
		return nil, err
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, fromRoot(err)
	}
	// The same directory, through a descriptor of its own.
	defer f.Close() //nolint:errcheck // read-only
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(int(f.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: opOpenat, Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(d.path, name)), nil
}

// File is a file a Dir opened for reading: a bare descriptor, read with
// plain system calls (or an *os.File where the Dir is an os.Root).
type File struct {
	fd   int
	os   *os.File
	name string
}

// Stat describes the open file.
func (f *File) Stat() (fs.FileInfo, error) {
	if f.os != nil {
		return f.os.Stat()
	}
	var st unix.Stat_t
	if err := ignoringEINTR0(func() error { return unix.Fstat(f.fd, &st) }); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: f.name, Err: err}
	}
	return statInfo(path.Base(f.name), &st), nil
}

// TypeSize reports whether the open file is a regular file, and its
// size: what Stat says of them, with the same errors, without making an
// fs.FileInfo — a loader reading hundreds of files needs no more.
func (f *File) TypeSize() (regular bool, size int64, err error) { return f.typeSize() }

// typeSize is what Stat says of the file's type and size, without making
// an fs.FileInfo.
func (f *File) typeSize() (regular bool, size int64, err error) {
	if f.os != nil {
		fi, err := f.os.Stat()
		if err != nil {
			return false, 0, err
		}
		return fi.Mode().IsRegular(), fi.Size(), nil
	}
	var st unix.Stat_t
	if err := ignoringEINTR0(func() error { return unix.Fstat(f.fd, &st) }); err != nil {
		return false, 0, &fs.PathError{Op: "stat", Path: f.name, Err: err}
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG, st.Size, nil
}

// Read reads from the file; it returns io.EOF at the end.
func (f *File) Read(p []byte) (int, error) {
	if f.os != nil {
		return f.os.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := ignoringEINTR(func() (int, error) { return unix.Read(f.fd, p) })
	switch {
	case err != nil:
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Close closes the file.
func (f *File) Close() error {
	if f.os != nil {
		return f.os.Close()
	}
	if f.fd < 0 {
		return fs.ErrClosed
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}

// ReadBounded reads the rest of the regular file, refusing anything else
// (ErrNotRegular) and a file over max bytes (ErrTooLarge) without reading
// it. It reads the size the file had when it was checked: a file growing
// meanwhile is read as it was, never past max.
func (f *File) ReadBounded(max int64) ([]byte, error) {
	regular, size, err := f.typeSize()
	if err != nil {
		return nil, err
	}
	if !regular {
		return nil, ErrNotRegular
	}
	if size > max {
		return nil, fmt.Errorf("%w: %d bytes, over the %s limit", ErrTooLarge, size, ByteSize(max))
	}
	b := make([]byte, size)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// statInfo is a stat result as an fs.FileInfo, as os.Lstat makes it but
// for Sys, which is a *unix.Stat_t.
func statInfo(name string, st *unix.Stat_t) fs.FileInfo {
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return &fileInfo{name: name, mode: mode, st: *st}
}

type fileInfo struct {
	name string
	mode fs.FileMode
	st   unix.Stat_t
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.st.Size }
func (fi *fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any           { return &fi.st }

func ignoringEINTR[T any](fn func() (T, error)) (T, error) {
	for {
		v, err := fn()
		if err != unix.EINTR {
			return v, err
		}
	}
}

func ignoringEINTR0(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}
