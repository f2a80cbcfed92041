package executor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/process"
)

// run starts c, collects its output and waits for it.
func run(t *testing.T, e Commands, c Command) (Exit, string, string) {
	t.Helper()
	p, err := e.Start(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := readAll(p.Stdout()), readAll(p.Stderr())
	exit, err := p.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return exit, within(t, 10*time.Second, "end of stdout", stdout), within(t, 10*time.Second, "end of stderr", stderr)
}

// The tests of this file run against a Local and against a Remote served
// that Local over a unix socket: both must behave the same.

func TestStartWait(t *testing.T) {
	t.Parallel()
	each(t, true, testStartWait)
}

func testStartWait(t *testing.T, kind string) {
	e, l := newExecutor(t, kind, Options{})
	if err := os.Mkdir(filepath.Join(l.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		cmd            Command
		exit           Exit
		stdout, stderr string
	}{
		{"argv", Command{Argv: []string{"echo", "a b"}}, Exit{}, "a b\n", ""},
		{"exit status", Command{Script: "echo out; echo err >&2; exit 3"}, Exit{Code: 3}, "out\n", "err\n"},
		{"combined output", Command{Script: "echo out; echo err >&2; echo out2", CombinedOutput: true}, Exit{}, "out\nerr\nout2\n", ""},
		{"killed", Command{Script: "kill -KILL $$"}, Exit{Code: -1, Signal: "SIGKILL"}, "", ""},
		{"bash", Command{Script: "echo ${BASH_VERSION:+bash}", Shell: "bash"}, Exit{}, "bash\n", ""},
		{"relative dir", Command{Script: "pwd", Dir: "sub"}, Exit{}, filepath.Join(l.dir, "sub") + "\n", ""},
		{"explicit env", Command{Script: `echo "$FOO"`, Env: []string{"FOO=bar"}}, Exit{}, "bar\n", ""},
		{"no stdin", Command{Script: "cat; echo done"}, Exit{}, "done\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exit, stdout, stderr := run(t, e, tt.cmd)
			if diff := cmp.Diff(tt.exit, exit, cmpopts.IgnoreFields(Exit{}, "Duration")); diff != "" {
				t.Errorf("exit mismatch (-want +got):\n%s", diff)
			}
			if stdout != tt.stdout || stderr != tt.stderr {
				t.Errorf("output %q, %q; want %q, %q", stdout, stderr, tt.stdout, tt.stderr)
			}
		})
	}
}

func TestStartRefuses(t *testing.T) {
	t.Parallel()
	each(t, true, testStartRefuses)
}

func testStartRefuses(t *testing.T, kind string) {
	e, _ := newExecutor(t, kind, Options{})
	for name, c := range map[string]Command{
		"nothing":         {},
		"argv and script": {Argv: []string{"true"}, Script: "true"},
		"empty program":   {Argv: []string{""}},
		"unknown program": {Argv: []string{"aerie-no-such-program"}},
	} {
		if p, err := e.Start(t.Context(), c); err == nil {
			t.Errorf("%s: started %s", name, p.ID())
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.Start(ctx, Command{Argv: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("start with a done context: %v", err)
	}
}

func TestStdin(t *testing.T) {
	t.Parallel()
	each(t, true, testStdin)
}

func testStdin(t *testing.T, kind string) {
	e, _ := newExecutor(t, kind, Options{})
	p, err := e.Start(t.Context(), Command{Argv: []string{"tr", "a-z", "A-Z"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	out := readAll(p.Stdout())
	if _, err := io.WriteString(p.Stdin(), "hello\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	if got := within(t, 10*time.Second, "output", out); got != "HELLO\n" {
		t.Errorf("output %q", got)
	}
	if exit, err := p.Wait(t.Context()); err != nil || exit.Code != 0 {
		t.Errorf("Wait = %+v, %v", exit, err)
	}
}

// TestDefaultEnvironmentHasNoSecrets: a command given no environment gets
// the executor's allow-listed variables, and none of the runner's
// secrets. Not parallel: it sets the test process's environment.
func TestDefaultEnvironmentHasNoSecrets(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("DATABASE_URL", "postgres://u:secret@db/aerie")
	t.Setenv("AERIE_DATABASE_URL", "postgres://u:secret@db/aerie")
	t.Setenv("LC_ALL", "C.UTF-8")
	each(t, false, func(t *testing.T, kind string) {
		e, _ := newExecutor(t, kind, Options{})
		_, out, _ := run(t, e, Command{Argv: []string{"env"}})
		if strings.Contains(out, "secret") {
			t.Errorf("a secret reached the command:\n%s", out)
		}
		for _, want := range []string{"PATH=", "LC_ALL=C.UTF-8", process.MarkerEnv + "="} {
			if !strings.Contains(out, want) {
				t.Errorf("environment lacks %s:\n%s", want, out)
			}
		}
	})
}

// escapingScript starts a member that holds stdout open, a member that
// ignores SIGTERM, and a child that escapes the group with setsid,
// ignores SIGTERM and keeps forking.
const escapingScript = `
sleep 1000 &
echo member $!
sh -c 'trap "" TERM; echo stubborn $$; exec sleep 1000' &
setsid sh -c 'trap "" TERM; echo escaped $$; while :; do sleep 0.05; done' &
wait
`

// TestTeardownLeavesNothing is the executor's central promise: after a
// teardown no process of the group or its descendants is alive, not even
// as a zombie, and Wait and the output readers return. Not parallel: it
// checks that this process has no zombie children at all.
func TestTeardownLeavesNothing(t *testing.T) {
	each(t, false, testTeardownLeavesNothing)
}

func testTeardownLeavesNothing(t *testing.T, kind string) {
	e, _ := newExecutor(t, kind, Options{Grace: 100 * time.Millisecond})
	p, err := e.Start(t.Context(), Command{Script: escapingScript})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(p.Stdout())
	ps := reported(t, sc, "member", "stubborn", "escaped")
	rest := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(rest)
	}()
	leader := proc{p.Info().PID, p.Info().Birth.StartTime}
	ps["leader"] = leader

	rep, err := e.Teardown(t.Context(), p.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != process.Terminated {
		t.Errorf("teardown status %s", rep.Status)
	}
	if !slices.Contains(rep.Sent, process.Sent{PID: ps["escaped"].pid, Signal: "SIGKILL", Escaped: true}) {
		t.Errorf("the escaped process was not killed: %+v", rep.Sent)
	}
	exit, err := p.Wait(t.Context())
	if err != nil || !exit.TornDown || exit.Signal != "SIGTERM" {
		t.Errorf("Wait = %+v, %v; want torn down by SIGTERM", exit, err)
	}
	within(t, 10*time.Second, "end of stdout", rest)

	testenv.Eventually(t, 10*time.Second, "every process of the group is gone from /proc", func() bool {
		for _, pr := range ps {
			if pr.present() {
				return false
			}
		}
		return true
	})
	testenv.Eventually(t, 10*time.Second, "no zombie child is left", func() bool { return len(zombieChildren()) == 0 })
	if infos, err := e.List(t.Context()); err != nil || len(infos) > 0 {
		t.Errorf("List = %+v, %v; want nothing", infos, err)
	}
}

// TestContextTimeoutTearsDownGroup: a foreground command's deadline ends
// its whole group, not only the leader.
func TestContextTimeoutTearsDownGroup(t *testing.T) {
	t.Parallel()
	each(t, true, testContextTimeoutTearsDownGroup)
}

func testContextTimeoutTearsDownGroup(t *testing.T, kind string) {
	e, _ := newExecutor(t, kind, Options{Grace: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	p, err := e.Start(ctx, Command{Script: "sleep 1000 & echo member $!; sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	ps := reported(t, bufio.NewScanner(p.Stdout()), "member")
	exit, err := p.Wait(t.Context())
	if err != nil || !exit.TornDown || exit.Signal != "SIGTERM" {
		t.Errorf("Wait = %+v, %v; want torn down by SIGTERM", exit, err)
	}
	testenv.Eventually(t, 10*time.Second, "the member is gone", func() bool { return !ps["member"].present() })
	testenv.Eventually(t, 10*time.Second, "the group is no longer listed", func() bool {
		infos, _ := e.List(t.Context())
		return len(infos) == 0
	})
}

// TestLeftBehindChild: a command that exits leaving a child which holds
// its stdout returns at once; its output ends after OutputDelay; the
// child stays listed until the command's context ends, which ends it.
func TestLeftBehindChild(t *testing.T) {
	t.Parallel()
	each(t, true, testLeftBehindChild)
}

func testLeftBehindChild(t *testing.T, kind string) {
	e, _ := newExecutor(t, kind, Options{Grace: 100 * time.Millisecond, OutputDelay: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p, err := e.Start(ctx, Command{Script: "sleep 1000 & echo member $!"})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(p.Stdout())
	ps := reported(t, sc, "member")
	exit, err := p.Wait(t.Context())
	if err != nil || exit.Code != 0 || exit.TornDown {
		t.Errorf("Wait = %+v, %v; want a plain exit", exit, err)
	}
	rest := make(chan bool)
	go func() { rest <- sc.Scan() }()
	if more := within(t, 10*time.Second, "end of stdout", rest); more {
		t.Errorf("unexpected output %q", sc.Text())
	}

	infos, err := e.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != p.ID() || !infos[0].Exited {
		t.Errorf("List = %+v, want the group, its leader exited", infos)
	}
	if !ps["member"].present() {
		t.Fatal("the member is gone before the context ended")
	}
	cancel()
	testenv.Eventually(t, 10*time.Second, "the member is gone", func() bool { return !ps["member"].present() })
	testenv.Eventually(t, 10*time.Second, "the group is no longer listed", func() bool {
		infos, _ := e.List(t.Context())
		return len(infos) == 0
	})
}

func TestSignal(t *testing.T) {
	t.Parallel()
	each(t, true, testSignal)
}

func testSignal(t *testing.T, kind string) {
	e, _ := newExecutor(t, kind, Options{})
	p, err := e.Start(t.Context(), Command{Script: `trap 'echo interrupted; exit 0' INT; echo ready 0; while :; do sleep 0.05; done`})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(p.Stdout())
	if !sc.Scan() || sc.Text() != "ready 0" {
		t.Fatalf("script said %q", sc.Text())
	}
	if err := e.Signal(t.Context(), p.ID(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if !sc.Scan() || sc.Text() != "interrupted" {
		t.Errorf("script said %q after SIGINT", sc.Text())
	}
	if exit, err := p.Wait(t.Context()); err != nil || exit.Code != 0 {
		t.Errorf("Wait = %+v, %v", exit, err)
	}
	if err := e.Signal(t.Context(), "nope", syscall.SIGINT); !errors.Is(err, ErrNotFound) {
		t.Errorf("signal to an unknown id: %v", err)
	}
}

func TestWaitContext(t *testing.T) {
	t.Parallel()
	each(t, true, testWaitContext)
}

func testWaitContext(t *testing.T, kind string) {
	e, _ := newExecutor(t, kind, Options{})
	p, err := e.Start(t.Context(), Command{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait = %v, want the wait's deadline", err)
	}
	if infos, _ := e.List(t.Context()); len(infos) != 1 || infos[0].Exited {
		t.Errorf("the command should still run: %+v", infos)
	}
}

func TestTeardownAllAndClose(t *testing.T) {
	t.Parallel()
	each(t, true, testTeardownAllAndClose)
}

// testTeardownAllAndClose: Close tears down every group, and a Remote's
// Close waits for its server to have done so.
func testTeardownAllAndClose(t *testing.T, kind string) {
	e, l := newExecutor(t, kind, Options{Grace: 100 * time.Millisecond})
	var leaders []proc
	for _, script := range []string{"sleep 1000", "trap '' TERM; sleep 1000", escapingScript} {
		p, err := e.Start(t.Context(), Command{Script: script})
		if err != nil {
			t.Fatal(err)
		}
		leaders = append(leaders, proc{p.Info().PID, p.Info().Birth.StartTime})
	}
	if err := e.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "every leader is reaped", func() bool {
		for _, pr := range leaders {
			if pr.present() {
				return false
			}
		}
		return true
	})
	if infos, err := l.List(t.Context()); err != nil || len(infos) > 0 {
		t.Errorf("List = %+v, %v; want nothing", infos, err)
	}
	if _, err := e.Start(t.Context(), Command{Argv: []string{"true"}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want %v", err, ErrClosed)
	}
}

// TestTeardownAll: TeardownAll ends every group and reports each.
func TestTeardownAll(t *testing.T) {
	t.Parallel()
	each(t, true, func(t *testing.T, kind string) {
		e, _ := newExecutor(t, kind, Options{Grace: 100 * time.Millisecond})
		var ps []Process
		for range 3 {
			p, err := e.Start(t.Context(), Command{Script: "trap '' TERM; echo ready; sleep 1000"})
			if err != nil {
				t.Fatal(err)
			}
			// SIGTERM before the trap would end it.
			if line, _ := bufio.NewReader(p.Stdout()).ReadString('\n'); line != "ready\n" {
				t.Fatalf("script said %q", line)
			}
			ps = append(ps, p)
		}
		reps, err := e.TeardownAll(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(reps) != len(ps) {
			t.Errorf("TeardownAll reported %d groups, want %d: %+v", len(reps), len(ps), reps)
		}
		for _, p := range ps {
			if exit, err := p.Wait(t.Context()); err != nil || !exit.TornDown || exit.Signal != "SIGKILL" {
				t.Errorf("Wait = %+v, %v; want torn down by SIGKILL", exit, err)
			}
		}
		if infos, err := e.List(t.Context()); err != nil || len(infos) > 0 {
			t.Errorf("List = %+v, %v; want nothing", infos, err)
		}
	})
}

// TestStdinClosedByCommand: writing to the standard input of a command
// that no longer reads it fails, as writing to a pipe does.
func TestStdinClosedByCommand(t *testing.T) {
	t.Parallel()
	each(t, true, func(t *testing.T, kind string) {
		e, _ := newExecutor(t, kind, Options{})
		p, err := e.Start(t.Context(), Command{Script: "exec 0<&-; echo closed; sleep 1000", Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		if line, _ := bufio.NewReader(p.Stdout()).ReadString('\n'); line != "closed\n" {
			t.Fatalf("script said %q", line)
		}
		// The first writes may still fill a pipe nobody reads; within a
		// few windows' worth, one must fail.
		chunk := make([]byte, 64<<10)
		var werr error
		for i := 0; i < 64 && werr == nil; i++ {
			_, werr = p.Stdin().Write(chunk)
		}
		if !errors.Is(werr, syscall.EPIPE) {
			t.Errorf("write to a closed stdin: %v, want EPIPE", werr)
		}
	})
}

// TestStdoutClosed: closing Stdout discards the rest of the output; the
// command is never blocked by it.
func TestStdoutClosed(t *testing.T) {
	t.Parallel()
	each(t, true, func(t *testing.T, kind string) {
		e, _ := newExecutor(t, kind, Options{})
		p, err := e.Start(t.Context(), Command{Argv: []string{"head", "-c", "50000000", "/dev/zero"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Stdout().Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Stdout().Read(make([]byte, 1)); err == nil {
			t.Error("read after Close succeeded")
		}
		if exit, err := p.Wait(t.Context()); err != nil || exit.Code != 0 {
			t.Errorf("Wait = %+v, %v; want a plain exit", exit, err)
		}
	})
}

// TestConcurrentCommands runs commands side by side, each fed its own
// input, under the race detector.
func TestConcurrentCommands(t *testing.T) {
	t.Parallel()
	each(t, true, func(t *testing.T, kind string) {
		e, _ := newExecutor(t, kind, Options{})
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				p, err := e.Start(t.Context(), Command{Script: "echo start $0; cat; echo end >&2", Stdin: true})
				if err != nil {
					t.Error(err)
					return
				}
				stdout, stderr := readAll(p.Stdout()), readAll(p.Stderr())
				want := strings.Repeat(fmt.Sprintf("line %d\n", i), 1000)
				if _, err := io.WriteString(p.Stdin(), want); err != nil {
					t.Error(err)
				}
				if err := p.Stdin().Close(); err != nil {
					t.Error(err)
				}
				if exit, err := p.Wait(t.Context()); err != nil || exit.Code != 0 {
					t.Errorf("Wait = %+v, %v", exit, err)
				}
				if got := <-stdout; got != "start sh\n"+want {
					t.Errorf("command %d: %d bytes of output, want %d", i, len(got), len(want)+9)
				}
				if got := <-stderr; got != "end\n" {
					t.Errorf("command %d: stderr %q", i, got)
				}
				if _, err := e.List(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	})
}

func BenchmarkStartWait(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			e, _ := newExecutor(b, kind, Options{})
			ctx := b.Context()
			defer testenv.ReportCPU(b)()
			for b.Loop() {
				p, err := e.Start(ctx, Command{Argv: []string{"true"}})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTeardown10 measures the teardown of a group of ten processes:
// a shell and nine children.
func BenchmarkTeardown10(b *testing.B) {
	l := newLocal(b, Options{})
	ctx := b.Context()
	script := strings.Repeat("sleep 1000 &\n", 9) + "echo ready; wait"
	for b.Loop() {
		b.StopTimer()
		p, err := l.Start(ctx, Command{Script: script})
		if err != nil {
			b.Fatal(err)
		}
		if line, _ := bufio.NewReader(p.Stdout()).ReadString('\n'); line != "ready\n" {
			b.Fatalf("script said %q", line)
		}
		b.StartTimer()
		if rep, err := l.Teardown(ctx, p.ID()); err != nil || rep.Status != process.Terminated {
			b.Fatalf("Teardown = %+v, %v", rep, err)
		}
	}
}

// TestOutputSurvivesTheCut: what a command wrote before it exited reaches
// the reader even when the pipes are cut at once, before the copier got
// to it (as on a loaded machine).
func TestOutputSurvivesTheCut(t *testing.T) {
	t.Parallel()
	each(t, true, func(t *testing.T, kind string) {
		e, _ := newExecutor(t, kind, Options{OutputDelay: time.Nanosecond})
		for range 20 {
			exit, stdout, stderr := run(t, e, Command{Script: "head -c 60000 /dev/zero; echo end >&2"})
			if exit.Code != 0 || len(stdout) != 60000 || stderr != "end\n" {
				t.Fatalf("exit %+v, %d bytes of stdout, stderr %q; want 60000 bytes and end", exit, len(stdout), stderr)
			}
		}
	})
}
