// Package sqlite is the SQLite backend of package store: the embedded store
// `aerie run` uses by default, one database file per user
// ($AERIE_HOME/sessions.db), through modernc.org/sqlite (no cgo). It
// supplies the statements and the schema migrations; the sessions' logic is
// store.DB's.
//
// Open creates the file (mode 0600) and its directory when needed and
// migrates the schema before returning; it retries the races of several
// processes creating the same file. Every connection enables foreign keys
// and WAL, waits up to 5 s for locks, syncs NORMAL and checkpoints every
// 500 pages. Writes go through one connection per process, reads through a
// pool of query-only connections beside it; appends made at once (the
// journals of concurrent subagents) are committed together, in one
// transaction. A lock held past the busy
// timeout is reported as store.ErrTransient. Close checkpoints and
// truncates the write-ahead log.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/aerie-run/aerie/runner/store"
)

// migrationFiles holds the schema migrations, NNNN_name.up.sql.
//
//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// Open opens the database file at path, creating its directory and the
// file when needed, and brings its schema up to date. A connection or
// migration failure is an error; races with other processes opening the
// same new file are retried.
func Open(ctx context.Context, path string) (*store.DB, error) {
	b, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	return store.New(b), nil
}

// backend is the SQLite store.Backend. Several processes may share its
// file.
//
// Writes go through a pool of one connection, so this process never has two
// writers contending for SQLite's single write lock; transactions that write
// start with BEGIN IMMEDIATE, so a writer of another process makes them wait
// (up to the busy timeout) at the start instead of failing halfway. Reads use
// a separate pool of query-only connections, which WAL lets run beside the
// writer.
type backend struct {
	queries // reading from the read pool, writing through the write pool
	write   *sql.DB
	read    *sql.DB

	// appendMu guards appendStmts, Append's statements, prepared on the
	// write pool when first needed and kept: SQLite parsing them again
	// for every batch cost more than running them.
	appendMu    sync.Mutex
	appendStmts *appendStmts
	// group gathers the batches appended while a commit is under way, for
	// the next transaction to commit together (see Append).
	group group

	closeOnce sync.Once
	closeErr  error
}

// appendStmts are the statements of Append.
type appendStmts struct {
	live, insert, count *sql.Stmt
}

// appendStatements returns Append's statements, preparing them the first
// time. A failure is returned, and the next call tries again.
func (b *backend) appendStatements(ctx context.Context) (*appendStmts, error) {
	b.appendMu.Lock()
	defer b.appendMu.Unlock()
	if b.appendStmts != nil {
		return b.appendStmts, nil
	}
	var st appendStmts
	for _, q := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&st.live, `SELECT 1 FROM sessions WHERE id = ? AND tenant = ? AND deleted_at IS NULL`},
		// Entries already stored are skipped: this is the retry of a batch
		// whose commit was not acknowledged.
		{&st.insert, `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, seq) DO NOTHING`},
		{&st.count, `UPDATE sessions SET entry_count = entry_count + ?,
			last_seq = max(last_seq, ?), updated_at = max(updated_at, ?) WHERE id = ? AND tenant = ?`},
	} {
		stmt, err := b.write.PrepareContext(ctx, q.query)
		if err != nil {
			_ = st.close()
			return nil, err
		}
		*q.stmt = stmt
	}
	b.appendStmts = &st
	return b.appendStmts, nil
}

func (st *appendStmts) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{st.live, st.insert, st.count} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}

// bootstrapTimeout bounds the retries of concurrent-open and migration
// races when several processes open a new database at once.
const bootstrapTimeout = 30 * time.Second

