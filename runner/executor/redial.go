package executor

import (
	"context"
	"fmt"
	"io/fs"
	"iter"
	"sync"
	"syscall"
	"time"

	"github.com/aerie-run/aerie/runner/process"
)

// Redialer is a Remote that connects again once its connection is lost:
// the workspace container is a sidecar, which the kubelet restarts after
// a crash, with its socket at the same path; an executor's container in
// a pod of its own restarts at the same address. A call in flight when
// the executor died fails (its processes died with it); the calls after
// it wait, at most wait, for the new executor to serve, rather than
// failing one after the other against a dead connection. Once a wait has
// passed in vain the executor is taken for gone: each later call tries
// to connect once (within a few seconds) and fails at once if it cannot,
// so that a session whose executor pod was deleted is told so call after
// call instead of waiting each time.
type Redialer struct {
	target string
	dial   func(context.Context) (*Remote, error)
	wait   time.Duration

	mu  sync.Mutex
	cur *Remote
	// gone is the error of the wait that passed in vain; nil while the
	// executor serves or may come back.
	gone error
}

// goneAttempt bounds the one attempt to connect of a call to an executor
// taken for gone.
const goneAttempt = 3 * time.Second

// NewRedialer returns a Redialer whose first connection is r, to the
// executor serving socket, which it dials again with Dial.
func NewRedialer(r *Remote, socket string, wait time.Duration) *Redialer {
	return NewRedialerFunc(r, socket, wait, func(ctx context.Context) (*Remote, error) { return Dial(ctx, socket) })
}

// NewRedialerFunc returns a Redialer whose first connection is r, which
// connects again with dial: DialTCP, say. target names the executor in
// errors.
func NewRedialerFunc(r *Remote, target string, wait time.Duration,
	dial func(context.Context) (*Remote, error)) *Redialer {
	return &Redialer{target: target, dial: dial, wait: wait, cur: r}
}

// remote returns the live connection, connecting again if the last one is
// over.
func (d *Redialer) remote(ctx context.Context) (*Remote, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.cur.done:
	default:
		return d.cur, nil
	}
	if d.gone != nil {
		actx, cancel := context.WithTimeout(ctx, goneAttempt)
		defer cancel()
		r, err := d.dial(actx)
		if err != nil {
			return nil, fmt.Errorf("%w (and again now: %v)", d.gone, err)
		}
		d.cur, d.gone = r, nil
		return r, nil
	}
	wctx, cancel := context.WithTimeout(ctx, d.wait)
	defer cancel()
	for {
		r, err := d.dial(wctx)
		if err == nil {
			d.cur = r
			return r, nil
		}
		select {
		case <-wctx.Done():
			err = fmt.Errorf("connect to the executor again at %s (lost: %v): %w", d.target, d.cur.err, err)
			if ctx.Err() == nil {
				// The wait passed, not the caller's patience.
				d.gone = err
			}
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Workspace is the executor's workspace directory.
func (d *Redialer) Workspace() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur.Workspace()
}

// Close closes the current connection.
func (d *Redialer) Close(ctx context.Context) error {
	d.mu.Lock()
	r := d.cur
	d.mu.Unlock()
	return r.Close(ctx)
}

// Start implements Commands.
func (d *Redialer) Start(ctx context.Context, c Command) (Process, error) {
	r, err := d.remote(ctx)
	if err != nil {
		return nil, err
	}
	return r.Start(ctx, c)
}

// Signal implements Commands.
func (d *Redialer) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	r, err := d.remote(ctx)
	if err != nil {
		return err
	}
	return r.Signal(ctx, id, sig)
}

// List implements Commands.
func (d *Redialer) List(ctx context.Context) ([]ProcessInfo, error) {
	r, err := d.remote(ctx)
	if err != nil {
		return nil, err
	}
	return r.List(ctx)
}

// Teardown implements Commands.
func (d *Redialer) Teardown(ctx context.Context, id string) (process.Report, error) {
	r, err := d.remote(ctx)
	if err != nil {
		return process.Report{}, err
	}
	return r.Teardown(ctx, id)
}

// TeardownAll implements Commands.
func (d *Redialer) TeardownAll(ctx context.Context) ([]process.Report, error) {
	r, err := d.remote(ctx)
	if err != nil {
		return nil, err
	}
	return r.TeardownAll(ctx)
}

// ReadFile implements Files.
func (d *Redialer) ReadFile(ctx context.Context, name string) ([]byte, error) {
	r, err := d.remote(ctx)
	if err != nil {
		return nil, err
	}
	return r.ReadFile(ctx, name)
}

// WriteFile implements Files.
func (d *Redialer) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	r, err := d.remote(ctx)
	if err != nil {
		return err
	}
	return r.WriteFile(ctx, name, data, perm)
}

// Stat implements Files.
func (d *Redialer) Stat(ctx context.Context, name string) (FileInfo, error) {
	r, err := d.remote(ctx)
	if err != nil {
		return FileInfo{}, err
	}
	return r.Stat(ctx, name)
}

// Remove implements Files.
func (d *Redialer) Remove(ctx context.Context, name string) error {
	r, err := d.remote(ctx)
	if err != nil {
		return err
	}
	return r.Remove(ctx, name)
}

// ReadDir implements Files.
func (d *Redialer) ReadDir(ctx context.Context, name string) ([]FileInfo, error) {
	r, err := d.remote(ctx)
	if err != nil {
		return nil, err
	}
	return r.ReadDir(ctx, name)
}

// Walk implements Files.
func (d *Redialer) Walk(ctx context.Context, name string, opts WalkOptions) iter.Seq2[FileInfo, error] {
	return func(yield func(FileInfo, error) bool) {
		r, err := d.remote(ctx)
		if err != nil {
			yield(FileInfo{}, err)
			return
		}
		for fi, err := range r.Walk(ctx, name, opts) {
			if !yield(fi, err) {
				return
			}
		}
	}
}

var _ Executor = (*Redialer)(nil)
