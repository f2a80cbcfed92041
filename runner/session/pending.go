package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/instructions"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// pendingSession is a session being stored. A new session is created
// while the run starts, so that opening the database and writing the
// session's row are off the path to the first model request. It is stored
// with the entries the journal would write first — the layers, the
// settings, and the user's prompt when no UserPromptSubmit hook can change
// it first — in one transaction (see create), so that a crash once it is
// stored cannot leave it without its prompt; the journal goes on after
// them. Nothing acts on the workspace before the session exists: hooks and
// tools wait for it (see gatedTools and run.converse), and so does the
// journal's first write (see afterCreate). If it cannot be stored, the run
// stops and fails as if it had not started.
//
// With a UserPromptSubmit hook the prompt is journaled once the hook has
// passed it, which it does only after the session exists: a crash while
// the hook runs leaves a session that has no prompt, as one whose prompt
// the hook blocked has none.
type pendingSession struct {
	done chan struct{}
	sess store.Session
	err  error
	// unstored is a new session that create has not started to store.
	unstored *store.NewSession
	tenant   string
}

// storedSession is the pending form of a session that already exists (a
// resumed or forked one).
func storedSession(s store.Session) *pendingSession {
	p := &pendingSession{done: make(chan struct{}), sess: s}
	close(p.done)
	return p
}

// newSession is the pending form of a new session of tenant: create
// stores it, once the run knows its first entries.
func newSession(tenant string, ns store.NewSession) *pendingSession {
	return &pendingSession{done: make(chan struct{}), unstored: &ns, tenant: tenant}
}

// toCreate reports whether the session is new and create has not been
// called.
func (p *pendingSession) toCreate() bool { return p.unstored != nil }

// create stores the new session in the background, with first as its
// entries 1 to len(first), and returns the sequence number of the entry
// that follows them. The creation outlives a cancel of ctx: a run
// cancelled while it starts still records its session and how it ended.
func (p *pendingSession) create(ctx context.Context, st Store, first []transcript.Payload) int64 {
	ns := *p.unstored
	p.unstored = nil
	at := time.Now()
	ns.Entries = make([]transcript.Entry, len(first))
	for i, e := range first {
		ns.Entries[i] = transcript.Entry{Seq: int64(i + 1), Payload: e, CreatedAt: at}
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(p.done)
		// The stores say "create session" in their errors.
		p.sess, p.err = st.Create(ctx, p.tenant, ns)
	}()
	return int64(len(first)) + 1
}

// wait returns the stored session, or why it could not be stored; it gives
// up with ctx.
func (p *pendingSession) wait(ctx context.Context) (store.Session, error) {
	select {
	case <-p.done:
		return p.sess, p.err
	default:
	}
	select {
	case <-p.done:
		return p.sess, p.err
	case <-ctx.Done():
		return store.Session{}, context.Cause(ctx)
	}
}

// stored reports whether the session exists.
func (p *pendingSession) stored() bool {
	select {
	case <-p.done:
		return p.err == nil
	default:
		return false
	}
}

// failed reports whether the session could not be stored.
func (p *pendingSession) failed() bool {
	select {
	case <-p.done:
		return p.err != nil
	default:
		return false
	}
}

// afterCreate is the store the journal writes to: its writes wait until
// the session exists.
type afterCreate struct {
	Store
	pending *pendingSession
}

func (a afterCreate) Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error {
	if _, err := a.pending.wait(ctx); err != nil {
		if a.pending.failed() {
			return notCreated{err}
		}
		return err
	}
	return a.Store.Append(ctx, tenant, session, entries)
}

// notCreated is the failure to store a new session, as the journal's writes
// report it: final whatever its cause, since the creation is not made
// again, so that the journal does not retry it for its whole window.
type notCreated struct{ err error }

func (e notCreated) Error() string   { return e.err.Error() }
func (e notCreated) Unwrap() error   { return e.err }
func (e notCreated) Transient() bool { return false }

// gatedTools are the tools of a session that may not exist yet: a call
// waits until it does. A session that cannot be stored ends the run (converse
// cancels the loop), so the call is not made.
type gatedTools struct {
	agent.Tools
	pending *pendingSession
}

func (g gatedTools) Run(ctx context.Context, id, name string, args json.RawMessage) tools.Result {
	if _, err := g.pending.wait(ctx); err != nil {
		return tools.Result{Content: "not run: " + err.Error(), IsError: true}
	}
	return g.Tools.Run(ctx, id, name, args)
}

// loopTools are the tools the loop calls: the file tools' results followed
// by the project instructions they reach, and every call waiting for the
// session while it is being stored.
func (eq *equipment) loopTools() agent.Tools {
	var t instructions.Tools = eq.reg
	if eq.follower != nil {
		t = eq.follower.Tools(t)
	}
	if eq.elsewhere != nil {
		t = eq.elsewhere.Tools(t)
	}
	if eq.pending == nil || eq.pending.stored() {
		return t
	}
	return gatedTools{t, eq.pending}
}
