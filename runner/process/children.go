package process

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

// errNoChildrenList means the kernel does not publish
// /proc/<pid>/task/<tid>/children (it needs CONFIG_PROC_CHILDREN, which
// every major distribution enables); callers then walk all of /proc.
var errNoChildrenList = errors.New("/proc/<pid>/task/<tid>/children is not available")

// threadChildren lists the children forked by the threads tids of this
// process and by its main thread, from their children files. It reads a
// handful of files where a snapshot reads every process of the machine,
// which is what makes the checks after each command cheap.
//
// A children file lists the children of one thread, and is not read
// atomically. Orphans reparented to this process, as a child subreaper, go
// to its first living thread, the main one, and so do the children of a
// thread that exits; the main thread's file is therefore read last, so that
// a child moved to it while the others were read is still seen.
func threadChildren(tids ...int) ([]int, error) {
	self := os.Getpid()
	taskDir := procDir + "/" + strconv.Itoa(self) + "/task"
	var pids []int
	buf := make([]byte, 0, 512)
	read := func(tid int) error {
		name := taskDir + "/" + strconv.Itoa(tid) + "/children"
		b, err := readProcFile(name, buf[:0])
		if err != nil {
			return err
		}
		buf = b[:0]
		if pids, err = appendPIDs(pids, b); err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		return nil
	}
	for _, tid := range tids {
		if tid == self {
			continue
		}
		if err := read(tid); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread exited; its children went to the main thread
			}
			return nil, err
		}
	}
	if err := read(self); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// The main thread's directory is there as long as the
			// process is: the file is what is missing.
			return nil, errNoChildrenList
		}
		return nil, err
	}
	return pids, nil
}

// appendPIDs appends the PIDs of a children file, decimal numbers each
// followed by a space ("12 345 "), to pids.
func appendPIDs(pids []int, b []byte) ([]int, error) {
	n, digits := 0, 0
	for i, c := range b {
		switch {
		case '0' <= c && c <= '9':
			if digits == 9 { // PIDs stop at 2^22
				return pids, fmt.Errorf("malformed children list: number too long at byte %d", i)
			}
			n = n*10 + int(c-'0')
			digits++
		case c == ' ' || c == '\n':
			if digits > 0 {
				pids = append(pids, n)
			}
			n, digits = 0, 0
		default:
			return pids, fmt.Errorf("malformed children list: byte %q at %d", c, i)
		}
	}
	if digits > 0 {
		pids = append(pids, n)
	}
	return pids, nil
}
