package store

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// DB is the Store over one database: the sessions' logic written once, the
// statements its Backend's. postgres.Open and sqlite.Open return one. It is
// safe for concurrent use.
type DB struct {
	b Backend
}

var _ Store = (*DB)(nil)

// New returns the store over a backend, which it owns from then on: Close
// closes it.
func New(b Backend) *DB { return &DB{b: b} }

// Close closes the backend. The SQLite backend also checkpoints and
// truncates its write-ahead log.
func (db *DB) Close() error { return db.b.Close() }

func (db *DB) Create(ctx context.Context, tenant string, ns NewSession) (Session, error) {
	s, err := prepareCreate(tenant, ns, now())
	if err != nil {
		return Session{}, fmt.Errorf("create session: %w", err)
	}
	rows, err := encodeFirst(ns.Entries)
	if err != nil {
		return Session{}, fmt.Errorf("create session: %w", err)
	}
	if len(rows) > 0 {
		s.EntryCount, s.LastSeq = int64(len(rows)), rows[len(rows)-1].Seq
	}
	err = WithTx(ctx, db.b.Write, func(tx Tx) error {
		if s.ParentID != uuid.Nil {
			parent, err := live(ctx, tx, tenant, s.ParentID)
			if err != nil {
				return fmt.Errorf("parent: %w", err)
			}
			s.RootID = parent.RootID
		}
		if err := insert(ctx, tx, s); err != nil {
			return err
		}
		// A statement per entry: a new session's first entries are a
		// few, and they share the session's transaction.
		for _, r := range rows {
			if err := tx.InsertEntry(ctx, tenant, s.ID, r); err != nil {
				return fmt.Errorf("entry %d: %w", r.Seq, err)
			}
		}
		return nil
	})
	if err != nil {
		return Session{}, fmt.Errorf("create session: %w", err)
	}
	return s, nil
}

func (db *DB) Session(ctx context.Context, tenant string, id uuid.UUID) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, fmt.Errorf("get session: %w", err)
	}
	s, err := live(ctx, db.b, tenant, id)
	if err != nil {
		return Session{}, fmt.Errorf("get session: %w", err)
	}
	return s, nil
}

func (db *DB) List(ctx context.Context, tenant string, opts ListOptions) ([]Session, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	ss, err := db.b.Sessions(ctx, tenant, opts.IncludeDeleted)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return ss, nil
}

func (db *DB) Resolve(ctx context.Context, tenant, ref string) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, fmt.Errorf("resolve session: %w", err)
	}
	prefix, _ := idPrefix(ref)
	if id, err := uuid.Parse(ref); err == nil {
		prefix = id.String()
	}
	candidates, err := db.b.Candidates(ctx, tenant, ref, prefix)
	if err != nil {
		return Session{}, fmt.Errorf("resolve session: %w", err)
	}
	s, err := resolve(candidates, ref)
	if err != nil {
		return Session{}, fmt.Errorf("resolve session: %w", err)
	}
	return s, nil
}

func (db *DB) SetState(ctx context.Context, tenant string, id uuid.UUID, state State) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("set session state: %w", err)
	}
	if !state.valid() {
		return fmt.Errorf("set session state: unknown state %q: %w", state, ErrInvalid)
	}
	found, err := db.b.SetState(ctx, tenant, id, state, now())
	switch {
	case err != nil:
		return fmt.Errorf("set session state: %w", err)
	case !found:
		return fmt.Errorf("set session state: session %s: %w", id, ErrNotFound)
	}
	return nil
}

func (db *DB) Delete(ctx context.Context, tenant string, id uuid.UUID) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	found, err := db.b.Delete(ctx, tenant, id, now())
	switch {
	case err != nil:
		return fmt.Errorf("delete session: %w", err)
	case !found:
		return fmt.Errorf("delete session: session %s: %w", id, ErrNotFound)
	}
	return nil
}

func (db *DB) Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("append entries: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	rows, err := encodeEntries(entries)
	if err != nil {
		return fmt.Errorf("append entries: %w", err)
	}
	if err := db.b.Append(ctx, tenant, session, rows, now()); err != nil {
		return fmt.Errorf("append entries: %w", err)
	}
	return nil
}

