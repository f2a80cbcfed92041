package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aerie-run/aerie/runner/layer"
)

// readResult is a file's contents, or why they could not be read.
type readResult struct {
	data []byte
	err  error
	// pooled, when set, holds data and goes back to headPool on release.
	pooled *[]byte
}

// release gives back the buffer of a result read for its frontmatter; its
// data must not be used after.
func (r readResult) release() {
	if r.pooled != nil {
		headPool.Put(r.pooled)
	}
}

// fileReader reads the SKILL.md files below one directory. Discovery
// reads hundreds of them, and each read through *os.File costs twice
// the system calls it needs (the file is set up for the poller, then
// stat'ed again), so it opens them relative to the directory's
// descriptor and reads them with bare system calls: open, fstat, read,
// close.
type fileReader struct {
	// head, when set, reads a SKILL.md only as far as its frontmatter,
	// the rest when that is not enough, within the budget it holds (see
	// readSized).
	head *fullReads
	// confined, when set, is the directory, read beneath it.
	confined *layer.Dir
	// fd is the directory, or -1 to open through root or dir.
	fd int
	// beneath resolves names only beneath fd, links included
	// (RESOLVE_BENEATH), as root would.
	beneath bool
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
		return readFile(f, r.head)
	}
	if r.fd >= 0 {
		fd, err := openAt(r.fd, name, r.beneath)
		if err == nil {
			return readFD(fd, r.head)
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return readResult{err: openError(err)}
		}
	}
	// O_NONBLOCK: opening a FIFO planted in place of a file must not wait
	// for a writer that never comes.
	f, err := os.OpenFile(filepath.Join(r.dir, filepath.FromSlash(name)), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return readResult{err: openError(err)}
	}
	defer f.Close() //nolint:errcheck // read-only
	return readFile(f, r.head)
}

// openFlags open a file for reading without blocking on a FIFO, waiting
// for a terminal or leaking the descriptor into a child.
const openFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY

// openAt opens name below the directory dirfd. It returns an error
// wrapping errors.ErrUnsupported when the kernel cannot confine the
// resolution (no openat2), for the caller to fall back to opening the
// path.
func openAt(dirfd int, name string, beneath bool) (int, error) {
	for {
		var fd int
		var err error
		if beneath {
			fd, err = unix.Openat2(dirfd, name, &unix.OpenHow{
				Flags: openFlags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
			})
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

// readFD reads the open file fd, as readFile does, and closes it.
func readFD(fd int, head *fullReads) readResult {
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
	return readSized(fdReader(fd), st.Size, head)
}

// fdReader reads a descriptor with bare system calls.
type fdReader int

func (fd fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), p)
		switch {
		case errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// readFile reads the open file f: a regular file of at most MaxFileSize,
// as much as head asks (see readSized).
func readFile(f interface {
	io.Reader
	Stat() (fs.FileInfo, error)
}, head *fullReads) readResult {
	var (
		regular bool
		size    int64
		err     error
	)
	if ef, ok := f.(*layer.File); ok {
		regular, size, err = ef.TypeSize()
	} else {
		var fi fs.FileInfo
		if fi, err = f.Stat(); err == nil {
			regular, size = fi.Mode().IsRegular(), fi.Size()
		}
	}
	if err != nil {
		return readResult{err: fmt.Errorf("cannot stat: %s", describe(err))}
	}
	if !regular {
		return readResult{err: errors.New("not a regular file")}
	}
	if size > MaxFileSize {
		return readResult{err: fmt.Errorf("larger than 1 MB (%d bytes); not read", size)}
	}
	return readSized(f, size, head)
}

// frontmatterHead is how much of a SKILL.md discovery reads first: the
// frontmatter of nearly every skill fits in it, and the body, which only
// the skill tool reads, is then left on disk.
const frontmatterHead = 4 << 10

// maxFullReads bounds the bytes of the SKILL.md files one search reads in
// full because their frontmatter did not end in the first frontmatterHead
// bytes. Without it ten thousand planted skills of a megabyte each would
// make every session read ten gigabytes before it starts; real skills
// whose frontmatter runs that long are rare and small.
const maxFullReads = 32 << 20

// fullReads is what is left of one search's maxFullReads. A search reads
// its files one at a time, so it needs no lock.
type fullReads struct{ left int64 }

func newFullReads() *fullReads { return &fullReads{left: maxFullReads} }

var headPool = sync.Pool{New: func() any {
	b := make([]byte, frontmatterHead)
	return &b
}}

// readSized reads the size bytes the file had when it was checked (one
// that grows meanwhile is read as it was). With head it reads at first
// only frontmatterHead bytes, and stops there when they hold the whole
// frontmatter: its data then ends with the closing "---" line, which
// ParseFrontmatter reads exactly as the whole file, and must be released.
// Otherwise it reads the rest when head's budget still holds the file's
// size, and refuses the file when it does not.
func readSized(r io.Reader, size int64, head *fullReads) readResult {
	var (
		data []byte
		n    int
	)
	if head != nil && size > frontmatterHead {
		bp := headPool.Get().(*[]byte)
		m, err := io.ReadFull(r, *bp)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			headPool.Put(bp)
			return readResult{err: fmt.Errorf("cannot read: %s", describe(err))}
		}
		if end := frontmatterEnd((*bp)[:m]); end > 0 {
			return readResult{data: (*bp)[:end], pooled: bp}
		}
		if m == frontmatterHead && size > head.left {
			headPool.Put(bp)
			return readResult{err: fmt.Errorf("not read: its frontmatter does not end in the first %d bytes, "+
				"and the search has read %d bytes of such files in full already, as many as it may; "+
				"put the frontmatter first and keep it short", frontmatterHead, maxFullReads-head.left)}
		}
		data = make([]byte, size)
		n = copy(data, (*bp)[:m])
		headPool.Put(bp)
		if m < frontmatterHead {
			return readResult{data: data[:n]} // it shrank: that is all
		}
		head.left -= size
	} else {
		data = make([]byte, size)
	}
	m, err := io.ReadFull(r, data[n:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return readResult{err: fmt.Errorf("cannot read: %s", describe(err))}
	}
	return readResult{data: data[:n+m]}
}

// frontmatterEnd returns the length of the start of data up to and
// including the newline of the line that closes its frontmatter, as
// frontmatterBlock finds it; 0 when data does not hold a complete one.
func frontmatterEnd(data []byte) int {
	bom := 0
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		bom = 3
	}
	d := data[bom:]
	first, rest, ok := cutLine(d)
	if !ok || !isFence(first) {
		return 0
	}
	for off := len(d) - len(rest); off < len(d); {
		line, _, hasNL := cutLine(d[off:])
		if !hasNL {
			return 0
		}
		off += len(line) + 1
		if isFence(line) {
			return bom + off
		}
	}
	return 0
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
func readIn(root *layer.Dir, name string) readResult {
	return fileReader{fd: -1, confined: root}.read(name)
}
