// Package postgres is the PostgreSQL backend of package store: the store
// pods use, shared by every runner of a cluster. It supplies the statements
// and the schema migrations; the sessions' logic is store.DB's.
//
// Open connects through a pgx connection pool and migrates the schema
// before returning, serialised between runners that start together by an
// advisory lock. Small appends are one statement (one round trip), large
// ones a COPY. Lost connections, restarts, serialization failures and
// deadlocks are reported as store.ErrTransient.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// migrationFiles holds the schema migrations, NNNN_name.up.sql.
//
//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// migrationLock is the pg_advisory_xact_lock key that serialises migrations
// of runners starting at the same time ("aerie" in ASCII).
const migrationLock = 0x6165726965

// copyThreshold is the batch size from which Append streams entries with
// COPY instead of one INSERT ... SELECT FROM unnest(...) statement. Below it
// the single statement (one round trip) wins; from it COPY's extra round
// trips no longer matter, and it streams rows instead of building arrays
// (at 1,000 entries the two took the same time in our measurements).
const copyThreshold = 64

// Open connects to the database at dsn (a postgres:// URL or a key=value
// connection string) and brings its schema up to date. A connection or
// migration failure is returned as an error; nothing is left open then.
func Open(ctx context.Context, dsn string) (*store.DB, error) {
	b, err := open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return store.New(b), nil
}

// backend is the PostgreSQL store.Backend.
type backend struct {
	queries // on the pool
	pool    *pgxpool.Pool
}

func open(ctx context.Context, dsn string) (*backend, error) {
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
	b := &backend{queries: queries{pool}, pool: pool}
	if err := b.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: migrate: %w", err)
	}
	return b, nil
}

func (b *backend) migrate(ctx context.Context) error {
	ms, err := store.Migrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	return store.WithTx(ctx, b.pool.Begin, func(tx pgx.Tx) error {
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
			if m.Version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, pgError(err))
			}
			const record = "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)"
			if _, err := tx.Exec(ctx, record, m.Version, m.Name); err != nil {
				return fmt.Errorf("record migration %s: %w", m.Name, pgError(err))
			}
		}
		return nil
	})
}

// Close closes the connection pool.
func (b *backend) Close() error {
	b.pool.Close()
	return nil
}

// Read begins a repeatable-read, read-only transaction: every query of a
// multi-query read sees the same snapshot.
func (b *backend) Read(ctx context.Context) (store.Tx, error) {
	t, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, pgError(err)
	}
	return tx{queries{t}, t}, nil
}

func (b *backend) Write(ctx context.Context) (store.Tx, error) {
	t, err := b.pool.Begin(ctx)
	if err != nil {
		return nil, pgError(err)
	}
	return tx{queries{t}, t}, nil
}

// tx is a transaction of the backend.
type tx struct {
	queries
	tx pgx.Tx
}

