package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aerie-run/aerie/runner/process"
)

// DefaultOutputDelay is how long after a command exits its output pipes
// stay open for processes it left behind.
const DefaultOutputDelay = 250 * time.Millisecond

// leaderExitWait bounds how long a teardown waits for the leader it just
// killed to be seen exiting before it leaves the reaping for later.
const leaderExitWait = 5 * time.Second

// Options configure a Local executor. The zero value is usable.
type Options struct {
	// Reaper, when set, starts every command so that the Reaper leaves
	// its exit status alone; the process should then be a child subreaper
	// running Reaper.Run (as `aerie executor` is). Nil when the process
	// does not reap orphans.
	Reaper *process.Reaper
	// Grace is the time between SIGTERM and SIGKILL in a teardown;
	// process.DefaultGrace when zero.
	Grace time.Duration
	// OutputDelay is how long, after a command exits, Stdout and Stderr
	// wait for the pipes to reach end of file before the executor closes
	// them: a background child (`server &`) inherits the pipes and would
	// otherwise keep a reader waiting until it exits. DefaultOutputDelay
	// when zero.
	OutputDelay time.Duration
	// Logger receives what goes wrong where no caller is waiting: a
	// teardown triggered by a context. Nil discards.
	Logger *slog.Logger
	// Ledger, when set, records every group while it runs, so that the
	// groups of a runner killed outright are ended by the next sweep
	// (process.SweepLedgers) instead of outliving their session. The
	// caller closes it after Close.
	Ledger *process.Ledger
}

// Local runs commands as child processes of this process and file
// operations directly in the workspace directory.
//
// A command's leader is not reaped when it exits: Local learns its exit
// status with process.AwaitExit and keeps it as a zombie until nothing of
// its group is alive any more, or the group has been torn down. Until
// then the leader's PID, which is also the group id, cannot be reused, so
// verifying and signalling the group is free of races. A detached group
// (see Detach) is the exception: Local no longer signals it, so it reaps
// the leader as soon as it exits, as init would once this process is gone.
type Local struct {
	root *os.Root
	// dir is the workspace root, absolute and clean; real is dir with
	// symbolic links resolved. Absolute names under either are accepted.
	dir, real   string
	reaper      *process.Reaper
	grace       time.Duration
	outputDelay time.Duration
	log         *slog.Logger
	ledger      *process.Ledger

	// life is held for reading while a command starts and for writing
	// by Close, so no command starts unseen by Close's teardown.
	life   sync.RWMutex
	closed bool

	mu    sync.Mutex
	procs map[string]*localProcess
}