func (db *DB) Load(ctx context.Context, tenant string, session uuid.UUID) (Session, transcript.Snapshot, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, transcript.Snapshot{}, fmt.Errorf("load session: %w", err)
	}
	var (
		s    Session
		snap transcript.Snapshot
		tail *EntryRows
	)
	err := WithTx(ctx, db.b.Read, func(tx Tx) error {
		var err error
		if s, err = live(ctx, tx, tenant, session); err != nil {
			return err
		}
		snap.Settings, snap.LastSeq = s.Settings, s.LastSeq
		latest, err := db.latest(ctx, tx, tenant, session, math.MaxInt64)
		if err != nil {
			return err
		}
		applyLatest(&snap, latest)
		// Room for the tail only: after many compactions it is a small
		// part of the session's entries.
		from := tailStart(snap)
		tail = newEntryRows(session, max(0, min(s.EntryCount, s.LastSeq-from+1)))
		return tx.ActiveEntries(ctx, tenant, session, from, tail)
	})
	if err == nil {
		// Decoded once the transaction is over: the read holds a
		// connection no longer than it needs.
		snap.Entries, err = tail.decode()
	}
	if err != nil {
		return Session{}, transcript.Snapshot{}, fmt.Errorf("load session: %w", err)
	}
	return s, snap, nil
}

func (db *DB) Entries(ctx context.Context, tenant string, session uuid.UUID) ([]transcript.Entry, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("read entries: %w", err)
	}
	var rows *EntryRows
	err := WithTx(ctx, db.b.Read, func(tx Tx) error {
		s, err := live(ctx, tx, tenant, session)
		if err != nil {
			return err
		}
		rows = newEntryRows(session, s.EntryCount)
		return tx.Entries(ctx, tenant, session, rows)
	})
	var entries []transcript.Entry
	if err == nil {
		entries, err = rows.decode()
	}
	if err != nil {
		return nil, fmt.Errorf("read entries: %w", err)
	}
	return entries, nil
}

// latest returns the latest entry of each of latestKinds at or before seq.
func (db *DB) latest(
	ctx context.Context, q Queries, tenant string, session uuid.UUID, seq int64,
) ([]transcript.Entry, error) {
	rows := newEntryRows(session, 0)
	if err := q.Latest(ctx, tenant, session, latestKinds(), seq, rows); err != nil {
		return nil, err
	}
	return rows.decode()
}

func (db *DB) Fork(ctx context.Context, tenant string, source uuid.UUID, opts ForkOptions) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, fmt.Errorf("fork session: %w", err)
	}
	var child Session
	err := WithTx(ctx, db.b.Write, func(tx Tx) error {
		src, err := live(ctx, tx, tenant, source)
		if err != nil {
			return err
		}
		at, err := forkPoint(src, opts.At)
		if err != nil {
			return err
		}
		tools := newEntryRows(source, 0)
		if err := tx.KindEntries(ctx, tenant, source, toolKinds(), at, tools); err != nil {
			return err
		}
		toolEntries, err := tools.decode()
		if err != nil {
			return err
		}
		if err := checkCut(toolEntries, at); err != nil {
			return err
		}
		latest, err := db.latest(ctx, tx, tenant, source, at)
		if err != nil {
			return err
		}
		if child, err = prepareFork(src, opts, latest, now()); err != nil {
			return err
		}
		if err := insert(ctx, tx, child); err != nil {
			return err
		}
		copied, err := tx.CopyEntries(ctx, tenant, source, child.ID, at)
		if err != nil {
			return err
		}
		fork, err := forkEntry(src, at, child.CreatedAt)
		if err != nil {
			return err
		}
		if err := tx.InsertEntry(ctx, tenant, child.ID, fork); err != nil {
			return err
		}
		child.EntryCount, child.LastSeq = copied+1, fork.Seq
		return tx.SetCounts(ctx, child.ID, child.EntryCount, child.LastSeq)
	})
	if err != nil {
		return Session{}, fmt.Errorf("fork session: %w", err)
	}
	return child, nil
}

func (db *DB) AddTrace(ctx context.Context, tenant string, tr Trace) (Trace, error) {
	if err := checkTenant(tenant); err != nil {
		return Trace{}, fmt.Errorf("add trace: %w", err)
	}
	tr, data, err := prepareTrace(tr)
	if err != nil {
		return Trace{}, fmt.Errorf("add trace: %w", err)
	}
	found, err := db.b.InsertTrace(ctx, tenant, tr, data)
	switch {
	case err != nil:
		return Trace{}, fmt.Errorf("add trace: %w", err)
	case !found:
		return Trace{}, fmt.Errorf("add trace: session %s: %w", tr.Session, ErrNotFound)
	}
	return tr, nil
}