func (t tx) Commit(ctx context.Context) error   { return pgError(t.tx.Commit(ctx)) }
func (t tx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// conn is what statements run on: the pool or a transaction.
type conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queries are the backend's statements, on a conn.
type queries struct{ c conn }

const sessionColumns = `id, tenant, dir, provider, model, persona, reasoning, kind, label,
	parent_id, root_id, state, entry_count, last_seq, created_at, updated_at, deleted_at`

func scanSession(row pgx.Row) (store.Session, error) {
	var (
		s         store.Session
		parent    uuid.NullUUID
		deletedAt *time.Time
	)
	err := row.Scan(&s.ID, &s.Tenant, &s.Dir, &s.Settings.Provider, &s.Settings.Model,
		&s.Settings.Persona, &s.Settings.Reasoning, &s.Kind, &s.Label, &parent, &s.RootID,
		&s.State, &s.EntryCount, &s.LastSeq, &s.CreatedAt, &s.UpdatedAt, &deletedAt)
	if err != nil {
		return store.Session{}, err
	}
	s.ParentID = parent.UUID
	s.CreatedAt = s.CreatedAt.UTC()
	s.UpdatedAt = s.UpdatedAt.UTC()
	if deletedAt != nil {
		s.DeletedAt = deletedAt.UTC()
	}
	return s, nil
}

func (q queries) Session(ctx context.Context, tenant string, id uuid.UUID) (store.Session, error) {
	s, err := scanSession(q.c.QueryRow(ctx,
		"SELECT "+sessionColumns+" FROM sessions WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL", id, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Session{}, store.ErrNotFound
	}
	return s, pgError(err)
}

func (q queries) Sessions(ctx context.Context, tenant string, includeDeleted bool) ([]store.Session, error) {
	return q.sessions(ctx, "SELECT "+sessionColumns+` FROM sessions
		WHERE tenant = $1 AND ($2 OR deleted_at IS NULL) ORDER BY updated_at DESC, id`,
		tenant, includeDeleted)
}

func (q queries) SessionPage(ctx context.Context, tenant string, o store.PageOptions) ([]store.Session, int, error) {
	where := "tenant = $1 AND deleted_at IS NULL"
	args := []any{tenant}
	add := func(cond string, v any) {
		args = append(args, v)
		where += " AND " + strings.ReplaceAll(cond, "$?", fmt.Sprintf("$%d", len(args)))
	}
	if o.State != "" {
		add("state = $?", o.State)
	}
	if o.Label != "" {
		add(`label ILIKE $? ESCAPE '\'`, store.ContainsPattern(o.Label))
	}
	if o.Model != "" {
		add(`model ILIKE $? ESCAPE '\'`, store.ContainsPattern(o.Model))
	}
	if !o.UpdatedSince.IsZero() {
		add("updated_at >= $?", o.UpdatedSince)
	}
	if !o.Subagents {
		add("kind <> $?", store.SessionSubagent)
	}
	var total int
	if err := q.c.QueryRow(ctx, "SELECT count(*) FROM sessions WHERE "+where, args...).Scan(&total); err != nil {
		return nil, 0, pgError(err)
	}
	var limit any // NULL: no limit
	if o.Limit > 0 {
		limit = o.Limit
	}
	n := len(args)
	ss, err := q.sessions(ctx, "SELECT "+sessionColumns+" FROM sessions WHERE "+where+
		" ORDER BY "+o.OrderBy()+fmt.Sprintf(" LIMIT $%d OFFSET $%d", n+1, n+2),
		append(args, limit, o.Offset)...)
	return ss, total, err
}

func (q queries) Candidates(ctx context.Context, tenant, ref, prefix string) ([]store.Session, error) {
	return q.sessions(ctx, "SELECT "+sessionColumns+` FROM sessions
		WHERE tenant = $1 AND deleted_at IS NULL
		AND (label = $2 OR ($3 <> '' AND id::text LIKE $3 || '%'))`, tenant, ref, prefix)
}

func (q queries) sessions(ctx context.Context, sql string, args ...any) ([]store.Session, error) {
	rows, err := q.c.Query(ctx, sql, args...)
	if err != nil {
		return nil, pgError(err)
	}
	ss, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Session, error) { return scanSession(row) })
	if err != nil {
		return nil, pgError(err)
	}
	return ss, nil
}