// NewLocal returns an executor for the workspace directory.
func NewLocal(workspace string, opts Options) (*Local, error) {
	dir, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	l := &Local{
		root:        root,
		dir:         dir,
		real:        real,
		reaper:      opts.Reaper,
		grace:       cmpOr(opts.Grace, process.DefaultGrace),
		outputDelay: cmpOr(opts.OutputDelay, DefaultOutputDelay),
		log:         opts.Logger,
		ledger:      opts.Ledger,
		procs:       make(map[string]*localProcess),
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Close tears down every group, refuses further commands, and releases
// the workspace.
func (l *Local) Close(ctx context.Context) error {
	l.life.Lock()
	l.closed = true
	l.life.Unlock()
	_, err := l.TeardownAll(ctx)
	return errors.Join(err, l.root.Close())
}

// localProcess is one command and its group.
type localProcess struct {
	id      string
	cmd     *exec.Cmd
	group   process.Group
	argv    []string
	dir     string
	started time.Time

	stdin          *os.File // nil without Command.Stdin
	stdout, stderr *output
	pipes          []*os.File // the parent's read ends, cut by cutOutput

	// exited is closed once the leader has exited and exit is set;
	// settled once supervise has then settled (or finished) p.
	exited  chan struct{}
	settled chan struct{}
	exit    Exit
	waitErr error
	// tornDown is set when a teardown starts.
	tornDown atomic.Bool
	// stop detaches the group from the context it was started with.
	stop func() bool

	teardownMu sync.Mutex // one teardown at a time
	finishOnce sync.Once
	finished   chan struct{}

	// detachMu orders Detach against supervise: whichever of the two
	// comes second sees what the first did and reaps the leader.
	detachMu   sync.Mutex
	detached   bool
	leaderDone bool // supervise has seen the leader exit
	// released is closed when the group is detached.
	released chan struct{}
}

func (p *localProcess) ID() string { return p.id }

func (p *localProcess) Info() ProcessInfo {
	info := ProcessInfo{Group: p.group, Argv: p.argv, Dir: p.dir, StartedAt: p.started}
	select {
	case <-p.exited:
		info.Exited = true
	default:
	}
	return info
}

func (p *localProcess) Stdin() io.WriteCloser {
	if p.stdin == nil {
		return nil // not a nil *os.File in a non-nil interface
	}
	return p.stdin
}

func (p *localProcess) Stdout() io.ReadCloser { return p.stdout }
func (p *localProcess) Stderr() io.ReadCloser { return p.stderr }

func (p *localProcess) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.exited:
		return p.exit, p.waitErr
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
}

// cutOutput ends the output pipes: their copiers take what the pipes
// hold and close them, and processes still writing get EPIPE. A deadline
// rather than a close, so that output a busy copier has not read yet is
// not lost with the pipe.
func (p *localProcess) cutOutput() {
	p.stdout.setCut()
	p.stderr.setCut()
	for _, f := range p.pipes {
		_ = f.SetReadDeadline(time.Now()) // fails only once the copier closed it
	}
}

// withPWD is env with PWD set to dir, as a shell sets it: pwd, and programs
// that take their directory from PWD, then name dir as given rather than
// the directory its symlinks resolve to. A layer's tools directory on a
// kubelet's ConfigMap volume is a symlink into a timestamped directory
// (..data/tools) that the next update of the ConfigMap removes.
func withPWD(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PWD=") {
			out = append(out, kv)
		}
	}
	if dir == "" {
		return out
	}
	return append(out, "PWD="+dir)
}

// Start implements Commands.
func (l *Local) Start(ctx context.Context, c Command) (Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	argv, err := c.argv()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = l.workdir(c.Dir)
	cmd.Env = c.Env
	if len(cmd.Env) == 0 {
		cmd.Env = Environ(os.Environ(), nil, nil)
	}
	cmd.Env = withPWD(cmd.Env, cmd.Dir)

	sio, err := openStdio(cmd, c)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}

	l.life.RLock()
	defer l.life.RUnlock()
	if l.closed {
		sio.closeChild()
		sio.closeOurs()
		return nil, ErrClosed
	}
	id := process.NewID()
	started := time.Now()
	var g process.Group
	if l.reaper != nil {
		g, err = l.reaper.Start(cmd, id)
	} else {
		g, err = process.Start(cmd, id)
	}
	sio.closeChild()
	if err != nil {
		sio.closeOurs()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	if l.ledger != nil {
		// The record is a safety net for a crash; a command is not refused
		// for want of it.
		if err := l.ledger.Add(g, shellJoin(argv), cmd.Dir, started); err != nil {
			l.log.Warn("record process group", "id", id, "error", err)
		}
	}

	p := &localProcess{
		id: id, cmd: cmd, group: g, argv: argv, dir: cmd.Dir, started: started,
		stdin: sio.inW, stdout: newOutput(), stderr: newOutput(),
		exited: make(chan struct{}), settled: make(chan struct{}),
		finished: make(chan struct{}), released: make(chan struct{}),
	}
	p.pipes = append(p.pipes, sio.outR)
	go copyOutput(p.stdout, sio.outR)
	if sio.errR != nil {
		p.pipes = append(p.pipes, sio.errR)
		go copyOutput(p.stderr, sio.errR)
	} else {
		p.stderr.end()
	}
	l.mu.Lock()
	l.procs[id] = p
	l.mu.Unlock()
	// The callback can run at once, on another goroutine; it starts with
	// teardown taking teardownMu, which orders it after this assignment.
	p.teardownMu.Lock()
	p.stop = context.AfterFunc(ctx, func() {
		// Cleanup must run to completion although ctx is done.
		if rep, err := l.teardown(context.WithoutCancel(ctx), p); err != nil {
			l.log.Error("tear down process group on context end",
				"id", p.id, "pgid", p.group.PGID, "status", rep.Status, "error", err)
		}
	})
	p.teardownMu.Unlock()
	go l.supervise(p)
	return p, nil
}

