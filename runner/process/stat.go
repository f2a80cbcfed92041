package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// procDir is where the kernel publishes processes.
const procDir = "/proc"

// Fingerprint identifies one process across PID reuse: the same PID with
// another fingerprint is another process.
type Fingerprint struct {
	// StartTime is when the process started, in clock ticks after boot
	// (field 22, starttime, of /proc/<pid>/stat). Two processes that get
	// the same PID in one boot never share it: the first must have been
	// reaped before the second was forked.
	StartTime uint64 `json:"start_time"`
	// BootID is the kernel's boot id (/proc/sys/kernel/random/boot_id).
	// Start times restart at every boot; a record from another boot names a
	// group that can no longer exist. Empty when unknown.
	BootID string `json:"boot_id,omitempty"`
	// PIDNamespace names the PID namespace the PID belongs to, as the
	// link /proc/self/ns/pid reads ("pid:[4026531836]"). Another
	// container, with its own namespace, sees other processes under the
	// same numbers, or none at all. Empty when unknown.
	PIDNamespace string `json:"pid_namespace,omitempty"`
}

// stat is what aerie reads from /proc/<pid>/stat.
type stat struct {
	pid, ppid, pgid, sid int
	state                byte
	start                uint64
	flags                uint64 // the kernel's PF_* flags of the task
}

// dead reports whether the process has exited: a zombie waiting to be
// reaped, or a task being torn down. Signals cannot reach it any more.
func (s stat) dead() bool { return s.state == 'Z' || s.state == 'X' || s.state == 'x' }

// pfKthread is PF_KTHREAD of <linux/sched.h>.
const pfKthread = 0x00200000

// kernel reports whether the task is a kernel thread: no environment, no
// group of aerie's.
func (s stat) kernel() bool { return s.flags&pfKthread != 0 }

// parseStat parses the contents of /proc/<pid>/stat:
//
//	pid (comm) state ppid pgrp session tty_nr tpgid flags ... starttime ...
//
// comm is the executable's name, up to 15 bytes of anything but NUL:
// spaces, parentheses and newlines included ("a) (b" is a valid comm). The
// fields are therefore split after the last ')', never by counting spaces
// from the start.
func parseStat(b []byte) (stat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return stat{}, errors.New("malformed stat: no (comm)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return stat{}, fmt.Errorf("malformed stat: pid: %w", err)
	}
	// After ')': state is field 3 of proc_pid_stat(5), so field n is at
	// index n-3; starttime (22) is at 19.
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, fmt.Errorf("malformed stat: %d fields after comm", len(f))
	}
	s := stat{pid: pid, state: f[0][0]}
	for _, v := range []struct {
		dst *int
		i   int
	}{{&s.ppid, 1}, {&s.pgid, 2}, {&s.sid, 3}} {
		if *v.dst, err = strconv.Atoi(f[v.i]); err != nil {
			return stat{}, fmt.Errorf("malformed stat: field %d: %w", v.i+3, err)
		}
	}
	if s.flags, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return stat{}, fmt.Errorf("malformed stat: flags: %w", err)
	}
	if s.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return stat{}, fmt.Errorf("malformed stat: starttime: %w", err)
	}
	return s, nil
}

// readStat reads /proc/<pid>/stat. A process that does not exist (or has
// been reaped meanwhile) is an error satisfying errors.Is(err, os.ErrNotExist).
func readStat(pid int) (stat, error) {
	var buf [1024]byte
	b, err := readProcFile(procDir+"/"+strconv.Itoa(pid)+"/stat", buf[:0])
	if err != nil {
		return stat{}, err
	}
	s, err := parseStat(b)
	if err != nil {
		return stat{}, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
	}
	return s, nil
}

// readProcFile reads a whole /proc file into buf with raw system calls:
// a snapshot reads hundreds of them, and os.File would try to register each
// with the network poller. ESRCH, which /proc returns for a process that
// exits mid-read, is reported as os.ErrNotExist.
func readProcFile(name string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, procErr(name, err)
	}
	defer unix.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := cap(buf) - len(buf)
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, procErr(name, err)
		}
		buf = buf[:len(buf)+n]
		// /proc files are generated whole on read: a read that does not
		// fill the room is the end, which spares one system call per file.
		if n < room {
			return buf, nil
		}
	}
}

func procErr(name string, err error) error {
	if err == unix.ESRCH {
		err = unix.ENOENT
	}
	return &os.PathError{Op: "read", Path: name, Err: err}
}

// bootID returns the kernel's boot id, "" when the kernel does not say.
// It is read once: it cannot change while this process runs, and every
// command started reads it.
var bootID = sync.OnceValue(func() string {
	var buf [64]byte
	b, err := readProcFile(procDir+"/sys/kernel/random/boot_id", buf[:0])
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// pidNamespace returns the PID namespace /proc shows, "" when unknown. A
// process's own PID namespace never changes (setns affects only its
// children), so it is read once.
var pidNamespace = sync.OnceValue(func() string {
	ns, err := os.Readlink(procDir + "/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
})

// snapshot is every process visible in /proc at one moment (near enough:
// /proc is read a file at a time).
type snapshot struct {
	procs    map[int]stat
	children map[int][]int
	boot     string
	pidNS    string
	// excluded holds this process and its ancestors: nothing tears down
	// the executor, or whatever started it, even if the environment of one
	// of them carries a group's marker.
	excluded map[int]bool
}

// takeSnapshot reads every /proc/<pid>/stat. Processes that exit while it
// reads are skipped; a /proc that cannot be listed is an error.
func takeSnapshot() (*snapshot, error) {
	d, err := os.Open(procDir)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close() //nolint:errcheck // read-only
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	s := &snapshot{
		procs:    make(map[int]stat, len(names)),
		children: make(map[int][]int, len(names)),
		boot:     bootID(),
		pidNS:    pidNamespace(),
		excluded: make(map[int]bool),
	}
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // exited meanwhile, or unreadable: as good as absent
		}
		s.procs[pid] = st
		s.children[st.ppid] = append(s.children[st.ppid], pid)
	}
	for pid := os.Getpid(); pid > 0 && !s.excluded[pid]; {
		s.excluded[pid] = true
		st, ok := s.procs[pid]
		if !ok {
			break
		}
		pid = st.ppid
	}
	return s, nil
}

// readMarker returns the value of MarkerEnv in pid's environment.
// /proc/<pid>/environ holds the environment the process's current program
// was started with; it is readable only by the process's owner (or with
// CAP_SYS_PTRACE), and empty for zombies and kernel threads.
//
// It is also empty for a moment in the middle of an execve, between the
// old program's memory going and the new one's environment being set up;
// a process that escaped its group with `setsid cmd` execs twice right
// away. Read then, the marker would be missed and the process left out of
// a teardown, so an empty environment is read again a few times, for up to
// about 25 ms, before it is believed.
func readMarker(pid int) (value string, found bool, err error) {
	name := procDir + "/" + strconv.Itoa(pid) + "/environ"
	buf := make([]byte, 0, 4096)
	var b []byte
	for pause := 100 * time.Microsecond; ; pause *= 2 {
		if b, err = readProcFile(name, buf); err != nil {
			return "", false, err
		}
		if len(b) > 0 || pause > 15*time.Millisecond {
			break
		}
		time.Sleep(pause)
	}
	prefix := []byte(MarkerEnv + "=")
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(v), true, nil // the first one wins, as in getenv(3)
		}
	}
	return "", false, nil
}