func open(ctx context.Context, path string) (*backend, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil, fmt.Errorf("open sqlite store: %q is not a file path: sessions must persist", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite store: create directory: %w", err)
	}
	// Created here rather than by SQLite so that it is private to the user:
	// transcripts hold whatever the agent read.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: create database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open sqlite store: create database file: %w", err)
	}

	write, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	write.SetMaxOpenConns(1)
	read, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	read.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	b := &backend{queries: queries{read: read, write: write}, write: write, read: read}
	if err := b.bootstrap(ctx); err != nil {
		_ = read.Close()
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	return b, nil
}

// dsn returns the modernc.org/sqlite DSN of the database at path (an
// absolute path). Pragmas given as _pragma apply to every connection the
// pool opens; the driver runs busy_timeout first, so the others wait for
// locks too.
func dsn(path string, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "wal_autocheckpoint(500)")
	if writer {
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	// As a URI, SQLite would read '?', '#' and '%' in the path as syntax.
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	return "file:" + escaped + "?" + q.Encode()
}

// bootstrap connects the write pool and migrates, retrying while another process
// holds the locks of the same steps: two processes opening a new file at once
// race on switching it to WAL and on creating the schema.
func (b *backend) bootstrap(ctx context.Context) error {
	deadline := time.Now().Add(bootstrapTimeout)
	delay := 10 * time.Millisecond
	for {
		err := b.bootstrapOnce(ctx)
		if err == nil || !sqliteTransient(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(delay/2 + rand.N(delay))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

func (b *backend) bootstrapOnce(ctx context.Context) error {
	// The read pool connects when it is first used: every connection costs
	// SQLite's setup and a parse of the schema, and a new session is only
	// written to until its end. The writer has switched the file to WAL by
	// then, so a reader never races another process on that.
	if err := b.write.PingContext(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := b.migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func (b *backend) migrate(ctx context.Context) error {
	ms, err := store.Migrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	// Nearly always the schema is current, which a plain read shows
	// without taking the write lock. A database being migrated by another
	// process reads as it was before, and takes the path below.
	const versionSQL = "SELECT coalesce(max(version), 0) FROM schema_migrations"
	var have int64
	err = b.write.QueryRowContext(ctx, versionSQL).Scan(&have)
	if err == nil && len(ms) > 0 && have >= ms[len(ms)-1].Version {
		return nil
	}
	// BEGIN IMMEDIATE takes the write lock before reading the version, so a
	// second process waits for the first and then finds nothing to do.
	return store.WithTx(ctx, b.beginWrite, func(t tx) error {
		if _, err := t.tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at INTEGER NOT NULL)`); err != nil {
			return err
		}
		var current int64
		if err := t.tx.QueryRowContext(ctx, versionSQL).Scan(&current); err != nil {
			return err
		}
		for _, m := range ms {
			if m.Version <= current {
				continue
			}
			if _, err := t.tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := t.tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
				m.Version, m.Name, time.Now().UnixMicro()); err != nil {
				return fmt.Errorf("record migration %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// Close closes both pools, checkpointing the write-ahead log into the
// database and truncating it on the way, so that a store closed normally
// leaves one self-contained file. Closing again returns the first result.
func (b *backend) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.close() })
	return b.closeErr
}

func (b *backend) close() error {
	b.appendMu.Lock()
	if b.appendStmts != nil {
		_ = b.appendStmts.close() // closed with their connection anyway
		b.appendStmts = nil
	}
	b.appendMu.Unlock()
	errRead := b.read.Close()
	// busy is 1 when another process is still reading and the log could
	// not be truncated; that process's last close will do it.
	var busy, logPages, checkpointed int
	errCheckpoint := b.write.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)").
		Scan(&busy, &logPages, &checkpointed)
	if errCheckpoint != nil {
		errCheckpoint = fmt.Errorf("checkpoint: %w", errCheckpoint)
	}
	errWrite := b.write.Close()
	if err := errors.Join(errRead, errCheckpoint, errWrite); err != nil {
		return fmt.Errorf("close sqlite store: %w", err)
	}
	return nil
}

// Read begins a read-only transaction on the read pool. WAL gives it a
// snapshot of the database from its first read on.
func (b *backend) Read(ctx context.Context) (store.Tx, error) {
	t, err := begin(ctx, b.read, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Write begins a transaction on the write connection, with BEGIN
// IMMEDIATE: it takes the write lock first.
func (b *backend) Write(ctx context.Context) (store.Tx, error) {
	t, err := b.beginWrite(ctx)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (b *backend) beginWrite(ctx context.Context) (tx, error) { return begin(ctx, b.write, nil) }

func begin(ctx context.Context, db *sql.DB, opts *sql.TxOptions) (tx, error) {
	t, err := db.BeginTx(ctx, opts)
	if err != nil {
		return tx{}, sqliteError(err)
	}
	return tx{queries{read: t, write: t}, t}, nil
}

// tx is a transaction of the backend, its statements run in it, and
// *sql.Tx adapted to store.Transaction.
type tx struct {
	queries
	tx *sql.Tx
}

func (t tx) Commit(context.Context) error { return sqliteError(t.tx.Commit()) }

func (t tx) Rollback(context.Context) error {
	if err := t.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// conn is what statements run on: a pool or a transaction.
type conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// queries are the backend's statements: reads on read, writes on write
// (the same transaction inside one).
type queries struct{ read, write conn }

const sessionColumns = `id, tenant, dir, provider, model, persona, reasoning, kind, label,
	parent_id, root_id, state, entry_count, last_seq, created_at, updated_at, deleted_at`

type scanner interface{ Scan(dest ...any) error }

func scanSession(row scanner) (store.Session, error) {
	var (
		s                store.Session
		parent           uuid.NullUUID
		created, updated int64
		deleted          sql.NullInt64
	)
	err := row.Scan(&s.ID, &s.Tenant, &s.Dir, &s.Settings.Provider, &s.Settings.Model,
		&s.Settings.Persona, &s.Settings.Reasoning, &s.Kind, &s.Label, &parent, &s.RootID,
		&s.State, &s.EntryCount, &s.LastSeq, &created, &updated, &deleted)
	if err != nil {
		return store.Session{}, err
	}
	s.ParentID = parent.UUID
	s.CreatedAt, s.UpdatedAt = fromMicro(created), fromMicro(updated)
	if deleted.Valid {
		s.DeletedAt = fromMicro(deleted.Int64)
	}
	return s, nil
}

func fromMicro(us int64) time.Time { return time.UnixMicro(us).UTC() }

func (q queries) Session(ctx context.Context, tenant string, id uuid.UUID) (store.Session, error) {
	s, err := scanSession(q.read.QueryRowContext(ctx,
		"SELECT "+sessionColumns+" FROM sessions WHERE id = ? AND tenant = ? AND deleted_at IS NULL", id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, store.ErrNotFound
	}
	return s, sqliteError(err)
}

func (q queries) Sessions(ctx context.Context, tenant string, includeDeleted bool) ([]store.Session, error) {
	return q.sessions(ctx, "SELECT "+sessionColumns+` FROM sessions
		WHERE tenant = ? AND (? OR deleted_at IS NULL) ORDER BY updated_at DESC, id`,
		tenant, includeDeleted)
}

func (q queries) SessionPage(ctx context.Context, tenant string, o store.PageOptions) ([]store.Session, int, error) {
	where := "tenant = ? AND deleted_at IS NULL"
	args := []any{tenant}
	if o.State != "" {
		where += " AND state = ?"
		args = append(args, o.State)
	}
	if o.Label != "" {
		where += ` AND label LIKE ? ESCAPE '\'`
		args = append(args, store.ContainsPattern(o.Label))
	}
	if o.Model != "" {
		where += ` AND model LIKE ? ESCAPE '\'`
		args = append(args, store.ContainsPattern(o.Model))
	}
	if !o.UpdatedSince.IsZero() {
		where += " AND updated_at >= ?"
		args = append(args, o.UpdatedSince.UnixMicro())
	}
	if !o.Subagents {
		where += " AND kind <> ?"
		args = append(args, store.SessionSubagent)
	}
	var total int
	if err := q.read.QueryRowContext(ctx, "SELECT count(*) FROM sessions WHERE "+where, args...).Scan(&total); err != nil {
		return nil, 0, sqliteError(err)
	}
	limit := int64(o.Limit)
	if limit == 0 {
		limit = -1 // SQLite: no limit
	}
	ss, err := q.sessions(ctx, "SELECT "+sessionColumns+" FROM sessions WHERE "+where+
		" ORDER BY "+o.OrderBy()+" LIMIT ? OFFSET ?", append(args, limit, o.Offset)...)
	return ss, total, err
}

func (q queries) Candidates(ctx context.Context, tenant, ref, prefix string) ([]store.Session, error) {
	// Ids are stored in lowercase.
	return q.sessions(ctx, "SELECT "+sessionColumns+` FROM sessions
		WHERE tenant = ? AND deleted_at IS NULL
		AND (label = ? OR (? <> '' AND id LIKE ? || '%'))`, tenant, ref, prefix, prefix)
}

func (q queries) sessions(ctx context.Context, query string, args ...any) ([]store.Session, error) {
	rows, err := q.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, sqliteError(err)
	}
	defer rows.Close()
	var ss []store.Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, sqliteError(err)
		}
		ss = append(ss, s)
	}
	return ss, sqliteError(rows.Err())
}

func (q queries) InsertSession(ctx context.Context, s store.Session) error {
	_, err := q.write.ExecContext(ctx, `INSERT INTO sessions (id, tenant, dir, provider, model, persona, reasoning,
		kind, label, parent_id, root_id, state, entry_count, last_seq, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.Tenant, s.Dir, s.Settings.Provider, s.Settings.Model, s.Settings.Persona,
		s.Settings.Reasoning, s.Kind, s.Label,
		uuid.NullUUID{UUID: s.ParentID, Valid: s.ParentID != uuid.Nil}, s.RootID, s.State,
		s.EntryCount, s.LastSeq, s.CreatedAt.UnixMicro(), s.UpdatedAt.UnixMicro())
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return store.ErrExists
	}
	return sqliteError(err)
}

func (q queries) SetState(
	ctx context.Context, tenant string, id uuid.UUID, state store.State, at time.Time,
) (bool, error) {
	return q.update(ctx, `UPDATE sessions SET state = ?, updated_at = ?
		WHERE id = ? AND tenant = ? AND deleted_at IS NULL`, state, at.UnixMicro(), id, tenant)
}

func (q queries) Delete(ctx context.Context, tenant string, id uuid.UUID, at time.Time) (bool, error) {
	return q.update(ctx, `UPDATE sessions SET deleted_at = ?, updated_at = ?
		WHERE id = ? AND tenant = ? AND deleted_at IS NULL`, at.UnixMicro(), at.UnixMicro(), id, tenant)
}

func (q queries) SetCounts(ctx context.Context, id uuid.UUID, entryCount, lastSeq int64) error {
	_, err := q.write.ExecContext(ctx, "UPDATE sessions SET entry_count = ?, last_seq = ? WHERE id = ?",
		entryCount, lastSeq, id)
	return sqliteError(err)
}

// update runs a statement and says whether it changed a row.
func (q queries) update(ctx context.Context, query string, args ...any) (bool, error) {
	res, err := q.write.ExecContext(ctx, query, args...)
	if err != nil {
		return false, sqliteError(err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

const entryColumns = "seq, kind, payload, created_at, coalesce(compacted_by, 0)"

// activeEntryColumns are the columns of entries known to be active: their
// compacted_by is NULL, and entries leaves it out (every column read costs
// the driver several calls into SQLite per row).
const activeEntryColumns = "seq, kind, payload, created_at"

func (q queries) Entries(ctx context.Context, tenant string, session uuid.UUID, rows *store.EntryRows) error {
	return q.entries(ctx, rows, "SELECT "+entryColumns+` FROM entries
		WHERE session_id = ? AND tenant = ? ORDER BY seq`, session, tenant)
}

func (q queries) ActiveEntries(
	ctx context.Context, tenant string, session uuid.UUID, from int64, rows *store.EntryRows,
) error {
	return q.entries(ctx, rows, "SELECT "+activeEntryColumns+` FROM entries
		WHERE session_id = ? AND tenant = ? AND seq >= ? AND compacted_by IS NULL AND kind <> 'compaction'
		ORDER BY seq`, session, tenant, from)
}

func (q queries) KindEntries(
	ctx context.Context, tenant string, session uuid.UUID, kinds []string, through int64, rows *store.EntryRows,
) error {
	return q.entries(ctx, rows, "SELECT "+entryColumns+` FROM entries
		WHERE session_id = ? AND tenant = ? AND seq <= ? AND kind IN (`+placeholders(len(kinds))+`)
		ORDER BY seq`, kindArgs([]any{session, tenant, through}, kinds)...)
}

// Latest relies on SQLite taking the bare columns of an aggregate query
// from the row that holds the max().
func (q queries) Latest(
	ctx context.Context, tenant string, session uuid.UUID, kinds []string, through int64, rows *store.EntryRows,
) error {
	return q.entries(ctx, rows, `SELECT max(seq), kind, payload, created_at, coalesce(compacted_by, 0)
		FROM entries WHERE session_id = ? AND tenant = ? AND seq <= ? AND kind IN (`+placeholders(len(kinds))+`)
		GROUP BY kind`, kindArgs([]any{session, tenant, through}, kinds)...)
}

// placeholders returns n comma-separated parameters.
func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

func kindArgs(args []any, kinds []string) []any {
	for _, k := range kinds {
		args = append(args, k)
	}
	return args
}

// entries reads entry rows (entryColumns or activeEntryColumns) into rows.
func (q queries) entries(ctx context.Context, rows *store.EntryRows, query string, args ...any) error {
	res, err := q.read.QueryContext(ctx, query, args...)
	if err != nil {
		return sqliteError(err)
	}
	defer res.Close()
	var (
		seq, created, compactedBy int64
		kind                      sql.RawBytes
		// The driver reads TEXT as a string, which a *string takes without
		// a copy.
		payload string
	)
	dest := []any{&seq, &kind, &payload, &created, &compactedBy}
	cols, err := res.Columns()
	if err != nil {
		return sqliteError(err)
	}
	if len(cols) == 4 { // activeEntryColumns
		dest = dest[:4]
	}
	for res.Next() {
		if err := res.Scan(dest...); err != nil {
			return sqliteError(err)
		}
		rows.Add(seq, kind, payload, fromMicro(created), compactedBy)
	}
	return sqliteError(res.Err())
}

func (q queries) CopyEntries(
	ctx context.Context, tenant string, source, child uuid.UUID, through int64,
) (int64, error) {
	res, err := q.write.ExecContext(ctx,
		`INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at, compacted_by)
		SELECT ?, tenant, seq, kind, payload, created_at, CASE WHEN compacted_by <= ? THEN compacted_by END
		FROM entries WHERE session_id = ? AND tenant = ? AND seq <= ?`, child, through, source, tenant, through)
	if err != nil {
		return 0, sqliteError(err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

func (q queries) InsertEntry(ctx context.Context, tenant string, session uuid.UUID, row store.EntryRow) error {
	_, err := q.write.ExecContext(ctx, `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`,
		session, tenant, row.Seq, string(row.Kind), string(row.Payload), row.CreatedAt.UnixMicro())
	return sqliteError(err)
}

func (q queries) InsertTrace(ctx context.Context, tenant string, tr store.Trace, data []byte) (bool, error) {
	return q.update(ctx, `INSERT INTO moa_traces (id, session_id, tenant, seq, created_at, data)
		SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (
			SELECT 1 FROM sessions WHERE id = ? AND tenant = ? AND deleted_at IS NULL)`,
		tr.ID, tr.Session, tenant, tr.Seq, tr.CreatedAt.UnixMicro(), string(data), tr.Session, tenant)
}

func (q queries) Traces(
	ctx context.Context, tenant string, session uuid.UUID, add func(store.Trace, []byte) error,
) error {
	rows, err := q.read.QueryContext(ctx, `SELECT id, seq, created_at, data FROM moa_traces
		WHERE session_id = ? AND tenant = ? ORDER BY created_at, id`, session, tenant)
	if err != nil {
		return sqliteError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			tr      store.Trace
			created int64
			data    []byte
		)
		if err := rows.Scan(&tr.ID, &tr.Seq, &created, &data); err != nil {
			return sqliteError(err)
		}
		tr.CreatedAt = fromMicro(created)
		if err := add(tr, data); err != nil {
			return err
		}
	}
	return sqliteError(rows.Err())
}

func (q queries) PutToolOutput(
	ctx context.Context, tenant string, session uuid.UUID, callID string, data []byte, at time.Time,
) (bool, error) {
	if data == nil {
		data = []byte{} // NOT NULL
	}
	return q.update(ctx, `INSERT INTO tool_outputs (session_id, tenant, call_id, created_at, data)
		SELECT ?, ?, ?, ?, ? WHERE EXISTS (
			SELECT 1 FROM sessions WHERE id = ? AND tenant = ? AND deleted_at IS NULL)
		ON CONFLICT (session_id, call_id) DO UPDATE SET created_at = excluded.created_at, data = excluded.data`,
		session, tenant, callID, at.UnixMicro(), data, session, tenant)
}

func (q queries) ToolOutput(
	ctx context.Context, tenant string, session uuid.UUID, callID string,
) ([]byte, bool, error) {
	var data []byte
	err := q.read.QueryRowContext(ctx, `SELECT data FROM tool_outputs WHERE session_id = ? AND tenant = ? AND call_id = ?`,
		session, tenant, callID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, sqliteError(err)
	}
	return data, true, nil
}

func (q queries) Memory(ctx context.Context, tenant, scope, target string) ([]byte, int64, error) {
	var (
		data    []byte
		version int64
	)
	err := q.read.QueryRowContext(ctx, `SELECT data, version FROM memories WHERE tenant = ? AND scope = ? AND target = ?`,
		tenant, scope, target).Scan(&data, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, sqliteError(err)
	}
	return data, version, nil
}

func (q queries) PutMemory(
	ctx context.Context, tenant, scope, target string, data []byte, version int64, at time.Time,
) (bool, error) {
	if version == 0 {
		return q.update(ctx, `INSERT INTO memories (tenant, scope, target, version, updated_at, data)
			VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT (tenant, scope, target) DO NOTHING`,
			tenant, scope, target, at.UnixMicro(), data)
	}
	return q.update(ctx, `UPDATE memories SET version = version + 1, updated_at = ?, data = ?
		WHERE tenant = ? AND scope = ? AND target = ? AND version = ?`,
		at.UnixMicro(), data, tenant, scope, target, version)
}

func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

// sqliteError marks errors worth retrying as store.ErrTransient and passes
// others through.
func sqliteError(err error) error {
	if err == nil || errors.Is(err, store.ErrTransient) || !sqliteTransient(err) {
		return err
	}
	return store.Transient(err)
}

// sqliteTransient says whether err is SQLite's "busy" or "locked": another
// connection, likely of another process, held a lock longer than the busy
// timeout.
func sqliteTransient(err error) bool {
	switch sqliteCode(err) & 0xff { // the primary code of an extended one
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}
