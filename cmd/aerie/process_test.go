package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/process"
)

// TestProcessCommands drives `aerie process` against real process groups: one that runs,
// one whose record lies about its leader's birth, and one that has already exited.
func TestProcessCommands(t *testing.T) {
	h := harness{home: t.TempDir()}
	reg := process.NewRegistry(h.home)

	live := startGroup(t, "sleep", "300")
	impostor := startGroup(t, "sleep", "300")
	forged := impostor
	forged.ID = process.NewID()
	forged.Birth.StartTime++ // the PID is real, the identity is not: never signal it
	for _, rec := range []process.Record{
		{Group: live, Command: "sleep 300", Dir: h.home, Owner: "test", StartedAt: time.Now()},
		{Group: forged, Command: "sleep 300", Dir: h.home, Owner: "test", StartedAt: time.Now()},
	} {
		if err := reg.Register(rec); err != nil {
			t.Fatal(err)
		}
	}

	r := h.aerie(t, "process", "list", "--json")
	if r.code != 0 {
		t.Fatalf("process list: exit %d: %v\n%s", r.code, r.err, r.stderr)
	}
	var listed struct {
		Processes []process.Entry `json:"processes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil {
		t.Fatalf("process list --json: %v\n%s", err, r.stdout)
	}
	if len(listed.Processes) != 2 {
		t.Fatalf("process list shows %d groups, want 2:\n%s", len(listed.Processes), r.stdout)
	}

	r = h.aerie(t, "process", "terminate", forged.ID, "--json")
	if r.code != 1 || !strings.Contains(r.stdout, string(process.IdentityMismatch)) {
		t.Errorf("terminate of a forged record: exit %d, output %s; want exit 1 and %s", r.code, r.stdout, process.IdentityMismatch)
	}
	if err := syscall.Kill(impostor.PID, 0); err != nil {
		t.Errorf("the process behind a forged record was signalled: %v", err)
	}

	r = h.aerie(t, "process", "terminate", live.ID, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, string(process.Terminated)) {
		t.Errorf("terminate: exit %d, output %s; want exit 0 and %s", r.code, r.stdout, process.Terminated)
	}
	if _, err := os.Stat(filepath.Join(reg.Dir(), live.ID+".json")); !os.IsNotExist(err) {
		t.Errorf("record of a terminated group is still there: %v", err)
	}

	// The forged record stays unresolved, so clean reports it and fails.
	r = h.aerie(t, "process", "clean", "--json")
	if r.code != 1 {
		t.Errorf("clean with an unresolvable record: exit %d, want 1\n%s", r.code, r.stdout)
	}
}

// startGroup starts argv as its own process group, killed and reaped in cleanup.
func startGroup(t *testing.T, argv ...string) process.Group {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	g, err := process.Start(cmd, process.NewID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-g.PGID, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return g
}