func (q queries) InsertSession(ctx context.Context, s store.Session) error {
	_, err := q.c.Exec(ctx, `INSERT INTO sessions (id, tenant, dir, provider, model, persona, reasoning,
		kind, label, parent_id, root_id, state, entry_count, last_seq, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		s.ID, s.Tenant, s.Dir, s.Settings.Provider, s.Settings.Model, s.Settings.Persona,
		s.Settings.Reasoning, s.Kind, s.Label, nullUUID(s.ParentID), s.RootID, s.State,
		s.EntryCount, s.LastSeq, s.CreatedAt, s.UpdatedAt)
	if pgCode(err) == "23505" {
		return store.ErrExists
	}
	return pgError(err)
}

func (q queries) SetState(
	ctx context.Context, tenant string, id uuid.UUID, state store.State, at time.Time,
) (bool, error) {
	return q.update(ctx, `UPDATE sessions SET state = $3, updated_at = $4
		WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL`, id, tenant, state, at)
}

func (q queries) Delete(ctx context.Context, tenant string, id uuid.UUID, at time.Time) (bool, error) {
	return q.update(ctx, `UPDATE sessions SET deleted_at = $3, updated_at = $3
		WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL`, id, tenant, at)
}

func (q queries) SetCounts(ctx context.Context, id uuid.UUID, entryCount, lastSeq int64) error {
	_, err := q.c.Exec(ctx, "UPDATE sessions SET entry_count = $2, last_seq = $3 WHERE id = $1", id, entryCount, lastSeq)
	return pgError(err)
}

// update runs a statement and says whether it changed a row.
func (q queries) update(ctx context.Context, sql string, args ...any) (bool, error) {
	tag, err := q.c.Exec(ctx, sql, args...)
	if err != nil {
		return false, pgError(err)
	}
	return tag.RowsAffected() > 0, nil
}

const entryColumns = "seq, kind, payload, created_at, coalesce(compacted_by, 0)"

// activeEntryColumns are the columns of entries known to be active: their
// compacted_by is NULL, and entries leaves it out.
const activeEntryColumns = "seq, kind, payload, created_at"

// The entry reads need no ORDER BY seq: sorting whole rows, payloads
// included, was the largest part of the server's work for a long session,
// while the rows come mostly in order (the order they are stored in) and
// store.EntryRows puts them in order in linear time.

func (q queries) Entries(ctx context.Context, tenant string, session uuid.UUID, rows *store.EntryRows) error {
	return q.entries(ctx, rows, "SELECT "+entryColumns+` FROM entries
		WHERE session_id = $1 AND tenant = $2`, session, tenant)
}

func (q queries) ActiveEntries(
	ctx context.Context, tenant string, session uuid.UUID, from int64, rows *store.EntryRows,
) error {
	return q.entries(ctx, rows, "SELECT "+activeEntryColumns+` FROM entries
		WHERE session_id = $1 AND tenant = $2 AND seq >= $3 AND compacted_by IS NULL AND kind <> 'compaction'`,
		session, tenant, from)
}

func (q queries) KindEntries(
	ctx context.Context, tenant string, session uuid.UUID, kinds []string, through int64, rows *store.EntryRows,
) error {
	return q.entries(ctx, rows, "SELECT "+entryColumns+` FROM entries
		WHERE session_id = $1 AND tenant = $2 AND kind = ANY($3) AND seq <= $4`, session, tenant, kinds, through)
}

func (q queries) Latest(
	ctx context.Context, tenant string, session uuid.UUID, kinds []string, through int64, rows *store.EntryRows,
) error {
	return q.entries(ctx, rows, "SELECT DISTINCT ON (kind) "+entryColumns+` FROM entries
		WHERE session_id = $1 AND tenant = $2 AND kind = ANY($3) AND seq <= $4
		ORDER BY kind, seq DESC`, session, tenant, kinds, through)
}

// entries reads entry rows (entryColumns or activeEntryColumns) into rows.
func (q queries) entries(ctx context.Context, rows *store.EntryRows, sql string, args ...any) error {
	res, err := q.c.Query(ctx, sql, args...)
	if err != nil {
		return pgError(err)
	}
	defer res.Close()
	var (
		seq, compactedBy int64
		created          time.Time
	)
	// Kind and payload are taken as they came off the wire (text and json
	// are the same in pgx's binary format): the payload is copied once, into
	// the string its decoded fields share.
	dest := []any{&seq, nil, nil, &created, &compactedBy}
	for res.Next() {
		if len(res.FieldDescriptions()) == 4 { // activeEntryColumns
			dest = dest[:4]
		}
		if err := res.Scan(dest...); err != nil {
			return pgError(err)
		}
		raw := res.RawValues()
		rows.Add(seq, raw[1], string(raw[2]), created.UTC(), compactedBy)
	}
	return pgError(res.Err())
}

func (q queries) CopyEntries(
	ctx context.Context, tenant string, source, child uuid.UUID, through int64,
) (int64, error) {
	tag, err := q.c.Exec(ctx, `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at, compacted_by)
		SELECT $3, tenant, seq, kind, payload, created_at, CASE WHEN compacted_by <= $4 THEN compacted_by END
		FROM entries WHERE session_id = $1 AND tenant = $2 AND seq <= $4`, source, tenant, child, through)
	if err != nil {
		return 0, pgError(err)
	}
	return tag.RowsAffected(), nil
}

func (q queries) InsertEntry(ctx context.Context, tenant string, session uuid.UUID, row store.EntryRow) error {
	_, err := q.c.Exec(ctx, `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, session, tenant, row.Seq, string(row.Kind), string(row.Payload), row.CreatedAt)
	return pgError(err)
}