// stdio is a command's standard streams. The command writes straight
// into pipes of ours (exec passes an *os.File through, with no copying
// goroutine for Wait to wait on), so that a grandchild holding them open
// never delays Wait; copiers and the cut after OutputDelay deal with it.
type stdio struct {
	child      []*os.File // the command's ends, closed here once it started
	outR, errR *os.File   // errR is nil with CombinedOutput
	inW        *os.File   // nil without Command.Stdin, which means /dev/null
}

func openStdio(cmd *exec.Cmd, c Command) (_ *stdio, err error) {
	ps := &stdio{}
	defer func() {
		if err != nil {
			ps.closeChild()
			ps.closeOurs()
		}
	}()
	var outW, errW, inR *os.File
	if ps.outR, outW, err = os.Pipe(); err != nil {
		return nil, err
	}
	ps.child = append(ps.child, outW)
	cmd.Stdout, cmd.Stderr = outW, outW
	if !c.CombinedOutput {
		if ps.errR, errW, err = os.Pipe(); err != nil {
			return nil, err
		}
		ps.child = append(ps.child, errW)
		cmd.Stderr = errW
	}
	if c.Stdin {
		if inR, ps.inW, err = os.Pipe(); err != nil {
			return nil, err
		}
		ps.child = append(ps.child, inR)
		cmd.Stdin = inR
	}
	return ps, nil
}

func (ps *stdio) closeChild() {
	for _, f := range ps.child {
		_ = f.Close()
	}
}

