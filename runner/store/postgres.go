package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the PostgreSQL store: the one pods use, shared by every runner
// of a cluster. It is safe for concurrent use.
type Postgres struct {
	pool *pgxpool.Pool
}

var _ Store = (*Postgres)(nil)

// migrationLock is the pg_advisory_xact_lock key that serialises migrations
// of runners starting at the same time ("aerie" in ASCII).
const migrationLock = 0x6165726965

// copyThreshold is the batch size from which Append streams entries with
// COPY instead of one INSERT ... SELECT FROM unnest(...) statement. Below it
// the single statement (one round trip) wins; from it COPY's extra round
// trips no longer matter, and it streams rows instead of building arrays
// (at 1,000 entries the two took the same time in our measurements).
const copyThreshold = 64

// OpenPostgres connects to the database at dsn (a postgres:// URL or a
// key=value connection string) and brings its schema up to date. A
// connection or migration failure is returned as an error; nothing is left
// open then.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx redacts the password from its parse errors.
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: connect: %w", pgError(err))
	}
	p := &Postgres{pool: pool}
	if err := p.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: migrate: %w", err)
	}
	return p, nil
}

func (p *Postgres) migrate(ctx context.Context) error {
	ms, err := migrations("postgres")
	if err != nil {
		return err
	}
	return withTx(ctx, p.pool.Begin, func(tx pgx.Tx) error {
		// Runners starting together wait here for the first to finish,
		// then find nothing left to do.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return pgError(err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    bigint      PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return pgError(err)
		}
		var current int64
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
			return pgError(err)
		}
		for _, m := range ms {
			if m.version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, pgError(err))
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, pgError(err))
			}
		}
		return nil
	})
}

// Close closes the connection pool.
func (p *Postgres) Close() error {
	p.pool.Close()
	return nil
}

const pgSessionColumns = `id, tenant, dir, provider, model, persona, reasoning, kind, label,
	parent_id, root_id, state, entry_count, last_seq, created_at, updated_at, deleted_at`

func scanPgSession(row pgx.Row) (Session, error) {
	var (
		s         Session
		parent    uuid.NullUUID
		deletedAt *time.Time
	)
	err := row.Scan(&s.ID, &s.Tenant, &s.Dir, &s.Settings.Provider, &s.Settings.Model,
		&s.Settings.Persona, &s.Settings.Reasoning, &s.Kind, &s.Label, &parent, &s.RootID,
		&s.State, &s.EntryCount, &s.LastSeq, &s.CreatedAt, &s.UpdatedAt, &deletedAt)
	if err != nil {
		return Session{}, err
	}
	s.ParentID = parent.UUID
	s.CreatedAt = s.CreatedAt.UTC()
	s.UpdatedAt = s.UpdatedAt.UTC()
	if deletedAt != nil {
		s.DeletedAt = deletedAt.UTC()
	}
	return s, nil
}

