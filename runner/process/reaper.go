package process

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SetChildSubreaper makes this process a child subreaper
// (PR_SET_CHILD_SUBREAPER): orphans among its descendants are reparented
// to it instead of to init, so they stay visible to Teardown's walk of
// /proc and their zombies are reaped by a Reaper rather than by an init
// that, in a container, may never wait for them. The setting lasts for the
// life of the process; run a Reaper with it.
func SetChildSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set child subreaper: %w", err)
	}
	return nil
}

// IsChildSubreaper reports whether this process is a child subreaper.
func IsChildSubreaper() (bool, error) {
	var v int32
	_, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0)
	if errno != 0 {
		return false, fmt.Errorf("get child subreaper: %w", errno)
	}
	return v != 0, nil
}

// Reaper reaps the zombies of orphans reparented to this process, without
// stealing the exit status of the children that exec.Cmd.Wait is waiting
// for.
//
// A blanket wait4(-1) would reap those too, and their Wait would fail with
// ECHILD. So the Reaper keeps a registry of the children it owns: every
// child started through its Start is registered until its Wait returns,
// and a reaping pass waits only for specific zombie PIDs, found in /proc
// with this process as parent, that are not registered. A pass excludes
// Start (a read/write lock), so a child cannot exit and be reaped in the
// gap between fork and registration.
//
// The contract: while a Reaper runs, every child of the process must be
// started with its Start (or registered by it), which is why only the
// executor runs one. A child started directly with exec.Cmd.Start could
// lose its exit status to a pass.
//
// Every Start forks on one OS thread of the Reaper's own. The kernel lists
// a process's children per thread, and a pass and Gone run after nearly
// every command: with the forks on one thread, they read two children
// files (that thread's, and the main thread's, which receives the orphans
// reparented to a child subreaper) instead of one per thread of the Go
// runtime, whose number grows with every blocking system call.
type Reaper struct {
	// starting is held for reading by Start and for writing by a pass.
	starting sync.RWMutex
	mu       sync.Mutex
	owned    map[int]int // pid → registrations; a PID can be reused once waited for
	// subreaper caches that this process is a child subreaper, for Gone.
	subreaper atomic.Bool
	// forks carries each Start to the forking thread, forker its thread id.
	forks  chan func()
	forker int
	// threads counts, by thread, the children StartLocked forked there
	// that are not waited for yet; forkedBy is the thread of each child.
	threads  map[int]int
	forkedBy map[int]int
}

// NewReaper returns a Reaper with nothing registered, and its forking
// thread. It reaps only in Run or Reap.
func NewReaper() *Reaper {
	r := &Reaper{owned: map[int]int{}, forks: make(chan func()), threads: map[int]int{}, forkedBy: map[int]int{}}
	tid := make(chan int)
	go r.fork(tid)
	r.forker = <-tid
	return r
}

// fork runs the Reaper's Starts on a thread of their own. The goroutine
// never returns, so the thread is never unlocked and never exits: its
// children stay on its list, and a child's Pdeathsig, which follows the
// thread that forked it, is never sent early.
func (r *Reaper) fork(tid chan<- int) {
	runtime.LockOSThread()
	tid <- unix.Gettid()
	for f := range r.forks {
		f()
	}
}

// Start starts cmd as Start does and registers the child, so that a pass
// leaves it to cmd's Wait. The caller must call r.Wait(cmd), not cmd.Wait.
func (r *Reaper) Start(cmd *exec.Cmd, id string) (Group, error) {
	r.starting.RLock()
	defer r.starting.RUnlock()
	var (
		g    Group
		err  error
		done = make(chan struct{})
	)
	r.forks <- func() { g, err = Start(cmd, id); close(done) }
	<-done
	if err != nil {
		return g, err
	}
	r.register(g.PID, r.forker)
	return g, nil
}

// StartLocked is Start on the calling thread instead of the forking one,
// for a child that must inherit what the thread alone has (a mount
// namespace it entered, say). The caller must have locked its goroutine to
// the thread (runtime.LockOSThread) and keep it until r.Wait(cmd) returns:
// the thread's children file is read with the forking thread's meanwhile.
func (r *Reaper) StartLocked(cmd *exec.Cmd, id string) (Group, error) {
	r.starting.RLock()
	defer r.starting.RUnlock()
	g, err := Start(cmd, id)
	if err != nil {
		return g, err
	}
	r.register(g.PID, unix.Gettid())
	return g, nil
}

// register records the child pid, forked by thread tid.
func (r *Reaper) register(pid, tid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owned[pid]++
	r.forkedBy[pid] = tid
	if tid != r.forker {
		r.threads[tid]++
	}
}