func (ps *stdio) closeOurs() {
	for _, f := range []*os.File{ps.outR, ps.errR, ps.inW} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// workdir resolves a Command.Dir.
func (l *Local) workdir(dir string) string {
	switch {
	case dir == "":
		return l.dir
	case filepath.IsAbs(dir):
		return dir
	default:
		return filepath.Join(l.dir, dir)
	}
}

// supervise waits for the leader to exit, records how, and finishes the
// process if nothing of its group is left.
func (l *Local) supervise(p *localProcess) {
	defer close(p.settled)
	st, err := process.AwaitExit(p.group.PID)
	p.exit = Exit{Code: st.Code, Duration: time.Since(p.started), TornDown: p.tornDown.Load()}
	if st.Signal != 0 {
		p.exit.Signal = unix.SignalName(st.Signal)
	}
	p.waitErr = err
	close(p.exited)
	time.AfterFunc(l.outputDelay, p.cutOutput)
	p.detachMu.Lock()
	p.leaderDone = true
	detached := p.detached
	p.detachMu.Unlock()
	if err != nil || detached {
		// Not our child after all (something else reaped it), or no
		// longer ours to signal: there is no zombie to keep. A detached
		// leader must be reaped here, since a Reaper leaves the children
		// it registered to their Wait.
		l.finish(p)
		return
	}
	l.settle(p)
}

// settle finishes p if its leader has exited and nothing of its group is
// alive; a group whose leader left processes behind stays listed, and
// stays subject to its context, until they end or are torn down.
func (l *Local) settle(p *localProcess) {
	select {
	case <-p.exited:
	default:
		return
	}
	if l.gone(p) {
		l.finish(p)
		return
	}
	status, err := process.Inspect(p.group)
	switch {
	case status == process.AlreadyExited:
		l.finish(p)
	case err != nil:
		l.log.Error("inspect process group", "id", p.id, "pgid", p.group.PGID, "error", err)
	}
}

// gone reports whether p's leader has exited and the Reaper can tell that
// nothing else of its group lives (process.Reaper.Gone): then there is no
// need to walk /proc, which after every command would cost a read of every
// process on the machine. Without a Reaper, or when it cannot tell, the
// callers walk /proc (process.Inspect, process.Teardown).
func (l *Local) gone(p *localProcess) bool {
	select {
	case <-p.exited:
	default:
		return false
	}
	return l.reaper != nil && l.reaper.Gone(p.group)
}

// finish reaps the leader and forgets p. The leader must have exited.
func (l *Local) finish(p *localProcess) {
	p.finishOnce.Do(func() {
		p.stop()
		// The status is already known from AwaitExit; this releases the
		// zombie, and with it the PID and the group id.
		if l.reaper != nil {
			_ = l.reaper.Wait(p.cmd)
		} else {
			_ = p.cmd.Wait()
		}
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
		l.mu.Lock()
		delete(l.procs, p.id)
		l.mu.Unlock()
		l.forget(p.id)
		close(p.finished)
	})
}

// forget removes the group id from the ledger: it is gone, or detached.
func (l *Local) forget(id string) {
	if l.ledger == nil {
		return
	}
	if err := l.ledger.Remove(id); err != nil {
		l.log.Warn("remove process group record", "id", id, "error", err)
	}
}

// teardown tears p's group down and, once its leader is seen exiting,
// finishes p.
func (l *Local) teardown(ctx context.Context, p *localProcess) (process.Report, error) {
	p.teardownMu.Lock()
	defer p.teardownMu.Unlock()
	p.detachMu.Lock()
	detached := p.detached
	p.detachMu.Unlock()
	if detached {
		// Detached after TeardownAll listed it: no longer ours.
		return process.Report{ID: p.id, PGID: p.group.PGID}, fmt.Errorf("process %s: %w", p.id, errDetached)
	}
	select {
	case <-p.finished:
		return process.Report{ID: p.id, PGID: p.group.PGID, Status: process.AlreadyExited}, nil
	default:
	}
	select {
	case <-p.exited:
		// supervise settles p as soon as the leader exits; a teardown
		// that follows the exit closely (a foreground command's) waits
		// for that rather than race it to the same answer.
		<-p.settled
		select {
		case <-p.finished:
			return process.Report{ID: p.id, PGID: p.group.PGID, Status: process.AlreadyExited}, nil
		default:
		}
		if l.gone(p) { // what was left behind has ended since
			l.finish(p)
			return process.Report{ID: p.id, PGID: p.group.PGID, Status: process.AlreadyExited}, nil
		}
	default:
	}
	p.tornDown.Store(true)
	rep, err := process.Teardown(ctx, p.group, l.grace)
	if err != nil {
		return rep, err
	}
	select {
	case <-p.exited:
		l.finish(p)
	case <-time.After(leaderExitWait):
		// Killed but not yet dead (uninterruptible sleep): supervise will
		// settle it when it exits.
	}
	return rep, nil
}

func (l *Local) lookup(id string) (*localProcess, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.procs[id]
	if !ok {
		return nil, fmt.Errorf("process %s: %w", id, ErrNotFound)
	}
	return p, nil
}

// all returns every tracked process, oldest first.
func (l *Local) all() []*localProcess {
	l.mu.Lock()
	ps := make([]*localProcess, 0, len(l.procs))
	for _, p := range l.procs {
		ps = append(ps, p)
	}
	l.mu.Unlock()
	slices.SortFunc(ps, func(a, b *localProcess) int { return a.started.Compare(b.started) })
	return ps
}

// Detach makes the executor stop owning the group id: it is no longer
// listed, no longer torn down by TeardownAll, Close or the end of the
// context it was started with, and it outlives the executor. The caller
// becomes responsible for it, typically by registering the returned
// description as a durable record (see ProcessInfo.Record), which
// process.Registry can later verify and terminate.
//
// The group's streams stay as they are: the caller may go on reading
// them, and should close them when it stops; once they are closed (or
// this process has exited) the group's writes to its standard output and
// error fail, so a group meant to outlive the run should write elsewhere.
//
// A group that has already ended, or that is being torn down, cannot be
// detached: the error wraps ErrNotFound.
func (l *Local) Detach(ctx context.Context, id string) (ProcessInfo, error) {
	p, err := l.lookup(id)
	if err != nil {
		return ProcessInfo{}, fmt.Errorf("detach: %w", err)
	}
	l.settle(p)
	p.teardownMu.Lock()
	defer p.teardownMu.Unlock()
	select {
	case <-p.finished:
		return ProcessInfo{}, fmt.Errorf("detach process %s: it has ended: %w", id, ErrNotFound)
	default:
	}
	// stop fails when the context has ended and its teardown is waiting
	// for teardownMu.
	if p.tornDown.Load() || !p.stop() {
		return ProcessInfo{}, fmt.Errorf("detach process %s: it is being torn down: %w", id, ErrNotFound)
	}
	l.mu.Lock()
	delete(l.procs, id)
	l.mu.Unlock()
	l.forget(id) // the caller's to record now
	info := p.Info()
	p.detachMu.Lock()
	p.detached = true
	leaderDone := p.leaderDone
	p.detachMu.Unlock()
	close(p.released)
	if leaderDone {
		// The leader is a zombie kept only so that this executor could
		// signal the group safely; it no longer will. The group id stays
		// allocated as long as a member lives, and a record's birth
		// fingerprint guards the rest.
		l.finish(p)
	}
	return info, nil
}

// Record returns the durable record of a detached group, for
// process.Registry. owner says who started it (a session id).
func (i ProcessInfo) Record(owner string) process.Record {
	return process.Record{Group: i.Group, Command: shellJoin(i.Argv), Dir: i.Dir, Owner: owner, StartedAt: i.StartedAt}
}

// shellJoin renders argv as a command line a person can read and paste
// into a shell: arguments with anything but safe characters are quoted.
func shellJoin(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			b.WriteString(a)
			continue
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}

// Signal implements Commands.
func (l *Local) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	p, err := l.lookup(id)
	if err != nil {
		return err
	}
	return process.SignalGroup(p.group, sig)
}

