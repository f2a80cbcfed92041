package process

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit status, or -1 when a signal ended the process.
	Code int
	// Signal is the signal that ended the process, 0 when it exited.
	Signal syscall.Signal
}

// si_code values of a SIGCHLD siginfo (<asm-generic/siginfo.h>).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// childInfo is the start of the kernel's siginfo_t as filled for a child
// by waitid. x/sys/unix.Siginfo keeps the union opaque. The union starts
// after three ints, aligned to a pointer: offset 16 on 64-bit platforms,
// 12 on 32-bit ones, which the zero-length uintptr array reproduces.
type childInfo struct {
	signo, errno, code int32
	_                  [0]uintptr
	pid                int32
	uid                uint32
	status             int32
	_                  [128]byte // siginfo_t is 128 bytes; waitid fills all of it
}

// AwaitExit blocks until pid, a child of this process, has exited, and
// says how — without reaping it (waitid with WNOWAIT). The child stays a
// zombie until its exec.Cmd's Wait reaps it, so its PID, and the group it
// leads, cannot be reused in the meantime: the caller can still verify and
// signal what is left of the group, and decide when to let the PID go.
func AwaitExit(pid int) (ExitStatus, error) {
	var info childInfo
	for {
		err := unix.Waitid(unix.P_PID, pid, (*unix.Siginfo)(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return ExitStatus{}, fmt.Errorf("wait for %d: %w", pid, err)
		}
		break
	}
	switch info.code {
	case cldExited:
		return ExitStatus{Code: int(info.status)}, nil
	case cldKilled, cldDumped:
		return ExitStatus{Code: -1, Signal: syscall.Signal(info.status)}, nil
	default:
		return ExitStatus{}, fmt.Errorf("wait for %d: unexpected si_code %d", pid, info.code)
	}
}
