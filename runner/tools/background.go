package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/aerie-run/aerie/runner/executor"
)

// maxPending is how much unpolled output a background process keeps; older
// output is dropped, and the next poll says how much.
const maxPending = 1 << 20

// Background tracks the commands bash started with background=true, for
// the process tool. bash and process must share one.
type Background struct {
	cmds Commands

	mu    sync.Mutex
	procs map[string]*bgProc
	order []string
}

// NewBackground returns an empty table of background processes run by cmds.
func NewBackground(cmds Commands) *Background {
	return &Background{cmds: cmds, procs: map[string]*bgProc{}}
}

type bgProc struct {
	p       executor.Process
	command string
	started time.Time

	mu      sync.Mutex
	pending []byte
	dropped int
	exit    *executor.Exit
	done    chan struct{} // closed when output has ended and the exit is known
}

// start runs script in the background. Its group outlives the call's
// context: it ends with kill, or the executor's teardown.
func (b *Background) start(ctx context.Context, cmd executor.Command, command string) (string, error) {
	cmd.Stdin = true
	cmd.CombinedOutput = true
	p, err := b.cmds.Start(context.WithoutCancel(ctx), cmd)
	if err != nil {
		return "", err
	}
	bp := &bgProc{p: p, command: command, started: time.Now(), done: make(chan struct{})}
	b.mu.Lock()
	b.procs[p.ID()] = bp
	b.order = append(b.order, p.ID())
	b.mu.Unlock()
	go bp.collect(context.WithoutCancel(ctx))
	return p.ID(), nil
}

func (bp *bgProc) collect(ctx context.Context) {
	defer close(bp.done)
	buf := make([]byte, 32*1024)
	out := bp.p.Stdout()
	for {
		n, err := out.Read(buf)
		if n > 0 {
			bp.mu.Lock()
			bp.pending = append(bp.pending, buf[:n]...)
			if over := len(bp.pending) - maxPending; over > 0 {
				bp.dropped += over
				bp.pending = append(bp.pending[:0], bp.pending[over:]...)
			}
			bp.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	exit, err := bp.p.Wait(ctx)
	bp.mu.Lock()
	if err == nil {
		bp.exit = &exit
	}
	bp.mu.Unlock()
}

func (b *Background) lookup(id string) (*bgProc, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bp, ok := b.procs[id]
	if !ok {
		return nil, fmt.Errorf("no background process %q", id)
	}
	return bp, nil
}

// status describes how the process stands.
func (bp *bgProc) status() string {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	return bp.statusLocked()
}

func (bp *bgProc) statusLocked() string {
	if bp.exit == nil {
		return "running"
	}
	return exitText(*bp.exit)
}

func exitText(e executor.Exit) string {
	switch {
	case e.TornDown:
		return "killed"
	case e.Signal != "":
		return "exited on " + e.Signal
	default:
		return fmt.Sprintf("exited with code %d", e.Code)
	}
}

// poll takes the output since the last poll.
func (bp *bgProc) poll() (string, string) {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	out := string(bp.pending)
	if bp.dropped > 0 {
		out = fmt.Sprintf("[%d earlier bytes dropped]\n%s", bp.dropped, out)
	}
	bp.pending, bp.dropped = nil, 0
	return out, bp.statusLocked()
}

// Running returns the ids of the background process groups whose command has
// not exited, oldest first: the groups a headless run preserves.
func (b *Background) Running() []string {
	var ids []string
	for _, bp := range b.list() {
		if bp.status() == "running" {
			ids = append(ids, bp.p.ID())
		}
	}
	return ids
}

// list returns the background processes, oldest first.
func (b *Background) list() []*bgProc {
	b.mu.Lock()
	defer b.mu.Unlock()
	ps := make([]*bgProc, 0, len(b.order))
	for _, id := range b.order {
		ps = append(ps, b.procs[id])
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].started.Before(ps[j].started) })
	return ps
}

func (bp *bgProc) write(s string) error {
	in := bp.p.Stdin()
	if in == nil {
		return errors.New("the process has no standard input")
	}
	_, err := io.WriteString(in, s)
	return err
}

// has reports whether id is one of the table's processes.
func (b *Background) has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.procs[id]
	return ok
}