// List implements Commands. Groups whose processes have all exited are
// dropped from the list on the way.
func (l *Local) List(ctx context.Context) ([]ProcessInfo, error) {
	var infos []ProcessInfo
	for _, p := range l.all() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l.settle(p)
		select {
		case <-p.finished:
			continue
		default:
		}
		infos = append(infos, p.Info())
	}
	return infos, nil
}

// Teardown implements Commands.
func (l *Local) Teardown(ctx context.Context, id string) (process.Report, error) {
	p, err := l.lookup(id)
	if err != nil {
		return process.Report{ID: id}, err
	}
	return l.teardown(ctx, p)
}

// TeardownAll implements Commands. Groups are torn down concurrently, so
// the whole takes about one grace period, not one per group.
func (l *Local) TeardownAll(ctx context.Context) ([]process.Report, error) {
	ps := l.all()
	reports := make([]process.Report, len(ps))
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { reports[i], errs[i] = l.teardown(ctx, p) })
	}
	wg.Wait()
	kept := reports[:0]
	for i, rep := range reports {
		if errors.Is(errs[i], errDetached) {
			errs[i] = nil
			continue
		}
		kept = append(kept, rep)
	}
	return kept, errors.Join(errs...)
}

// errDetached is what a teardown of a group detached meanwhile returns.
var errDetached = fmt.Errorf("process group detached: %w", ErrNotFound)

var _ Executor = (*Local)(nil)
