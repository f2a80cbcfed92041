package executor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// SocketMode is the executor socket's mode: its owner and its group may
// connect, nobody else.
//
// In a runner pod the two containers meet on the socket's group. The
// workspace container ("aerie executor serve") and the agent container
// run as two different UIDs; the pod's securityContext.fsGroup is a
// supplementary group of both, and Kubernetes makes the emptyDir that
// holds the socket group-owned by it (with the setgid bit, so the socket
// inherits the group). Listen also sets the socket's group to its
// directory's explicitly. The agent connects through the group; the
// executor owns the socket. The commands the executor runs share its UID
// and could connect as well, but gain nothing by it: they can already do
// whatever the executor does for them.
const SocketMode fs.FileMode = 0o660

// Listen creates the executor's socket at path, with SocketMode and the
// group of its directory, and listens on it. A stale socket left at path
// by an executor that died is replaced; anything else there, or a socket
// that a live executor serves, is an error. Closing the listener removes
// the socket.
//
// The socket is bound under a temporary name and renamed into place once
// its mode and group are set, so that no client ever finds it with a
// mode the umask chose.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen on %s: it exists and is not a socket; remove it or choose another --socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen on %s: another executor is serving it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen on %s: remove stale socket: %w", path, err)
		}
	}
	dir := filepath.Dir(path)
	var fi fs.FileInfo
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(dir, ".aerie-"+hex.EncodeToString(suffix[:]))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(tmp, SocketMode); err != nil {
		return fail(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if err := os.Lchown(tmp, -1, int(st.Gid)); err != nil {
			return fail(fmt.Errorf(
				"give the socket the group %d of its directory (is the executor a member of it?): %w", st.Gid, err))
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return &socketListener{UnixListener: ln, path: path}, nil
}

// socketListener removes its socket when first closed.
type socketListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	})
	return err
}
