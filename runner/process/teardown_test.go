package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// These tests run without a child subreaper, as `aerie process terminate`
// does: orphans go to init, and only the marker leads Teardown to them.
// (Init may leave their zombies, so "gone" here means dead; the executor's
// tests, which run under a Reaper, also check that nothing is left.)

// stubbornScript starts a group with a member that holds stdout, a member
// that ignores SIGTERM, and a child that escapes with setsid, ignores
// SIGTERM and keeps forking.
const stubbornScript = `
sleep 1000 &
echo member $!
sh -c 'trap "" TERM; echo stubborn $$; exec sleep 1000' &
setsid sh -c 'trap "" TERM; echo escaped $$; while :; do sleep 0.05; done' &
wait
`

func TestTeardownSweepsEscapedDescendants(t *testing.T) {
	t.Parallel()
	s := startScript(t, stubbornScript)
	ps := s.expect(t, "member", "stubborn", "escaped")
	if st, _ := readStat(ps["escaped"].pid); st.pgid == s.group.PGID {
		t.Fatalf("escaped process is still in group %d", st.pgid)
	}

	rep, err := Teardown(t.Context(), s.group, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != Terminated {
		t.Errorf("status %s, want %s", rep.Status, Terminated)
	}
	pg := s.group.PGID
	for _, want := range []Sent{
		{PID: pg, Group: true, Signal: "SIGTERM"},
		{PID: ps["escaped"].pid, Signal: "SIGTERM", Escaped: true},
		{PID: pg, Group: true, Signal: "SIGKILL"},
		{PID: ps["escaped"].pid, Signal: "SIGKILL", Escaped: true},
	} {
		if !slices.Contains(rep.Sent, want) {
			t.Errorf("report lacks %+v; sent %+v", want, rep.Sent)
		}
	}
	if err := s.wait(); err == nil {
		t.Error("leader exited 0 after teardown, want killed")
	}
	requireGone(t, ps)
	if left := markerCarriers(t, s.group.ID); len(left) > 0 {
		t.Errorf("processes %v of the group are still alive", left)
	}
}

// TestTeardownAfterLeaderReaped: the leader exited and was reaped, so its
// PID proves nothing; the member left in the group is recognised by its
// marker.
func TestTeardownAfterLeaderReaped(t *testing.T) {
	t.Parallel()
	s := startScript(t, `sleep 1000 & echo member $!`)
	ps := s.expect(t, "member")
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
	rep, err := Teardown(t.Context(), s.group, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := Report{ID: s.group.ID, PGID: s.group.PGID, Status: Terminated,
		Sent: []Sent{{PID: s.group.PGID, Group: true, Signal: "SIGTERM"}}}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Errorf("report mismatch (-want +got):\n%s", diff)
	}
	requireGone(t, ps)
}

func TestTeardownAlreadyExited(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	g, err := Start(cmd, NewID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AwaitExit(g.PID); err != nil {
		t.Fatal(err)
	}
	want := Report{ID: g.ID, PGID: g.PGID, Status: AlreadyExited}
	// Once as an unreaped zombie (verified, nothing alive), once reaped
	// (the PID is free, nothing in the group).
	for _, stage := range []string{"zombie", "reaped"} {
		rep, err := Teardown(t.Context(), g, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if diff := cmp.Diff(want, rep); diff != "" {
			t.Errorf("%s: report mismatch (-want +got):\n%s", stage, diff)
		}
		if stage == "zombie" {
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestTeardownIdentityMismatch points a Group at a live process that is
// not it (another start time; another marker) and checks that nothing is
// signalled.
func TestTeardownIdentityMismatch(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "1000")
	g, err := Start(cmd, NewID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	wrongStart := g
	wrongStart.Birth.StartTime--
	wrongID := g
	wrongID.ID = NewID()
	for name, bad := range map[string]Group{"start time": wrongStart, "marker": wrongID} {
		rep, err := Teardown(t.Context(), bad, 10*time.Millisecond)
		if !errors.Is(err, ErrIdentityMismatch) {
			t.Errorf("%s: error %v, want %v", name, err, ErrIdentityMismatch)
		}
		if rep.Status != IdentityMismatch || len(rep.Sent) > 0 {
			t.Errorf("%s: report %+v, want %s with nothing sent", name, rep, IdentityMismatch)
		}
		if status, err := Inspect(bad); status != IdentityMismatch || err == nil {
			t.Errorf("%s: Inspect = %s, %v; want %s", name, status, err, IdentityMismatch)
		}
	}
	if !alive(g.PID, g.Birth.StartTime) {
		t.Fatal("the process was signalled")
	}
}

// TestTeardownScrubbedMember: once the leader is reaped, a member that
// dropped its environment cannot prove it belongs to the group, and is
// left alone rather than risk signalling a reused group. (The executor
// keeps leaders unreaped until their group is empty, so it never gets
// here.)
func TestTeardownScrubbedMember(t *testing.T) {
	t.Parallel()
	s := startScript(t, `env -i sleep 1000 & echo member $!`)
	ps := s.expect(t, "member")
	t.Cleanup(func() { _ = unix.Kill(ps["member"].pid, unix.SIGKILL) })
	eventually(t, "the member execs sleep without the marker", func() bool {
		// Through sh's fork and env's exec the marker is there; an exec
		// in progress can read as an empty environment.
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ps["member"].pid))
		if err != nil || string(comm) != "sleep\n" {
			return false
		}
		_, found, err := readMarker(ps["member"].pid)
		return err == nil && !found
	})
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
	rep, err := Teardown(t.Context(), s.group, 10*time.Millisecond)
	if !errors.Is(err, ErrIdentityMismatch) || rep.Status != IdentityMismatch || len(rep.Sent) > 0 {
		t.Errorf("Teardown = %+v, %v; want %s with nothing sent", rep, err, IdentityMismatch)
	}
	if !alive(ps["member"].pid, ps["member"].start) {
		t.Error("the unverifiable member was signalled")
	}
}

// TestTeardownCanceledSkipsGrace: a done context means no grace: a group
// that ignores SIGTERM is killed at once rather than after a minute.
func TestTeardownCanceledSkipsGrace(t *testing.T) {
	t.Parallel()
	s := startScript(t, `trap "" TERM; echo leader $$; exec sleep 1000`)
	ps := s.expect(t, "leader")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rep, err := Teardown(ctx, s.group, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Sent, Sent{PID: s.group.PGID, Group: true, Signal: "SIGKILL"}) {
		t.Errorf("no SIGKILL sent: %+v", rep.Sent)
	}
	requireGone(t, ps)
}

func TestSignalGroup(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "1000")
	g, err := Start(cmd, NewID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := SignalGroup(g, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st, err := AwaitExit(g.PID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ExitStatus{Code: -1, Signal: syscall.SIGTERM}, st); diff != "" {
		t.Errorf("exit mismatch (-want +got):\n%s", diff)
	}
	if err := SignalGroup(g, syscall.SIGTERM); !errors.Is(err, ErrExited) {
		t.Errorf("signal to an exited group: %v, want %v", err, ErrExited)
	}
}

func TestSignalProcessChecksStartTime(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "1000")
	g, err := Start(cmd, NewID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if sent, err := signalProcess(g.PID, g.Birth.StartTime+1, unix.SIGKILL); sent || err != nil {
		t.Fatalf("signalProcess with the wrong start time = %v, %v; want false, nil", sent, err)
	}
	if !alive(g.PID, g.Birth.StartTime) {
		t.Fatal("the process was signalled")
	}
	if sent, err := signalProcess(g.PID, g.Birth.StartTime, unix.SIGKILL); !sent || err != nil {
		t.Fatalf("signalProcess = %v, %v; want true, nil", sent, err)
	}
	if st, err := AwaitExit(g.PID); err != nil || st.Signal != syscall.SIGKILL {
		t.Errorf("AwaitExit = %+v, %v; want killed by SIGKILL", st, err)
	}
}

func TestAwaitExitLeavesZombie(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "exit 3")
	g, err := Start(cmd, NewID())
	if err != nil {
		t.Fatal(err)
	}
	st, err := AwaitExit(g.PID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ExitStatus{Code: 3}, st); diff != "" {
		t.Errorf("exit mismatch (-want +got):\n%s", diff)
	}
	if z, err := readStat(g.PID); err != nil || z.state != 'Z' || z.start != g.Birth.StartTime {
		t.Errorf("after AwaitExit: %+v, %v; want the leader as a zombie", z, err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("Wait after AwaitExit = %v, want exit status 3", err)
	}
}