// Wait waits for cmd, started by r.Start or r.StartLocked, and unregisters
// its PID.
func (r *Reaper) Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	pid := cmd.Process.Pid
	r.mu.Lock()
	if r.owned[pid]--; r.owned[pid] <= 0 {
		delete(r.owned, pid)
		if tid := r.forkedBy[pid]; tid != r.forker {
			if r.threads[tid]--; r.threads[tid] <= 0 {
				delete(r.threads, tid)
			}
		}
		delete(r.forkedBy, pid)
	}
	r.mu.Unlock()
	return err
}

// Subreap makes the calling process a child subreaper and runs a Reaper for it until stop
// is called; stop waits for the reaper to finish. This is how a process that runs other
// people's commands (the executor, and tests that check nothing is left behind) sets itself
// up: orphans of torn-down groups come back to it and are reaped, never left as zombies.
func Subreap() (r *Reaper, stop func(), err error) {
	if err := SetChildSubreaper(); err != nil {
		return nil, nil, err
	}
	r = NewReaper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	return r, func() { cancel(); <-done }, nil
}

// Run reaps until ctx is done: on every SIGCHLD, and once a second in case
// a signal was coalesced with one that a pass had already handled.
func (r *Reaper) Run(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r.Reap()
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		case <-tick.C:
		}
	}
}

// Reap makes one pass and returns the PIDs it reaped.
func (r *Reaper) Reap() []int {
	if !hasZombieChild() {
		return nil
	}
	r.starting.Lock()
	defer r.starting.Unlock()
	var reaped []int
	for _, pid := range r.zombies() {
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
			reaped = append(reaped, pid)
		}
	}
	return reaped
}

// zombies lists the children of this process that have exited and are not
// registered. The children's list is read from the children files of the
// forking and the main thread; only without them is all of /proc walked. The executor keeps the
// leaders it started as zombies on purpose, so a pass runs after nearly
// every command: it must not cost a walk of every process on the machine.
func (r *Reaper) zombies() []int {
	var pids []int
	kids, err := r.children()
	if err != nil {
		snap, err := takeSnapshot()
		if err != nil {
			return nil
		}
		self := os.Getpid()
		for pid, st := range snap.procs {
			if st.ppid == self && st.state == 'Z' && !r.owns(pid) {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	for _, pid := range kids {
		if r.owns(pid) {
			continue
		}
		if st, err := readStat(pid); err == nil && st.state == 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// children lists the children of this process that a pass and Gone must
// see: those forked by the forking thread and by the threads of
// StartLocked, which are all the children r started, and those of the main thread, where orphans are reparented
// (and the children of any thread that exits). Children that other
// threads started directly, against the contract, are not seen, so a pass
// can no longer steal their exit status either.
func (r *Reaper) children() ([]int, error) {
	r.mu.Lock()
	tids := make([]int, 0, 1+len(r.threads))
	tids = append(tids, r.forker)
	for tid := range r.threads {
		tids = append(tids, tid)
	}
	r.mu.Unlock()
	return threadChildren(tids...)
}

func (r *Reaper) owns(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owned[pid] > 0
}

// Gone reports whether it can tell, cheaply and for certain, that nothing
// of g is alive: g's leader is a child that r started and that has exited,
// this process is a child subreaper, and every child on the lists of the
// forking and the main thread is a leader that r started. False means only
// "not known": the caller then looks through /proc (Inspect, Teardown).
//
// Why that is enough: every process g started descends from its leader.
// Once the leader has exited, its descendants that lived on were
// reparented to the nearest child subreaper among their ancestors, this
// process (on its main thread's list) or one inside g's own tree, and so
// hang below a child of this process that r did not start. The leaders r
// did start head trees of their own groups, which no process of g can
// join; children other threads started never descended from g. Only a process that
// never descended from g and moved itself into g's process group with
// setpgid is not seen; the walk of /proc would count it as a member.
func (r *Reaper) Gone(g Group) bool {
	if !r.subreaper.Load() {
		ok, err := IsChildSubreaper()
		if err != nil || !ok {
			return false
		}
		r.subreaper.Store(true) // nothing here ever turns it off
	}
	// As in a pass, no child may be between its fork and its registration.
	r.starting.Lock()
	defer r.starting.Unlock()
	kids, err := r.children()
	if err != nil {
		return false
	}
	leader := false
	for _, pid := range kids {
		if !r.owns(pid) {
			return false
		}
		if pid == g.PID {
			st, err := readStat(pid)
			if err != nil || st.start != g.Birth.StartTime || !st.dead() {
				return false
			}
			leader = true
		}
	}
	return leader
}

// hasZombieChild peeks, without reaping (WNOWAIT), whether any child has
// exited, which spares a pass the scan of /proc after most SIGCHLDs.
func hasZombieChild() bool {
	var info childInfo
	err := unix.Waitid(unix.P_ALL, 0, (*unix.Siginfo)(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.pid != 0
}