// pgQuerier is what reads need: the pool or a transaction.
type pgQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// liveSession returns a session of the tenant that is not deleted.
func (p *Postgres) liveSession(ctx context.Context, q pgQuerier, tenant string, id uuid.UUID) (Session, error) {
	s, err := scanPgSession(q.QueryRow(ctx,
		"SELECT "+pgSessionColumns+" FROM sessions WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL", id, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, pgError(err)
	}
	return s, nil
}

func (p *Postgres) Create(ctx context.Context, tenant string, ns NewSession) (Session, error) {
	s, err := prepareCreate(tenant, ns, now())
	if err != nil {
		return Session{}, fmt.Errorf("create session: %w", err)
	}
	err = withTx(ctx, p.pool.Begin, func(tx pgx.Tx) error {
		if s.ParentID != uuid.Nil {
			parent, err := p.liveSession(ctx, tx, tenant, s.ParentID)
			if err != nil {
				return fmt.Errorf("parent: %w", err)
			}
			s.RootID = parent.RootID
		}
		return p.insertSession(ctx, tx, s)
	})
	if err != nil {
		return Session{}, fmt.Errorf("create session: %w", err)
	}
	return s, nil
}

func (p *Postgres) insertSession(ctx context.Context, tx pgx.Tx, s Session) error {
	_, err := tx.Exec(ctx, `INSERT INTO sessions (id, tenant, dir, provider, model, persona, reasoning,
		kind, label, parent_id, root_id, state, entry_count, last_seq, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		s.ID, s.Tenant, s.Dir, s.Settings.Provider, s.Settings.Model, s.Settings.Persona,
		s.Settings.Reasoning, s.Kind, s.Label, nullUUID(s.ParentID), s.RootID, s.State,
		s.EntryCount, s.LastSeq, s.CreatedAt, s.UpdatedAt)
	if pgCode(err) == "23505" {
		return fmt.Errorf("session %s: %w", s.ID, ErrExists)
	}
	return pgError(err)
}

func (p *Postgres) Session(ctx context.Context, tenant string, id uuid.UUID) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, fmt.Errorf("get session: %w", err)
	}
	s, err := p.liveSession(ctx, p.pool, tenant, id)
	if err != nil {
		return Session{}, fmt.Errorf("get session: %w", err)
	}
	return s, nil
}

func (p *Postgres) List(ctx context.Context, tenant string, opts ListOptions) ([]Session, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	ss, err := p.querySessions(ctx, "SELECT "+pgSessionColumns+` FROM sessions
		WHERE tenant = $1 AND ($2 OR deleted_at IS NULL) ORDER BY updated_at DESC, id`,
		tenant, opts.IncludeDeleted)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return ss, nil
}

func (p *Postgres) querySessions(ctx context.Context, sql string, args ...any) ([]Session, error) {
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, pgError(err)
	}
	ss, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Session, error) { return scanPgSession(row) })
	if err != nil {
		return nil, pgError(err)
	}
	return ss, nil
}

func (p *Postgres) Resolve(ctx context.Context, tenant, ref string) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, fmt.Errorf("resolve session: %w", err)
	}
	prefix, _ := idPrefix(ref)
	if id, err := uuid.Parse(ref); err == nil {
		prefix = id.String()
	}
	candidates, err := p.querySessions(ctx, "SELECT "+pgSessionColumns+` FROM sessions
		WHERE tenant = $1 AND deleted_at IS NULL
		AND (label = $2 OR ($3 <> '' AND id::text LIKE $3 || '%'))`, tenant, ref, prefix)
	if err != nil {
		return Session{}, fmt.Errorf("resolve session: %w", err)
	}
	s, err := resolve(candidates, ref)
	if err != nil {
		return Session{}, fmt.Errorf("resolve session: %w", err)
	}
	return s, nil
}

func (p *Postgres) SetState(ctx context.Context, tenant string, id uuid.UUID, state State) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("set session state: %w", err)
	}
	if !state.valid() {
		return fmt.Errorf("set session state: unknown state %q: %w", state, ErrInvalid)
	}
	tag, err := p.pool.Exec(ctx, `UPDATE sessions SET state = $3, updated_at = $4
		WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL`, id, tenant, state, now())
	if err != nil {
		return fmt.Errorf("set session state: %w", pgError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set session state: session %s: %w", id, ErrNotFound)
	}
	return nil
}

func (p *Postgres) Delete(ctx context.Context, tenant string, id uuid.UUID) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	tag, err := p.pool.Exec(ctx, `UPDATE sessions SET deleted_at = $3, updated_at = $3
		WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL`, id, tenant, now())
	if err != nil {
		return fmt.Errorf("delete session: %w", pgError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete session: session %s: %w", id, ErrNotFound)
	}
	return nil
}

// pgAppendSQL inserts a batch and accounts for it in the session row, in one
// statement and so one round trip. Entries already stored are skipped (the
// retry of a batch whose commit was not acknowledged), and only the rows
// really inserted are counted. Nothing is inserted unless the session is
// live in the tenant, in which case no session row is updated either: the
// caller sees zero rows affected.
const pgAppendSQL = `
WITH live AS (
	SELECT 1 FROM sessions WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL
), ins AS (
	INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
	SELECT $1, $2, e.seq, e.kind, e.payload::json, e.created_at
	FROM unnest($3::bigint[], $4::text[], $5::text[], $6::timestamptz[]) AS e (seq, kind, payload, created_at)
	WHERE EXISTS (SELECT 1 FROM live)
	ON CONFLICT (session_id, seq) DO NOTHING
	RETURNING seq
)
UPDATE sessions SET
	entry_count = entry_count + (SELECT count(*) FROM ins),
	last_seq = greatest(last_seq, coalesce((SELECT max(seq) FROM ins), 0)),
	updated_at = greatest(updated_at, $7)
WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL`

// pgAppendOneSQL is pgAppendSQL for the most common batch, a single entry
// (a turn barrier right after one append), without the arrays.
const pgAppendOneSQL = `
WITH ins AS (
	INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
	SELECT $1, $2, $3, $4, $5::json, $6
	WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL)
	ON CONFLICT (session_id, seq) DO NOTHING
	RETURNING seq
)
UPDATE sessions SET
	entry_count = entry_count + (SELECT count(*) FROM ins),
	last_seq = greatest(last_seq, coalesce((SELECT max(seq) FROM ins), 0)),
	updated_at = greatest(updated_at, $7)
WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL`

// pgCompactSQL marks the entries a compaction checkpoint replaces. Entries
// already compacted keep the checkpoint that compacted them first.
const pgCompactSQL = `UPDATE entries SET compacted_by = $3
	WHERE session_id = $1 AND tenant = $2 AND seq < $4 AND compacted_by IS NULL`

func (p *Postgres) Append(ctx context.Context, tenant string, session uuid.UUID, entries []Entry) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("append entries: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	es, err := encodeEntries(entries)
	if err != nil {
		return fmt.Errorf("append entries: %w", err)
	}
	if len(es) >= copyThreshold {
		err = p.appendCopy(ctx, tenant, session, es)
		// A unique violation means an earlier attempt of this batch was
		// committed without the acknowledgement reaching us (COPY cannot
		// skip conflicts itself): write it again, skipping what is there.
		if pgCode(err) != "23505" {
			return wrapAppend(session, err)
		}
	}
	return wrapAppend(session, p.appendInsert(ctx, tenant, session, es))
}

func wrapAppend(session uuid.UUID, err error) error {
	if err == nil {
		return nil
	}
	if pgCode(err) == "23503" { // foreign key: no such session in the tenant
		err = fmt.Errorf("session %s: %w", session, ErrNotFound)
	}
	return fmt.Errorf("append entries: %w", pgError(err))
}

// appendInsert writes a batch with pgAppendSQL. Compactions in the batch
// are applied by further statements sent in the same pipeline, which the
// server runs as one implicit transaction.
func (p *Postgres) appendInsert(ctx context.Context, tenant string, session uuid.UUID, es []encodedEntry) error {
	query, args := pgAppendOneSQL, []any{session, tenant, es[0].seq, string(es[0].kind), string(es[0].payload), es[0].createdAt, now()}
	if len(es) > 1 {
		seqs := make([]int64, len(es))
		kinds := make([]string, len(es))
		payloads := make([]string, len(es))
		times := make([]time.Time, len(es))
		for i, e := range es {
			seqs[i], kinds[i], payloads[i], times[i] = e.seq, string(e.kind), string(e.payload), e.createdAt
		}
		query, args = pgAppendSQL, []any{session, tenant, seqs, kinds, payloads, times, now()}
	}
	batch := &pgx.Batch{}
	batch.Queue(query, args...)
	for _, e := range es {
		if e.kind == KindCompaction {
			batch.Queue(pgCompactSQL, session, tenant, e.seq, e.firstKept)
		}
	}
	var (
		tag pgconn.CommandTag
		err error
	)
	if batch.Len() == 1 {
		tag, err = p.pool.Exec(ctx, query, args...) // the common case, without a pipeline
	} else {
		tag, err = sendBatch(ctx, p.pool, batch)
	}
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session %s: %w", session, ErrNotFound)
	}
	return nil
}

// sendBatch runs a batch and returns the command tag of its first
// statement.
func sendBatch(ctx context.Context, pool *pgxpool.Pool, batch *pgx.Batch) (pgconn.CommandTag, error) {
	br := pool.SendBatch(ctx, batch)
	first, err := br.Exec()
	for i := 1; err == nil && i < batch.Len(); i++ {
		_, err = br.Exec()
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return first, err
}

// appendCopy writes a large batch with COPY, in a transaction that also
// updates the session row and applies compactions.
func (p *Postgres) appendCopy(ctx context.Context, tenant string, session uuid.UUID, es []encodedEntry) error {
	return withTx(ctx, p.pool.Begin, func(tx pgx.Tx) error {
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"entries"},
			[]string{"session_id", "tenant", "seq", "kind", "payload", "created_at"},
			pgx.CopyFromSlice(len(es), func(i int) ([]any, error) {
				e := es[i]
				return []any{session, tenant, e.seq, string(e.kind), string(e.payload), e.createdAt}, nil
			}))
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE sessions SET entry_count = entry_count + $3,
			last_seq = greatest(last_seq, $4), updated_at = greatest(updated_at, $5)
			WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL`,
			session, tenant, n, es[len(es)-1].seq, now())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("session %s: %w", session, ErrNotFound)
		}
		for _, e := range es {
			if e.kind == KindCompaction {
				if _, err := tx.Exec(ctx, pgCompactSQL, session, tenant, e.seq, e.firstKept); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// readOnly begins the consistent, read-only transaction of a multi-query
// read.
func (p *Postgres) readOnly(ctx context.Context) (pgx.Tx, error) {
	return p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
}

const pgEntryColumns = "seq, kind, payload, created_at, coalesce(compacted_by, 0)"

// pgActiveEntryColumns are the columns of entries known to be active: their
// compacted_by is NULL, and queryEntries leaves it out.
const pgActiveEntryColumns = "seq, kind, payload, created_at"

// queryEntries reads and decodes entries of one session; capacity is a hint
// of how many rows to expect. The entries come out in sequence order, so sql
// needs no ORDER BY seq: sorting whole rows, payloads included, was the
// largest part of the server's work for a long session, while the rows
// come mostly in order (the order they are stored in) and the client puts
// them in order in linear time.
func queryEntries(ctx context.Context, q pgQuerier, session uuid.UUID, capacity int64, sql string, args ...any) ([]Entry, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, pgError(err)
	}
	defer rows.Close()
	batch := newRowBatch(session, capacity)
	var (
		seq, compactedBy int64
		created          time.Time
	)
	// Kind and payload are taken as they came off the wire (text and json
	// are the same in pgx's binary format): the payload is copied once, into
	// the string its decoded fields share.
	dest := []any{&seq, nil, nil, &created, &compactedBy}
	for rows.Next() {
		if len(rows.FieldDescriptions()) == 4 { // pgActiveEntryColumns
			dest = dest[:4]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, pgError(err)
		}
		raw := rows.RawValues()
		batch.add(seq, raw[1], string(raw[2]), created.UTC(), compactedBy)
	}
	if err := rows.Err(); err != nil {
		return nil, pgError(err)
	}
	return batch.decode()
}

// latest returns the latest entry of each of latestKinds at or before seq.
func (p *Postgres) latest(ctx context.Context, q pgQuerier, tenant string, session uuid.UUID, seq int64) ([]Entry, error) {
	return queryEntries(ctx, q, session, 0, "SELECT DISTINCT ON (kind) "+pgEntryColumns+` FROM entries
		WHERE session_id = $1 AND tenant = $2 AND kind = ANY($3) AND seq <= $4
		ORDER BY kind, seq DESC`, session, tenant, latestKinds(), seq)
}

func (p *Postgres) Load(ctx context.Context, tenant string, session uuid.UUID) (Snapshot, error) {
	if err := checkTenant(tenant); err != nil {
		return Snapshot{}, fmt.Errorf("load session: %w", err)
	}
	var snap Snapshot
	err := withTx(ctx, p.readOnly, func(tx pgx.Tx) error {
		s, err := p.liveSession(ctx, tx, tenant, session)
		if err != nil {
			return err
		}
		snap.Session, snap.Settings, snap.LastSeq = s, s.Settings, s.LastSeq
		latest, err := p.latest(ctx, tx, tenant, session, math.MaxInt64)
		if err != nil {
			return err
		}
		applyLatest(&snap, latest)
		snap.Entries, err = queryEntries(ctx, tx, session, s.EntryCount, "SELECT "+pgActiveEntryColumns+` FROM entries
			WHERE session_id = $1 AND tenant = $2 AND seq >= $3 AND compacted_by IS NULL AND kind <> 'compaction'`,
			session, tenant, snap.tailStart())
		return err
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("load session: %w", err)
	}
	return snap, nil
}

func (p *Postgres) Entries(ctx context.Context, tenant string, session uuid.UUID) ([]Entry, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("read entries: %w", err)
	}
	var entries []Entry
	err := withTx(ctx, p.readOnly, func(tx pgx.Tx) error {
		s, err := p.liveSession(ctx, tx, tenant, session)
		if err != nil {
			return err
		}
		entries, err = queryEntries(ctx, tx, session, s.EntryCount, "SELECT "+pgEntryColumns+` FROM entries
			WHERE session_id = $1 AND tenant = $2`, session, tenant)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read entries: %w", err)
	}
	return entries, nil
}

func (p *Postgres) Fork(ctx context.Context, tenant string, source uuid.UUID, opts ForkOptions) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, fmt.Errorf("fork session: %w", err)
	}
	var child Session
	err := withTx(ctx, p.pool.Begin, func(tx pgx.Tx) error {
		src, err := p.liveSession(ctx, tx, tenant, source)
		if err != nil {
			return err
		}
		at, err := forkPoint(src, opts.At)
		if err != nil {
			return err
		}
		tools, err := queryEntries(ctx, tx, source, 0, "SELECT "+pgEntryColumns+` FROM entries
			WHERE session_id = $1 AND tenant = $2 AND kind IN ('tool_call', 'tool_completion') AND seq <= $3`,
			source, tenant, at)
		if err != nil {
			return err
		}
		if err := checkCut(tools, at); err != nil {
			return err
		}
		latest, err := p.latest(ctx, tx, tenant, source, at)
		if err != nil {
			return err
		}
		child, err = prepareFork(src, opts, latest, now())
		if err != nil {
			return err
		}
		if err := p.insertSession(ctx, tx, child); err != nil {
			return err
		}
		// Compaction marks are copied only when their checkpoint is: a
		// compaction after the cut does not exist in the child.
		tag, err := tx.Exec(ctx, `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at, compacted_by)
			SELECT $3, tenant, seq, kind, payload, created_at, CASE WHEN compacted_by <= $4 THEN compacted_by END
			FROM entries WHERE session_id = $1 AND tenant = $2 AND seq <= $4`, source, tenant, child.ID, at)
		if err != nil {
			return pgError(err)
		}
		fork, err := forkEntry(src, at, child.CreatedAt)
		if err != nil {
			return err
		}
		child.EntryCount, child.LastSeq = tag.RowsAffected()+1, fork.seq
		if _, err := tx.Exec(ctx, `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, child.ID, tenant, fork.seq, string(fork.kind), string(fork.payload), fork.createdAt); err != nil {
			return pgError(err)
		}
		_, err = tx.Exec(ctx, "UPDATE sessions SET entry_count = $2, last_seq = $3 WHERE id = $1",
			child.ID, child.EntryCount, child.LastSeq)
		return pgError(err)
	})
	if err != nil {
		return Session{}, fmt.Errorf("fork session: %w", err)
	}
	return child, nil
}

func (p *Postgres) AddTrace(ctx context.Context, tenant string, tr Trace) (Trace, error) {
	if err := checkTenant(tenant); err != nil {
		return Trace{}, fmt.Errorf("add trace: %w", err)
	}
	tr, data, err := prepareTrace(tr)
	if err != nil {
		return Trace{}, fmt.Errorf("add trace: %w", err)
	}
	tag, err := p.pool.Exec(ctx, `INSERT INTO moa_traces (id, session_id, tenant, seq, created_at, data)
		SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (
			SELECT 1 FROM sessions WHERE id = $2 AND tenant = $3 AND deleted_at IS NULL)`,
		tr.ID, tr.Session, tenant, tr.Seq, tr.CreatedAt, string(data))
	if err != nil {
		return Trace{}, fmt.Errorf("add trace: %w", pgError(err))
	}
	if tag.RowsAffected() == 0 {
		return Trace{}, fmt.Errorf("add trace: session %s: %w", tr.Session, ErrNotFound)
	}
	return tr, nil
}

func (p *Postgres) Traces(ctx context.Context, tenant string, session uuid.UUID) ([]Trace, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	var traces []Trace
	err := withTx(ctx, p.readOnly, func(tx pgx.Tx) error {
		if _, err := p.liveSession(ctx, tx, tenant, session); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, seq, created_at, data FROM moa_traces
			WHERE session_id = $1 AND tenant = $2 ORDER BY created_at, id`, session, tenant)
		if err != nil {
			return pgError(err)
		}
		traces, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Trace, error) {
			tr := Trace{Session: session}
			var data []byte
			if err := row.Scan(&tr.ID, &tr.Seq, &tr.CreatedAt, &data); err != nil {
				return Trace{}, err
			}
			tr.CreatedAt = tr.CreatedAt.UTC()
			return tr, decodeTrace(&tr, data)
		})
		return pgError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	return traces, nil
}

func nullUUID(id uuid.UUID) uuid.NullUUID {
	return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil}
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// pgError marks errors worth retrying as ErrTransient and passes others
// through.
func pgError(err error) error {
	if err == nil || !pgTransient(err) {
		return err
	}
	return transientError{err}
}

// pgTransient says whether an operation that failed with err may succeed if
// simply tried again: the connection was lost or refused (a restart), the
// server is shutting down or starting up, or the transaction lost a
// serialization race or a deadlock.
func pgTransient(err error) bool {
	if errors.Is(err, ErrTransient) {
		return true
	}
	if code := pgCode(err); code != "" {
		switch code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"57P01", // admin_shutdown
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now: starting up or shutting down
			"53300": // too_many_connections
			return true
		}
		return strings.HasPrefix(code, "08") // connection exceptions
	}
	// The caller's own deadline or cancellation is theirs to judge.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var connectErr *pgconn.ConnectError
	var opErr *net.OpError
	switch {
	case errors.As(err, &connectErr), errors.As(err, &opErr), pgconn.SafeToRetry(err):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	// pgx reports a connection that died under it as "conn closed".
	return strings.Contains(err.Error(), "conn closed")
}
