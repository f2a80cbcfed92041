package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The test binary plays both peakrss (runAsMain) and the measured child
// (touchEnv: it touches that many MiB and exits).
const (
	runAsMain = "PEAKRSS_TEST_MAIN"
	touchEnv  = "PEAKRSS_TEST_TOUCH_MIB"
)

var ballast []byte

func TestMain(m *testing.M) {
	if os.Getenv(runAsMain) == "1" {
		// The child it runs is the toucher.
		if err := os.Unsetenv(runAsMain); err != nil {
			panic(err)
		}
		main()
	}
	if mib := os.Getenv(touchEnv); mib != "" {
		n, _ := strconv.Atoi(mib)
		ballast = make([]byte, n<<20)
		touch(ballast)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestPeakRSS checks that the reported peak is the child's own: at least
// what it touched, and not the far larger resident set of the process
// that started peakrss.
func TestPeakRSS(t *testing.T) {
	// Make this process large: 192 MiB resident.
	ballast = make([]byte, 192<<20)
	touch(ballast)
	parent := hwm(t)
	for _, mib := range []int{0, 64} {
		out := filepath.Join(t.TempDir(), "rss")
		cmd := exec.Command(os.Args[0], out, os.Args[0])
		cmd.Env = append(os.Environ(), runAsMain+"=1")
		cmd.Env = append(cmd.Env, touchEnv+"="+strconv.Itoa(mib))
		err := cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 3 {
			t.Fatalf("peakrss exit status %d, want the child's 3 (%v)", code, err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		kib, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("output %q: %v", b, err)
		}
		// The child is a Go test binary: some MiB of its own, plus what it
		// touched (more under the race detector, which shadows memory), but
		// far from this process's peak.
		if got := kib >> 10; got < mib || got > mib+(parent-mib)/2 {
			t.Errorf("child touching %d MiB: peak %d MiB (this process's: %d MiB)", mib, got, parent)
		}
	}
	if len(ballast) == 0 { // keep the ballast alive until here
		t.Fatal("no ballast")
	}
}

// touch writes to every page of b, so that all of it is resident.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
}

// hwm returns this process's peak resident set, in MiB.
func hwm(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kib >> 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func TestUsage(t *testing.T) {
	t.Parallel()
	if code, err := run([]string{"out"}); code != 2 || err == nil {
		t.Errorf("run with no command = %d, %v; want 2 and a usage error", code, err)
	}
	if code, err := run([]string{filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "no-such-command")}); code != 127 || err == nil {
		t.Errorf("run of a missing command = %d, %v; want 127 and an error", code, err)
	}
}
