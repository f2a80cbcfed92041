package process

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// reaperChildEnv, when set, makes TestReaperChild run for real: it is the
// body of TestReaper, run in a fresh copy of the test binary because being
// a child subreaper lasts for the life of the process and would change
// where every other test's orphans go.
const reaperChildEnv = "AERIE_TEST_REAPER_CHILD"

func TestReaper(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestReaperChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), reaperChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReaperChild") {
		t.Fatalf("subreaper test process: %v\n%s", err, out)
	}
}

func TestReaperChild(t *testing.T) {
	if os.Getenv(reaperChildEnv) == "" {
		t.Skip("run by TestReaper in its own process")
	}
	if err := SetChildSubreaper(); err != nil {
		t.Fatal(err)
	}
	if ok, err := IsChildSubreaper(); !ok || err != nil {
		t.Fatalf("IsChildSubreaper = %v, %v", ok, err)
	}
	r := NewReaper()
	self := os.Getpid()

	// An orphan: sh reports a background child and exits without waiting
	// for it. The child is reparented to this process, the subreaper.
	orphan := func(t *testing.T, after string) (int, *exec.Cmd) {
		cmd := exec.Command("sh", "-c", after+" & echo $!")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Start(cmd, NewID()); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		pid, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("sh printed %q", line)
		}
		if err := r.Wait(cmd); err != nil {
			t.Fatalf("the registered child lost its exit status: %v", err)
		}
		return pid, cmd
	}

	t.Run("one pass", func(t *testing.T) {
		// A registered child that has exited but not been waited for is
		// a zombie of this process too; a pass must leave it alone.
		mine := exec.Command("sh", "-c", "exit 7")
		g, err := r.Start(mine, NewID())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := AwaitExit(g.PID); err != nil {
			t.Fatal(err)
		}

		// Not `exec true`: a child that exits before sh does may be reaped
		// by sh itself, and then there is no orphan to see.
		pid, _ := orphan(t, "exec sleep 0.1")
		eventually(t, "the orphan becomes this process's zombie", func() bool {
			st, err := readStat(pid)
			return err == nil && st.ppid == self && st.state == 'Z'
		})
		reaped := r.Reap()
		found := false
		for _, p := range reaped {
			found = found || p == pid
		}
		if !found {
			t.Fatalf("Reap() = %v, want it to include the orphan %d", reaped, pid)
		}
		if _, err := readStat(pid); !os.IsNotExist(err) {
			t.Errorf("orphan %d still in /proc after reaping: %v", pid, err)
		}
		if err := r.Wait(mine); mine.ProcessState.ExitCode() != 7 {
			t.Errorf("registered child: Wait = %v, want exit status 7", err)
		}
	})

	t.Run("gone", func(t *testing.T) {
		// A group that left nothing: Gone can tell once its leader has
		// exited, not before.
		cmd := exec.Command("sh", "-c", "read line")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		g, err := r.Start(cmd, NewID())
		if err != nil {
			t.Fatal(err)
		}
		if r.Gone(g) {
			t.Error("Gone = true while the leader runs")
		}
		if err := stdin.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := AwaitExit(g.PID); err != nil {
			t.Fatal(err)
		}
		if !r.Gone(g) {
			t.Error("Gone = false for an exited group that left nothing")
		}
		if st, err := Inspect(g); st != AlreadyExited || err != nil {
			t.Errorf("Inspect = %s, %v; Gone must agree with it", st, err)
		}

		// A group whose leader left a process behind, in the group or
		// out of it, reparented to this process: Gone cannot tell.
		for _, src := range []string{"sleep 30 &", "setsid sleep 30 &"} {
			cmd := exec.Command("sh", "-c", src)
			g, err := r.Start(cmd, NewID())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := AwaitExit(g.PID); err != nil {
				t.Fatal(err)
			}
			if r.Gone(g) {
				t.Errorf("%q: Gone = true with a process left behind", src)
			}
			if st, err := Inspect(g); st != Running || err != nil {
				t.Errorf("%q: Inspect = %s, %v; want running", src, st, err)
			}
			if rep, err := Teardown(t.Context(), g, 10*time.Millisecond); err != nil || rep.Status != Terminated {
				t.Errorf("%q: Teardown = %+v, %v", src, rep, err)
			}
			eventually(t, "the leftover is reaped", func() bool { r.Reap(); return r.Gone(g) })
			if err := r.Wait(cmd); err != nil {
				t.Error(err)
			}
		}

		// A leader that left nothing behind: Gone can tell.
		done := exec.Command("true")
		g2, err := r.Start(done, NewID())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := AwaitExit(g2.PID); err != nil {
			t.Fatal(err)
		}
		if !r.Gone(g2) {
			t.Error("Gone = false for a group whose leader exited alone")
		}
		if err := r.Wait(done); err != nil {
			t.Error(err)
		}
		_ = r.Wait(cmd) // read fails at the end of its input: exit status 1
		if r.Gone(g) {
			t.Error("Gone = true once the leader is reaped: its PID could be anyone's")
		}
	})

	t.Run("loop", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()

		pid, _ := orphan(t, "exec sleep 0.2")
		if st, err := readStat(pid); err != nil || st.ppid != self {
			t.Fatalf("orphan %d: %+v, %v; want it reparented to %d", pid, st, err, self)
		}
		eventually(t, "the orphan is reaped", func() bool {
			_, err := readStat(pid)
			return os.IsNotExist(err)
		})

		// Registered children keep their exit statuses while passes
		// run continuously alongside.
		stop := make(chan struct{})
		var passes sync.WaitGroup
		passes.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					r.Reap()
				}
			}
		})
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				cmd := exec.Command("sh", "-c", "exit "+strconv.Itoa(i%3))
				if _, err := r.Start(cmd, NewID()); err != nil {
					t.Error(err)
					return
				}
				err := r.Wait(cmd)
				if code := cmd.ProcessState.ExitCode(); code != i%3 {
					t.Errorf("child %d: Wait = %v, exit code %d; want %d", i, err, code, i%3)
				}
			})
		}
		wg.Wait()
		close(stop)
		passes.Wait()
	})
}
