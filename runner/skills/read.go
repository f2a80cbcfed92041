package skills

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aerie-run/aerie/runner/extensions"
)

// readResult is a file's contents, or why they could not be read.
type readResult struct {
	data []byte
	err  error
}

// fileReader reads the SKILL.md files below one directory. Discovery
// reads hundreds of them, and each read through *os.File costs twice
// the system calls it needs (the file is set up for the poller, then
// stat'ed again), so it opens them relative to the directory's
// descriptor and reads them with bare system calls: open, fstat, read,
// close.
type fileReader struct {
	// confined, when set, is the directory, read beneath it.
	confined *extensions.Dir
	// fd is the directory, or -1 to open through root or dir.
	fd int
	// beneath resolves names only beneath fd, links included
	// (RESOLVE_BENEATH), as root would.
	beneath bool
	root    *os.Root
	dir     string
}

// read reads the regular file name, refusing one larger than
// MaxFileSize without reading it. A missing file's error wraps
// fs.ErrNotExist.
func (r fileReader) read(name string) readResult {
	if r.confined != nil {
		f, err := r.confined.Open(name)
		if err != nil {
			return readResult{err: openError(err)}
		}
		defer f.Close()
		return readFile(f)
	}
	if r.fd >= 0 {
		fd, err := openAt(r.fd, name, r.beneath)
		if err == nil {
			return readFD(fd)
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return readResult{err: openError(err)}
		}
	}
	var (
		f   *os.File
		err error
	)
	// O_NONBLOCK: opening a FIFO planted in place of a file must not wait
	// for a writer that never comes.
	if r.root != nil {
		f, err = r.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	} else {
		f, err = os.OpenFile(filepath.Join(r.dir, filepath.FromSlash(name)), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return readResult{err: openError(err)}
	}
	defer f.Close()
	return readFile(f)
}

// openFlags open a file for reading without blocking on a FIFO, waiting
// for a terminal or leaking the descriptor into a child.
const openFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY

// openAt opens name below the directory dirfd. It returns an error
// wrapping errors.ErrUnsupported when the kernel cannot confine the
// resolution (no openat2), for the caller to fall back to os.Root.
func openAt(dirfd int, name string, beneath bool) (int, error) {
	for {
		var fd int
		var err error
		if beneath {
			fd, err = unix.Openat2(dirfd, name, &unix.OpenHow{Flags: openFlags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
			if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
				return -1, fmt.Errorf("openat2: %w", errors.ErrUnsupported)
			}
		} else {
			fd, err = unix.Openat(dirfd, name, openFlags, 0)
		}
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		return fd, err
	}
}

// readFD reads the open file fd and closes it.
func readFD(fd int) readResult {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return readResult{err: fmt.Errorf("cannot stat: %v", err)}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return readResult{err: errors.New("not a regular file")}
	}
	if st.Size > MaxFileSize {
		return readResult{err: fmt.Errorf("larger than 1 MB (%d bytes); not read", st.Size)}
	}
	// One read of the size fstat gave: a file that grows meanwhile is
	// read as it was.
	buf := make([]byte, st.Size)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return readResult{err: fmt.Errorf("cannot read: %v", err)}
		}
		if m == 0 {
			break
		}
		n += m
	}
	return readResult{data: buf[:n]}
}

// readFile reads the open file f, as readFD does.
func readFile(f interface {
	io.Reader
	Stat() (fs.FileInfo, error)
}) readResult {
	fi, err := f.Stat()
	if err != nil {
		return readResult{err: fmt.Errorf("cannot stat: %s", describe(err))}
	}
	if !fi.Mode().IsRegular() {
		return readResult{err: errors.New("not a regular file")}
	}
	if fi.Size() > MaxFileSize {
		return readResult{err: fmt.Errorf("larger than 1 MB (%d bytes); not read", fi.Size())}
	}
	buf := make([]byte, fi.Size())
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return readResult{err: fmt.Errorf("cannot read: %s", describe(err))}
	}
	return readResult{data: buf[:n]}
}

// openError describes a failed open, wrapping fs.ErrNotExist for a
// missing file.
func openError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot open: %w", fs.ErrNotExist)
	case errors.Is(err, unix.EXDEV):
		return errors.New("cannot open: it leads outside the workspace")
	}
	return fmt.Errorf("cannot open: %s", describe(err))
}

// readIn reads name in the directory root, as fileReader does.
func readIn(root *os.Root, name string) readResult {
	return fileReader{fd: -1, root: root}.read(name)
}
