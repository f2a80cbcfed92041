// Command peakrss runs a command and writes its peak resident set size, in
// KiB, to a file:
//
//	peakrss OUT COMMAND [ARG...]
//
// The command inherits the standard streams and the environment; peakrss
// exits with its status (128+N when signal N killed it).
//
// Why not read the rusage of wait4 in the caller: Go starts commands with
// vfork, so the child runs in its parent's memory until it execs, and the
// kernel counts the parent's high-water mark as the child's own
// (ru_maxrss keeps the largest resident set the process ever had, which
// includes the parent's address space it borrowed). A large caller, such
// as a benchmark whose fake server keeps every request, makes a small child
// look large. peakrss is a small parent: what it reports is the child's.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "peakrss: %v\n", err)
	}
	os.Exit(code)
}

func run(args []string) (int, error) {
	if len(args) < 2 {
		return 2, errors.New("usage: peakrss OUT COMMAND [ARG...]")
	}
	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return 127, fmt.Errorf("run %s: %w", args[1], err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 1, errors.New("no resource usage on this platform")
	}
	// ru_maxrss is in KiB on Linux.
	if err := os.WriteFile(args[0], []byte(strconv.FormatInt(ru.Maxrss, 10)+"\n"), 0o644); err != nil {
		return 1, fmt.Errorf("write %s: %w", args[0], err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}
