package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
)

// aerieBin is the aerie binary every test runs, built once by TestMain,
// and peakrssBin hack/peakrss, which measures a run's peak memory (the
// rusage of a child of the test process would count the test's own).
var aerieBin, peakrssBin string

// counts are the figures a run prints at its end.
var counts struct {
	faults, sessions, entries, violations atomic.Int64
}

// scale is FAULTS_SCALE, the multiplier of sessions and faults; 1 is the
// bounded run of `make test-faults`.
func scale() int {
	n, err := strconv.Atoi(os.Getenv("FAULTS_SCALE"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("AERIE_FAULTS") != "1" {
		// A suite of its own, not part of `make test`.
		fmt.Println("hack/faults: the fault suite runs with `make test-faults` (AERIE_FAULTS=1)")
		return 0
	}
	dir, err := os.MkdirTemp("", "aerie-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	aerieBin, peakrssBin = filepath.Join(dir, "aerie"), filepath.Join(dir, "peakrss")
	for bin, pkg := range map[string]string{aerieBin: "./cmd/aerie", peakrssBin: "./hack/peakrss"} {
		build := exec.Command("go", "build", "-o", bin, "github.com/aerie-run/aerie/"+pkg[2:])
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", pkg, err)
			return 1
		}
	}
	code := m.Run()
	fmt.Printf("faults: %d faults injected, %d sessions, %d entries, %d violations (FAULTS_SCALE=%d)\n",
		counts.faults.Load(), counts.sessions.Load(), counts.entries.Load(), counts.violations.Load(), scale())
	if counts.violations.Load() > 0 && code == 0 {
		code = 1
	}
	return code
}
