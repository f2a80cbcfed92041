package executor

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/process"
)

// TestDetach: a detached group survives the end of its context,
// TeardownAll and Close, and process.Registry ends it later from its
// record; afterwards nothing is left, not even the leader's zombie. Not
// parallel: it checks that this process has no zombie children at all.
func TestDetach(t *testing.T) {
	l := newLocal(t, Options{Grace: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p, err := l.Start(ctx, Command{Script: "sleep 1000 & echo member $!; wait"})
	if err != nil {
		t.Fatal(err)
	}
	ps := reported(t, bufio.NewScanner(p.Stdout()), "member")
	ps["leader"] = proc{p.Info().PID, p.Info().Birth.StartTime}
	other, err := l.Start(t.Context(), Command{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}

	info, err := l.Detach(t.Context(), p.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != p.ID() || info.PID != p.Info().PID || info.Birth != p.Info().Birth || info.Exited {
		t.Errorf("Detach = %+v, want the running group %+v", info, p.Info())
	}
	if infos, _ := l.List(t.Context()); len(infos) != 1 || infos[0].ID != other.ID() {
		t.Errorf("List = %+v, want only the other group", infos)
	}
	for _, err := range []error{
		l.Signal(t.Context(), p.ID(), syscall.SIGTERM),
		func() error { _, err := l.Teardown(t.Context(), p.ID()); return err }(),
		func() error { _, err := l.Detach(t.Context(), p.ID()); return err }(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("acting on a detached group: %v, want %v", err, ErrNotFound)
		}
	}

	cancel()
	reps, err := l.TeardownAll(t.Context())
	if err != nil || len(reps) != 1 || reps[0].ID != other.ID() {
		t.Errorf("TeardownAll = %+v, %v; want the other group only", reps, err)
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for name, pr := range ps {
		if st, ok := readProcState(pr.pid); !ok || st.start != pr.start || st.state == 'Z' {
			t.Errorf("the detached %s did not survive Close: %+v, %v", name, st, ok)
		}
	}

	// The leader dies first, leaving the member: as nothing here will
	// signal the group any more, its zombie must not be kept (a Reaper
	// leaves registered children alone, so Local must reap it).
	if err := syscall.Kill(ps["leader"].pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the detached leader is reaped", func() bool { return !ps["leader"].present() })

	rec := info.Record("session-1")
	if rec.Group != info.Group || rec.Owner != "session-1" || rec.Dir != l.dir || !rec.StartedAt.Equal(info.StartedAt) ||
		rec.Command != `sh -c 'sleep 1000 & echo member $!; wait'` {
		t.Errorf("Record = %+v", rec)
	}
	reg := process.NewRegistry(t.TempDir())
	if err := reg.Register(rec); err != nil {
		t.Fatal(err)
	}
	if entries, err := reg.List(t.Context()); err != nil || len(entries) != 1 || entries[0].Status != process.Running {
		t.Errorf("registry List = %+v, %v; want the group running", entries, err)
	}
	res := reg.Terminate(t.Context(), rec.ID, 100*time.Millisecond)
	if res.Status != process.Terminated {
		t.Errorf("Terminate = %+v, want %s", res, process.Terminated)
	}
	testenv.Eventually(t, 10*time.Second, "the detached group is gone from /proc", func() bool { return !ps["member"].present() })
	testenv.Eventually(t, 10*time.Second, "no zombie child is left", func() bool { return len(zombieChildren()) == 0 })
}

// TestDetachAfterLeaderExit: detaching a group whose leader has exited
// reaps the leader's zombie at once (nothing here will signal the group
// any more), and the registry still recognises what is left by its
// marker. Not parallel: it checks for zombie children.
func TestDetachAfterLeaderExit(t *testing.T) {
	l := newLocal(t, Options{Grace: 100 * time.Millisecond, OutputDelay: 10 * time.Millisecond})
	p, err := l.Start(t.Context(), Command{Script: "sleep 1000 & echo member $!"})
	if err != nil {
		t.Fatal(err)
	}
	ps := reported(t, bufio.NewScanner(p.Stdout()), "member")
	leader := proc{p.Info().PID, p.Info().Birth.StartTime}
	if _, err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !leader.present() {
		t.Fatal("the exited leader should be kept as a zombie while its group lives")
	}
	info, err := l.Detach(t.Context(), p.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !info.Exited {
		t.Errorf("Detach = %+v, want the leader exited", info)
	}
	testenv.Eventually(t, 10*time.Second, "the leader's zombie is reaped", func() bool { return !leader.present() })
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !ps["member"].present() {
		t.Fatal("the member of the detached group did not survive Close")
	}
	reg := process.NewRegistry(t.TempDir())
	if err := reg.Register(info.Record("session-1")); err != nil {
		t.Fatal(err)
	}
	if res := reg.Terminate(t.Context(), info.ID, 100*time.Millisecond); res.Status != process.Terminated {
		t.Errorf("Terminate = %+v, want %s", res, process.Terminated)
	}
	testenv.Eventually(t, 10*time.Second, "the member is gone", func() bool { return !ps["member"].present() })
	testenv.Eventually(t, 10*time.Second, "no zombie child is left", func() bool { return len(zombieChildren()) == 0 })
}

// TestDetachRefused: only a group still owned and alive can be detached.
func TestDetachRefused(t *testing.T) {
	t.Parallel()
	l := newLocal(t, Options{Grace: 100 * time.Millisecond})
	if _, err := l.Detach(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("detach of an unknown id: %v", err)
	}
	done, err := l.Start(t.Context(), Command{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Detach(t.Context(), done.ID()); !errors.Is(err, ErrNotFound) {
		t.Errorf("detach of a finished group: %v", err)
	}
	torn, err := l.Start(t.Context(), Command{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Teardown(t.Context(), torn.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Detach(t.Context(), torn.ID()); !errors.Is(err, ErrNotFound) {
		t.Errorf("detach of a torn-down group: %v", err)
	}
}

// TestDetachRacesTeardownAll: a group is either detached, and then alive
// after TeardownAll, or torn down, never detached and killed.
func TestDetachRacesTeardownAll(t *testing.T) {
	t.Parallel()
	l := newLocal(t, Options{Grace: 50 * time.Millisecond})
	total, kept := 0, 0
	for range 10 {
		var ps []Process
		for range 4 {
			p, err := l.Start(t.Context(), Command{Argv: []string{"sleep", "1000"}})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			detached = make(map[string]ProcessInfo)
		)
		wg.Go(func() {
			if _, err := l.TeardownAll(t.Context()); err != nil {
				t.Error(err)
			}
		})
		for _, p := range ps {
			wg.Go(func() {
				if info, err := l.Detach(t.Context(), p.ID()); err == nil {
					mu.Lock()
					detached[p.ID()] = info
					mu.Unlock()
				} else if !errors.Is(err, ErrNotFound) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if _, err := l.TeardownAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			total++
			info, ok := detached[p.ID()]
			if !ok {
				if exit, err := p.Wait(t.Context()); err != nil || !exit.TornDown {
					t.Errorf("group %s neither detached nor torn down: %+v, %v", p.ID(), exit, err)
				}
				continue
			}
			kept++
			if st, ok := readProcState(info.PID); !ok || st.start != info.Birth.StartTime || st.state == 'Z' {
				t.Errorf("detached group %s was torn down: %+v, %v", info.ID, st, ok)
			}
			rep, err := process.Teardown(t.Context(), info.Group, 50*time.Millisecond)
			if err != nil || rep.Status != process.Terminated {
				t.Errorf("teardown of detached group %s: %+v, %v", info.ID, rep, err)
			}
		}
	}
	t.Logf("%d of %d groups detached before TeardownAll reached them", kept, total)
}

func TestShellJoin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"sleep", "10"}, "sleep 10"},
		{[]string{"sh", "-c", "echo $HOME; it's"}, `sh -c 'echo $HOME; it'\''s'`},
		{[]string{"printf", ""}, "printf ''"},
		{[]string{"/usr/bin/env", "A=b", "x@y:1,2+3%"}, "/usr/bin/env A=b x@y:1,2+3%"},
	}
	for _, tt := range tests {
		if got := shellJoin(tt.argv); got != tt.want {
			t.Errorf("shellJoin(%q) = %s, want %s", tt.argv, got, tt.want)
		}
	}
	if got := shellJoin(strings.Fields("a b")); got != "a b" {
		t.Errorf("shellJoin = %s", got)
	}
}
