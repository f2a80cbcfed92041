package process

import (
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestAppendPIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "12 ", want: []int{12}},
		{in: "12 345 6789 ", want: []int{12, 345, 6789}},
		{in: "12 345", want: []int{12, 345}},
		{in: "1\n", want: []int{1}},
		{in: "4194304 ", want: []int{4194304}},
		{in: "12 x ", wantErr: true},
		{in: "-1 ", wantErr: true},
		{in: "1234567890 ", wantErr: true},
	}
	for _, tt := range tests {
		got, err := appendPIDs(nil, []byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("appendPIDs(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr {
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("appendPIDs(%q) (-want +got):\n%s", tt.in, diff)
			}
		}
	}
}

func FuzzAppendPIDs(f *testing.F) {
	for _, s := range []string{"", "1 ", "12 345 ", "7", "a", "99999999999 ", "1  2\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pids, err := appendPIDs([]int{-1}, b)
		if pids[0] != -1 {
			t.Fatalf("appendPIDs changed what it appends to: %v", pids)
		}
		if err != nil {
			return
		}
		for _, p := range pids[1:] {
			if p < 0 || p > 999_999_999 {
				t.Fatalf("appendPIDs(%q) = %v: out of range", b, pids)
			}
		}
	})
}

// TestThreadChildren starts children from several threads and finds each
// in the list of the threads named, and none once reaped.
func TestThreadChildren(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		cmds []*exec.Cmd
		tids []int
		wg   sync.WaitGroup
	)
	var locked sync.WaitGroup
	locked.Add(4)
	for range 4 {
		wg.Go(func() {
			// Each on a thread of its own, all locked at once: a child
			// is listed under the thread that forked it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			locked.Done()
			locked.Wait()
			cmd := exec.Command("sleep", "30")
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			cmds = append(cmds, cmd)
			tids = append(tids, unix.Gettid())
			mu.Unlock()
		})
	}
	wg.Wait()
	defer func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	kids, err := threadChildren(tids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if !slices.Contains(kids, cmd.Process.Pid) {
			t.Errorf("threadChildren(%v) = %v, missing child %d", tids, kids, cmd.Process.Pid)
		}
	}
	for _, cmd := range cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	if kids, err = threadChildren(tids...); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if slices.Contains(kids, cmd.Process.Pid) {
			t.Errorf("threadChildren(%v) = %v after reaping child %d", tids, kids, cmd.Process.Pid)
		}
	}
}

// TestReaperChildren: children started concurrently through a Reaper, from
// many goroutines, are all on the list it reads, though they came from
// threads that no longer run them.
func TestReaperChildren(t *testing.T) {
	t.Parallel()
	r := NewReaper()
	var (
		mu   sync.Mutex
		cmds []*exec.Cmd
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			runtime.LockOSThread() // a thread of its own, which Start must not fork on
			defer runtime.UnlockOSThread()
			cmd := exec.Command("sleep", "30")
			if _, err := r.Start(cmd, NewID()); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			cmds = append(cmds, cmd)
			mu.Unlock()
		})
	}
	wg.Wait()
	defer func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = r.Wait(cmd)
		}
	}()
	kids, err := r.children()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if !slices.Contains(kids, cmd.Process.Pid) {
			t.Errorf("children() = %v, missing child %d", kids, cmd.Process.Pid)
		}
	}
}

// TestGoneNeedsSubreaper: without being a child subreaper, orphans go to
// init, out of sight of this process's children, so Gone cannot tell.
func TestGoneNeedsSubreaper(t *testing.T) {
	t.Parallel()
	r := NewReaper()
	cmd := exec.Command("true")
	g, err := r.Start(cmd, NewID())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Wait(cmd); err != nil {
			t.Error(err)
		}
	}()
	if _, err := AwaitExit(g.PID); err != nil {
		t.Fatal(err)
	}
	if r.Gone(g) {
		t.Error("Gone = true in a process that is not a child subreaper")
	}
}

// TestReaperStartLocked: a child StartLocked forked on a locked thread of
// the caller's is on the list the Reaper reads until it is waited for,
// and that thread's list is dropped once it has no child left.
func TestReaperStartLocked(t *testing.T) {
	t.Parallel()
	r := NewReaper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command("sleep", "30")
		g, err := r.StartLocked(cmd, NewID())
		if err != nil {
			t.Error(err)
			return
		}
		if kids, err := r.children(); err != nil || !slices.Contains(kids, g.PID) {
			t.Errorf("children() = %v, %v; missing child %d", kids, err, g.PID)
		}
		_ = cmd.Process.Kill()
		_ = r.Wait(cmd)
		r.mu.Lock()
		left := len(r.threads) + len(r.forkedBy)
		r.mu.Unlock()
		if left != 0 {
			t.Errorf("%d thread or child records left after Wait", left)
		}
	}()
	<-done
}