func (q queries) InsertTrace(ctx context.Context, tenant string, tr store.Trace, data []byte) (bool, error) {
	return q.update(ctx, `INSERT INTO moa_traces (id, session_id, tenant, seq, created_at, data)
		SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (
			SELECT 1 FROM sessions WHERE id = $2 AND tenant = $3 AND deleted_at IS NULL)`,
		tr.ID, tr.Session, tenant, tr.Seq, tr.CreatedAt, string(data))
}

func (q queries) Traces(
	ctx context.Context, tenant string, session uuid.UUID, add func(store.Trace, []byte) error,
) error {
	rows, err := q.c.Query(ctx, `SELECT id, seq, created_at, data FROM moa_traces
		WHERE session_id = $1 AND tenant = $2 ORDER BY created_at, id`, session, tenant)
	if err != nil {
		return pgError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			tr   store.Trace
			data []byte
		)
		if err := rows.Scan(&tr.ID, &tr.Seq, &tr.CreatedAt, &data); err != nil {
			return pgError(err)
		}
		tr.CreatedAt = tr.CreatedAt.UTC()
		if err := add(tr, data); err != nil {
			return err
		}
	}
	return pgError(rows.Err())
}

func (q queries) PutToolOutput(
	ctx context.Context, tenant string, session uuid.UUID, callID string, data []byte, at time.Time,
) (bool, error) {
	if data == nil {
		data = []byte{} // NOT NULL
	}
	return q.update(ctx, `INSERT INTO tool_outputs (session_id, tenant, call_id, created_at, data)
		SELECT $1, $2, $3, $4, $5 WHERE EXISTS (
			SELECT 1 FROM sessions WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL)
		ON CONFLICT (session_id, call_id) DO UPDATE SET created_at = excluded.created_at, data = excluded.data`,
		session, tenant, callID, at, data)
}

func (q queries) ToolOutput(
	ctx context.Context, tenant string, session uuid.UUID, callID string,
) ([]byte, bool, error) {
	var data []byte
	err := q.c.QueryRow(ctx, `SELECT data FROM tool_outputs WHERE session_id = $1 AND tenant = $2 AND call_id = $3`,
		session, tenant, callID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, pgError(err)
	}
	return data, true, nil
}

func (q queries) Memory(ctx context.Context, tenant, scope, target string) ([]byte, int64, error) {
	var (
		data    []byte
		version int64
	)
	err := q.c.QueryRow(ctx, `SELECT data, version FROM memories WHERE tenant = $1 AND scope = $2 AND target = $3`,
		tenant, scope, target).Scan(&data, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, pgError(err)
	}
	return data, version, nil
}

func (q queries) PutMemory(
	ctx context.Context, tenant, scope, target string, data []byte, version int64, at time.Time,
) (bool, error) {
	if version == 0 {
		return q.update(ctx, `INSERT INTO memories (tenant, scope, target, version, updated_at, data)
			VALUES ($1, $2, $3, 1, $4, $5) ON CONFLICT (tenant, scope, target) DO NOTHING`,
			tenant, scope, target, at, data)
	}
	return q.update(ctx, `UPDATE memories SET version = version + 1, updated_at = $5, data = $6
		WHERE tenant = $1 AND scope = $2 AND target = $3 AND version = $4`,
		tenant, scope, target, version, at, data)
}

// appendSQL inserts a batch and accounts for it in the session row, in one
// statement and so one round trip. Entries already stored are skipped (the
// retry of a batch whose commit was not acknowledged), and only the rows
// really inserted are counted. Nothing is inserted unless the session is
// live in the tenant, in which case no session row is updated either: the
// caller sees zero rows affected.
const appendSQL = `
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

// appendOneSQL is appendSQL for the most common batch, a single entry
// (a turn barrier right after one append), without the arrays.
const appendOneSQL = `
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