func (db *DB) Traces(ctx context.Context, tenant string, session uuid.UUID) ([]Trace, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	var traces []Trace
	err := WithTx(ctx, db.b.Read, func(tx Tx) error {
		if _, err := live(ctx, tx, tenant, session); err != nil {
			return err
		}
		return tx.Traces(ctx, tenant, session, func(tr Trace, data []byte) error {
			tr.Session = session
			if err := decodeTrace(&tr, data); err != nil {
				return err
			}
			traces = append(traces, tr)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	return traces, nil
}

func (db *DB) PutToolOutput(ctx context.Context, tenant string, session uuid.UUID, callID string, data []byte) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("keep tool output: %w", err)
	}
	if callID == "" {
		return fmt.Errorf("keep tool output: empty call id: %w", ErrInvalid)
	}
	found, err := db.b.PutToolOutput(ctx, tenant, session, callID, data, now())
	switch {
	case err != nil:
		return fmt.Errorf("keep tool output: %w", err)
	case !found:
		return fmt.Errorf("keep tool output: session %s: %w", session, ErrNotFound)
	}
	return nil
}

func (db *DB) ToolOutput(ctx context.Context, tenant string, session uuid.UUID, callID string) ([]byte, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("read tool output: %w", err)
	}
	var data []byte
	err := WithTx(ctx, db.b.Read, func(tx Tx) error {
		if _, err := live(ctx, tx, tenant, session); err != nil {
			return err
		}
		d, found, err := tx.ToolOutput(ctx, tenant, session, callID)
		if err == nil && !found {
			err = fmt.Errorf("call %q: %w", callID, ErrNotFound)
		}
		data = d
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read tool output: %w", err)
	}
	return data, nil
}

func (db *DB) Memory(ctx context.Context, tenant, scope, target string) ([]byte, int64, error) {
	if err := checkMemory(tenant, target); err != nil {
		return nil, 0, fmt.Errorf("read memory: %w", err)
	}
	data, version, err := db.b.Memory(ctx, tenant, scope, target)
	if err != nil {
		return nil, 0, fmt.Errorf("read memory %s of %q: %w", target, scope, err)
	}
	return data, version, nil
}

func (db *DB) PutMemory(ctx context.Context, tenant, scope, target string, data []byte, version int64) (bool, error) {
	if err := checkMemory(tenant, target); err != nil {
		return false, fmt.Errorf("write memory: %w", err)
	}
	if version < 0 {
		return false, fmt.Errorf("write memory: version %d: %w", version, ErrInvalid)
	}
	if data == nil {
		data = []byte{} // NOT NULL
	}
	stored, err := db.b.PutMemory(ctx, tenant, scope, target, data, version, now())
	if err != nil {
		return false, fmt.Errorf("write memory %s of %q: %w", target, scope, err)
	}
	return stored, nil
}

// checkMemory checks the tenant and the target of a memory document.
func checkMemory(tenant, target string) error {
	if err := checkTenant(tenant); err != nil {
		return err
	}
	if target == "" {
		return fmt.Errorf("empty memory target: %w", ErrInvalid)
	}
	return nil
}

// live returns the tenant's live session id through q, an ErrNotFound
// naming the id if there is none.
func live(ctx context.Context, q Queries, tenant string, id uuid.UUID) (Session, error) {
	s, err := q.Session(ctx, tenant, id)
	if errors.Is(err, ErrNotFound) {
		return Session{}, fmt.Errorf("session %s: %w", id, err)
	}
	return s, err
}

// insert stores a new session row through q, an ErrExists naming the id if
// it is taken.
func insert(ctx context.Context, q Queries, s Session) error {
	err := q.InsertSession(ctx, s)
	if errors.Is(err, ErrExists) {
		return fmt.Errorf("session %s: %w", s.ID, err)
	}
	return err
}

// Listener is a Backend that tells of the sessions that changed as they
// commit (PostgreSQL's LISTEN/NOTIFY).
type Listener interface {
	// Listen calls changed with the id of each session whose row changed
	// (new entries, a new state), and with uuid.Nil once it has begun
	// listening; it returns when ctx ends or the connection fails.
	Listen(ctx context.Context, changed func(uuid.UUID)) error
}

// Listen is the backend's Listen; a backend that tells nothing (SQLite)
// returns an error wrapping errors.ErrUnsupported at once: poll it.
func (db *DB) Listen(ctx context.Context, changed func(uuid.UUID)) error {
	l, ok := db.b.(Listener)
	if !ok {
		return fmt.Errorf("listen for changed sessions: %w", errors.ErrUnsupported)
	}
	return l.Listen(ctx, changed)
}
