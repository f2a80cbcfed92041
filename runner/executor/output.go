package executor

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// outputBuffer bounds how much of a command's output waits in memory for
// its reader; beyond it the copier stops reading and the command blocks
// on its pipe, as it would writing to a pipe directly.
const outputBuffer = 1 << 20

// output is the reader side of a command's stdout or stderr. A copier
// drains the OS pipe into it continuously, so that when the executor cuts
// the pipe (see Local.OutputDelay) nothing already written is lost to a
// reader that was merely slow.
type output struct {
	mu   sync.Mutex
	cond sync.Cond
	buf  bytes.Buffer
	eof  bool // no more writes: Read returns io.EOF after buf
	// closed means the reader closed it: writes are discarded.
	closed bool
	// cut means the pipe has been cut: the copier's last write must not
	// wait for a reader that may never come.
	cut bool
}

func newOutput() *output {
	o := &output{}
	o.cond.L = &o.mu
	return o
}

// Read reads buffered output, blocking until some is there or the output
// has ended.
func (o *output) Read(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.buf.Len() == 0 && !o.eof && !o.closed {
		o.cond.Wait()
	}
	switch {
	case o.closed:
		return 0, os.ErrClosed
	case o.buf.Len() > 0:
		n, _ := o.buf.Read(p)
		o.cond.Broadcast() // room for the copier
		return n, nil
	default:
		return 0, io.EOF
	}
}

// Close discards the rest of the output.
func (o *output) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.buf = bytes.Buffer{}
	o.cond.Broadcast()
	return nil
}

// write appends p, waiting while the buffer is full.
func (o *output) write(p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.buf.Len() >= outputBuffer && !o.closed && !o.cut {
		o.cond.Wait()
	}
	if !o.closed {
		o.buf.Write(p)
		o.cond.Broadcast()
	}
}

// end marks the end of the output.
func (o *output) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.eof = true
	o.cond.Broadcast()
}

// setCut stops write from waiting for room.
func (o *output) setCut() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cut = true
	o.cond.Broadcast()
}

// copyOutput drains src, the parent's end of a command's pipe, into dst
// until every writer has closed the pipe or the executor has cut it.
func copyOutput(dst *output, src *os.File) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			dst.write(buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			drain(dst, src, buf)
		}
		if err != nil {
			break
		}
	}
	dst.end()
	_ = src.Close()
}

// maxDrain bounds what drain reads: more than a pipe holds by default,
// but not all a writer that keeps going can produce.
const maxDrain = 1 << 20

// drain copies what the cut pipe src holds into dst without waiting for
// more: the deadline that cut it makes every Read fail at once, data or
// not.
func drain(dst *output, src *os.File, buf []byte) {
	rc, err := src.SyscallConn()
	if err != nil {
		return
	}
	for total := 0; total < maxDrain; {
		var n int
		var rerr error
		cerr := rc.Control(func(fd uintptr) {
			if rerr = unix.SetNonblock(int(fd), true); rerr == nil {
				n, rerr = unix.Read(int(fd), buf)
			}
		})
		if cerr != nil || rerr != nil || n <= 0 {
			return // EAGAIN: nothing more for now; 0: every writer is gone
		}
		dst.write(buf[:n])
		total += n
	}
}
