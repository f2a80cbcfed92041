// Package harden protects the aerie process from the tools it runs as the
// same user.
//
// In a pod, the agent container and the workspace container where tools
// run are separate users; locally, `aerie run` and its tools are one user,
// and the kernel lets a process read the environment and memory of another
// of the same user (/proc/<pid>/environ, /proc/<pid>/mem) — where the
// runner keeps the model's API key and the database DSN. Process makes the
// runner non-dumpable (PR_SET_DUMPABLE 0): its /proc files then belong to
// root and only a process allowed to trace it reads them, and it writes no
// core dump (RLIMIT_CORE 0 too, for the dump a signal would make). This is
// what Codex's process hardening does; like it, it cannot keep out a tool
// running as root or one the user runs with ptrace rights.
//
// What the tools run with is decided elsewhere: executor.Environ passes
// them an allow-listed environment without the runner's secrets or the
// dynamic loader's variables.
package harden

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Process hardens the calling process for the rest of its life. Programs
// the process starts are dumpable again once they exec, as the kernel
// resets the flag; that is why their environment is built separately.
func Process() error {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
		return fmt.Errorf("disable core dumps: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the process non-dumpable: %w", err)
	}
	return nil
}

// Dumpable reports whether the calling process is dumpable.
func Dumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		return false, fmt.Errorf("read the dumpable flag: %w", err)
	}
	return v != 0, nil
}
