package harden_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aerie-run/aerie/runner/harden"
)

// hardenedEnv makes the test binary, started again with it set, harden
// itself and report what it then is.
const hardenedEnv = "AERIE_HARDEN_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(hardenedEnv) == "1" {
		if err := harden.Process(); err != nil {
			fmt.Fprint(os.Stderr, err.Error())
			os.Exit(2)
		}
		dumpable, err := harden.Dumpable()
		var lim unix.Rlimit
		if err == nil {
			err = unix.Getrlimit(unix.RLIMIT_CORE, &lim)
		}
		if err != nil {
			fmt.Fprint(os.Stderr, err.Error())
			os.Exit(2)
		}
		if dumpable || lim.Cur != 0 || lim.Max != 0 {
			fmt.Fprint(os.Stderr, "still dumpable or with a core limit")
			os.Exit(1)
		}
		// A program it starts is dumpable again: the kernel resets the
		// flag at exec, so tools keep working as usual.
		out, err := exec.Command("grep", "-c", "", "/proc/self/status").CombinedOutput()
		if err != nil {
			fmt.Fprint(os.Stderr, "a child cannot read its own /proc: "+err.Error()+": "+string(out))
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProcess checks, in a process of its own (the flag lasts for the
// process's life), that Process makes it non-dumpable without core dumps,
// and that its children are not.
func TestProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hardenedEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hardened child: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if d, err := harden.Dumpable(); err != nil || !d {
		t.Errorf("the test process itself: dumpable %v, %v; want dumpable, untouched", d, err)
	}
}