// compactSQL marks the entries a compaction checkpoint replaces. Entries
// already compacted keep the checkpoint that compacted them first.
const compactSQL = `UPDATE entries SET compacted_by = $3
	WHERE session_id = $1 AND tenant = $2 AND seq < $4 AND compacted_by IS NULL`

func (b *backend) Append(
	ctx context.Context, tenant string, session uuid.UUID, rows []store.EntryRow, at time.Time,
) error {
	if len(rows) >= copyThreshold {
		err := b.appendCopy(ctx, tenant, session, rows, at)
		// A unique violation means an earlier attempt of this batch was
		// committed without the acknowledgement reaching us (COPY cannot
		// skip conflicts itself): write it again, skipping what is there.
		if pgCode(err) != "23505" {
			return appendError(err)
		}
	}
	return appendError(b.appendInsert(ctx, tenant, session, rows, at))
}

func appendError(err error) error {
	if pgCode(err) == "23503" { // foreign key: no such session in the tenant
		return store.ErrNotFound
	}
	return pgError(err)
}

// appendInsert writes a batch with appendSQL. Compactions in the batch
// are applied by further statements sent in the same pipeline, which the
// server runs as one implicit transaction.
func (b *backend) appendInsert(
	ctx context.Context, tenant string, session uuid.UUID, rows []store.EntryRow, at time.Time,
) error {
	first := rows[0]
	query, args := appendOneSQL,
		[]any{session, tenant, first.Seq, string(first.Kind), string(first.Payload), first.CreatedAt, at}
	if len(rows) > 1 {
		seqs := make([]int64, len(rows))
		kinds := make([]string, len(rows))
		payloads := make([]string, len(rows))
		times := make([]time.Time, len(rows))
		for i, r := range rows {
			seqs[i], kinds[i], payloads[i], times[i] = r.Seq, string(r.Kind), string(r.Payload), r.CreatedAt
		}
		query, args = appendSQL, []any{session, tenant, seqs, kinds, payloads, times, at}
	}
	batch := &pgx.Batch{}
	batch.Queue(query, args...)
	for _, r := range rows {
		if r.Kind == transcript.KindCompaction {
			batch.Queue(compactSQL, session, tenant, r.Seq, r.FirstKept)
		}
	}
	var (
		tag pgconn.CommandTag
		err error
	)
	if batch.Len() == 1 {
		tag, err = b.pool.Exec(ctx, query, args...) // the common case, without a pipeline
	} else {
		tag, err = sendBatch(ctx, b.pool, batch)
	}
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
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
func (b *backend) appendCopy(
	ctx context.Context, tenant string, session uuid.UUID, rows []store.EntryRow, at time.Time,
) error {
	return store.WithTx(ctx, b.pool.Begin, func(tx pgx.Tx) error {
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"entries"},
			[]string{"session_id", "tenant", "seq", "kind", "payload", "created_at"},
			pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				r := rows[i]
				return []any{session, tenant, r.Seq, string(r.Kind), string(r.Payload), r.CreatedAt}, nil
			}))
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE sessions SET entry_count = entry_count + $3,
			last_seq = greatest(last_seq, $4), updated_at = greatest(updated_at, $5)
			WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL`,
			session, tenant, n, rows[len(rows)-1].Seq, at)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		for _, r := range rows {
			if r.Kind == transcript.KindCompaction {
				if _, err := tx.Exec(ctx, compactSQL, session, tenant, r.Seq, r.FirstKept); err != nil {
					return err
				}
			}
		}
		return nil
	})
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

// pgError marks errors worth retrying as store.ErrTransient and passes
// others through.
func pgError(err error) error {
	if err == nil || errors.Is(err, store.ErrTransient) || !pgTransient(err) {
		return err
	}
	return store.Transient(err)
}

// pgTransient says whether an operation that failed with err may succeed if
// simply tried again: the connection was lost or refused (a restart), the
// server is shutting down or starting up, or the transaction lost a
// serialization race or a deadlock.
func pgTransient(err error) bool {
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
