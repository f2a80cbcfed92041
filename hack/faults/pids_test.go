package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/transcript"
)

// pidsLimit is the pids limit the fork bomb runs under: room for aerie's
// threads and the session's commands, and far less than the bomb wants.
const pidsLimit = 256

// TestForkBombPidsLimit runs a session whose tools run in a pids cgroup
// of pidsLimit tasks, and whose first call's command is a fork bomb that
// hits the limit. The bomb must be torn down with its call and the
// session go on: the next call runs and the session completes.
// Afterwards the cgroup holds no task: nothing of the session is left.
//
// aerie itself runs outside the cgroup: the Go runtime ends the process
// when it cannot start a thread, so a program cannot be made to survive a
// limit its tools exhaust. (In a pod, whose pids limit holds both
// containers, a bomb can so end the attempt; the controller's retry
// resumes it.) Every bash of the session enters the cgroup first, through
// a bash of the test's own first in PATH.
func TestForkBombPidsLimit(t *testing.T) {
	t.Parallel()
	cg := newPidsCgroup(t, pidsLimit)
	e := newEnv(t, "")
	real, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	testenv.WriteFile(t, filepath.Join(bin, "bash"),
		"#!/bin/sh\necho $$ > "+cg.procs()+" && exec "+real+" \"$@\"\n", 0o755)
	e.extraEnv = append(e.extraEnv, "PATH="+bin+":"+os.Getenv("PATH"))
	bomb := "echo bomb >> steps.log; b() { b | b & }; b; sleep 5; echo bombed"
	args, _ := json.Marshal(map[string]any{"command": bomb})
	after, _ := json.Marshal(map[string]any{"command": "echo after >> steps.log; echo $$ >> pids.log"})
	s := e.scripted(t, "pidsbomb",
		testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "bomb", Name: "bash", Arguments: string(args)}}},
		testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "after", Name: "bash", Arguments: string(after)}}},
		done())
	counts.faults.Add(1)
	out := s.run(3 * time.Minute)
	hit := cg.limitHits()
	t.Logf("exit %d in %v under pids.max %d: the limit refused %d forks, peak %s tasks: %s",
		out.code, out.took.Round(time.Millisecond), pidsLimit, hit, cg.read("pids.peak"), lastLine(out.stderr))
	if hit == 0 {
		t.Errorf("the fork bomb never hit the pids limit")
	}
	if out.code != 0 {
		violation(t, "a fork bomb under a pids limit: exit %d; stderr:\n%s", out.code, tail(out.stderr))
	}
	if b, _ := os.ReadFile(filepath.Join(s.ws, "steps.log")); string(b) != "bomb\nafter\n" {
		violation(t, "a fork bomb under a pids limit: the commands that ran were %q, want the bomb's and the next call's once each", b)
	}
	for _, en := range s.checkStored() {
		if r, ok := en.Payload.(transcript.ToolResult); ok && r.CallID == "bomb" {
			b, _ := json.Marshal(r.Content)
			t.Logf("the bomb's result (error %v): %.300s", r.IsError, b)
		}
	}
	s.checkAnswered()
	s.checkProcesses()
	counts.entries.Add(int64(len(s.seen)))
	if n := cg.read("pids.current"); n != "0" {
		violation(t, "a fork bomb under a pids limit: %s tasks left in its cgroup after the session ended", n)
	}
}

// pidsCgroup is a pids cgroup of the test's own.
type pidsCgroup struct {
	t   *testing.T
	dir string
}

// newPidsCgroup makes a pids cgroup limited to limit tasks, removed when
// the test ends: under the cgroup v1 pids controller at
// /sys/fs/cgroup/pids, or else on cgroup v2 at /sys/fs/cgroup when the
// root delegates the pids controller. Either needs root.
func newPidsCgroup(t *testing.T, limit int) *pidsCgroup {
	t.Helper()
	name := fmt.Sprintf("aerie-faults-%d", os.Getpid())
	var dir string
	switch {
	case exists("/sys/fs/cgroup/pids/cgroup.procs"):
		dir = filepath.Join("/sys/fs/cgroup/pids", name)
	case strings.Contains(readString("/sys/fs/cgroup/cgroup.subtree_control"), "pids"):
		dir = filepath.Join("/sys/fs/cgroup", name)
	default:
		missing(t, "no pids cgroup controller: neither cgroup v1's /sys/fs/cgroup/pids nor a cgroup v2 root delegating pids")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		missing(t, fmt.Sprintf("cannot make a pids cgroup (%v)", err))
	}
	cg := &pidsCgroup{t: t, dir: dir}
	t.Cleanup(func() {
		// Empty once aerie and everything it started are gone.
		var err error
		for range 50 {
			if err = os.Remove(dir); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		violation(t, "remove the pids cgroup %s: %v (%s tasks in it)", dir, err, cg.read("pids.current"))
	})
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	return cg
}

// missing ends a test that needs a pids cgroup the machine does not give
// it: a failure under CI, where the suite must run whole, a skip
// elsewhere.
func missing(t *testing.T, why string) {
	t.Helper()
	const how = "run the fault suite as root on a machine with the pids cgroup controller (cgroup v1, or v2 with pids in the root's cgroup.subtree_control)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; %s", why, how)
	}
	t.Skipf("%s; %s", why, how)
}

func (cg *pidsCgroup) procs() string { return filepath.Join(cg.dir, "cgroup.procs") }

// read returns a file of the cgroup, trimmed.
func (cg *pidsCgroup) read(file string) string {
	return strings.TrimSpace(readString(filepath.Join(cg.dir, file)))
}

// limitHits is how many forks the limit refused (pids.events' max).
func (cg *pidsCgroup) limitHits() int {
	for _, line := range strings.Split(cg.read("pids.events"), "\n") {
		if v, ok := strings.CutPrefix(line, "max "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
