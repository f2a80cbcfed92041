package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
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
)

// SQLite is the embedded store `aerie run` uses by default, one database
// file per user ($AERIE_HOME/sessions.db). It is safe for concurrent use,
// and several processes may share the file.
//
// Writes go through a pool of one connection, so this process never has two
// writers contending for SQLite's single write lock; transactions that write
// start with BEGIN IMMEDIATE, so a writer of another process makes them wait
// (up to the busy timeout) at the start instead of failing halfway. Reads use
// a separate pool of query-only connections, which WAL lets run beside the
// writer.
type SQLite struct {
	write *sql.DB
	read  *sql.DB

	// appendMu guards appendStmts, Append's statements, prepared on the
	// write pool when first needed and kept: SQLite parsing them again
	// for every batch cost more than running them.
	appendMu    sync.Mutex
	appendStmts *sqliteAppendStmts

	closeOnce sync.Once
	closeErr  error
}

// sqliteAppendStmts are the statements of Append.
type sqliteAppendStmts struct {
	live, insert, count *sql.Stmt
}

// appendStatements returns Append's statements, preparing them the first
// time. A failure is returned, and the next call tries again.
func (s *SQLite) appendStatements(ctx context.Context) (*sqliteAppendStmts, error) {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	if s.appendStmts != nil {
		return s.appendStmts, nil
	}
	var st sqliteAppendStmts
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
		stmt, err := s.write.PrepareContext(ctx, q.query)
		if err != nil {
			st.close()
			return nil, err
		}
		*q.stmt = stmt
	}
	s.appendStmts = &st
	return s.appendStmts, nil
}

func (st *sqliteAppendStmts) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{st.live, st.insert, st.count} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}

var _ Store = (*SQLite)(nil)

// sqliteBootstrapTimeout bounds the retries of concurrent-open and migration
// races when several processes open a new database at once.
const sqliteBootstrapTimeout = 30 * time.Second

// OpenSQLite opens the database file at path, creating its directory and the
// file when needed, and brings its schema up to date. Every connection
// enables foreign keys and WAL, waits up to 5 s for locks, syncs NORMAL and
// checkpoints every 500 pages. A connection or migration failure is an
// error; races with other processes opening the same new file are retried.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
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

	write, err := sql.Open("sqlite", sqliteDSN(abs, true))
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	write.SetMaxOpenConns(1)
	read, err := sql.Open("sqlite", sqliteDSN(abs, false))
	if err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	read.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	s := &SQLite{write: write, read: read}
	if err := s.bootstrap(ctx); err != nil {
		_ = read.Close()
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	return s, nil
}

// sqliteDSN returns the modernc.org/sqlite DSN of the database at path (an
// absolute path). Pragmas given as _pragma apply to every connection the
// pool opens; the driver runs busy_timeout first, so the others wait for
// locks too.
func sqliteDSN(path string, writer bool) string {
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
func (s *SQLite) bootstrap(ctx context.Context) error {
	deadline := time.Now().Add(sqliteBootstrapTimeout)
	delay := 10 * time.Millisecond
	for {
		err := s.bootstrapOnce(ctx)
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

func (s *SQLite) bootstrapOnce(ctx context.Context) error {
	// The read pool connects when it is first used: every connection costs
	// SQLite's setup and a parse of the schema, and a new session is only
	// written to until its end. The writer has switched the file to WAL by
	// then, so a reader never races another process on that.
	if err := s.write.PingContext(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func (s *SQLite) migrate(ctx context.Context) error {
	ms, err := migrations("sqlite")
	if err != nil {
		return err
	}
	// Nearly always the schema is current, which a plain read shows
	// without taking the write lock. A database being migrated by another
	// process reads as it was before, and takes the path below.
	var have int64
	if err := s.write.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&have); err == nil && len(ms) > 0 && have >= ms[len(ms)-1].version {
		return nil
	}
	// BEGIN IMMEDIATE takes the write lock before reading the version, so a
	// second process waits for the first and then finds nothing to do.
	return withTx(ctx, s.beginWrite, func(tx sqlTx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at INTEGER NOT NULL)`); err != nil {
			return err
		}
		var current int64
		if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
			return err
		}
		for _, m := range ms {
			if m.version <= current {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
				m.version, m.name, now().UnixMicro()); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
		}
		return nil
	})
}

// Close closes both pools, checkpointing the write-ahead log into the
// database and truncating it on the way, so that a store closed normally
// leaves one self-contained file. Closing again returns the first result.
func (s *SQLite) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *SQLite) close() error {
	s.appendMu.Lock()
	if s.appendStmts != nil {
		_ = s.appendStmts.close() // closed with their connection anyway
		s.appendStmts = nil
	}
	s.appendMu.Unlock()
	errRead := s.read.Close()
	// busy is 1 when another process is still reading and the log could
	// not be truncated; that process's last close will do it.
	var busy, logPages, checkpointed int
	errCheckpoint := s.write.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)").
		Scan(&busy, &logPages, &checkpointed)
	if errCheckpoint != nil {
		errCheckpoint = fmt.Errorf("checkpoint: %w", errCheckpoint)
	}
	errWrite := s.write.Close()
	if err := errors.Join(errRead, errCheckpoint, errWrite); err != nil {
		return fmt.Errorf("close sqlite store: %w", err)
	}
	return nil
}

func (s *SQLite) beginWrite(ctx context.Context) (sqlTx, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	return sqlTx{tx}, err
}

func (s *SQLite) beginRead(ctx context.Context) (sqlTx, error) {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	return sqlTx{tx}, err
}

const sqliteSessionColumns = `id, tenant, dir, provider, model, persona, reasoning, kind, label,
	parent_id, root_id, state, entry_count, last_seq, created_at, updated_at, deleted_at`

type scanner interface{ Scan(dest ...any) error }

func scanSQLiteSession(row scanner) (Session, error) {
	var (
		s                Session
		parent           uuid.NullUUID
		created, updated int64
		deleted          sql.NullInt64
	)
	err := row.Scan(&s.ID, &s.Tenant, &s.Dir, &s.Settings.Provider, &s.Settings.Model,
		&s.Settings.Persona, &s.Settings.Reasoning, &s.Kind, &s.Label, &parent, &s.RootID,
		&s.State, &s.EntryCount, &s.LastSeq, &created, &updated, &deleted)
	if err != nil {
		return Session{}, err
	}
	s.ParentID = parent.UUID
	s.CreatedAt, s.UpdatedAt = fromMicro(created), fromMicro(updated)
	if deleted.Valid {
		s.DeletedAt = fromMicro(deleted.Int64)
	}
	return s, nil
}

func fromMicro(us int64) time.Time { return time.UnixMicro(us).UTC() }

// sqlQuerier is what reads need: a pool or a transaction.
type sqlQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *SQLite) liveSession(ctx context.Context, q sqlQuerier, tenant string, id uuid.UUID) (Session, error) {
	sess, err := scanSQLiteSession(q.QueryRowContext(ctx,
		"SELECT "+sqliteSessionColumns+" FROM sessions WHERE id = ? AND tenant = ? AND deleted_at IS NULL", id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, sqliteError(err)
	}
	return sess, nil
}

func (s *SQLite) Create(ctx context.Context, tenant string, ns NewSession) (Session, error) {
	sess, err := prepareCreate(tenant, ns, now())
	if err != nil {
		return Session{}, fmt.Errorf("create session: %w", err)
	}
	err = withTx(ctx, s.beginWrite, func(tx sqlTx) error {
		if sess.ParentID != uuid.Nil {
			parent, err := s.liveSession(ctx, tx, tenant, sess.ParentID)
			if err != nil {
				return fmt.Errorf("parent: %w", err)
			}
			sess.RootID = parent.RootID
		}
		return s.insertSession(ctx, tx, sess)
	})
	if err != nil {
		return Session{}, fmt.Errorf("create session: %w", sqliteError(err))
	}
	return sess, nil
}

func (s *SQLite) insertSession(ctx context.Context, tx sqlTx, sess Session) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, tenant, dir, provider, model, persona, reasoning,
		kind, label, parent_id, root_id, state, entry_count, last_seq, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sess.ID, sess.Tenant, sess.Dir, sess.Settings.Provider, sess.Settings.Model, sess.Settings.Persona,
		sess.Settings.Reasoning, sess.Kind, sess.Label, nullUUID(sess.ParentID), sess.RootID, sess.State,
		sess.EntryCount, sess.LastSeq, sess.CreatedAt.UnixMicro(), sess.UpdatedAt.UnixMicro())
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return fmt.Errorf("session %s: %w", sess.ID, ErrExists)
	}
	return err
}

func (s *SQLite) Session(ctx context.Context, tenant string, id uuid.UUID) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, fmt.Errorf("get session: %w", err)
	}
	sess, err := s.liveSession(ctx, s.read, tenant, id)
	if err != nil {
		return Session{}, fmt.Errorf("get session: %w", err)
	}
	return sess, nil
}

func (s *SQLite) List(ctx context.Context, tenant string, opts ListOptions) ([]Session, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	ss, err := s.querySessions(ctx, "SELECT "+sqliteSessionColumns+` FROM sessions
		WHERE tenant = ? AND (? OR deleted_at IS NULL) ORDER BY updated_at DESC, id`,
		tenant, opts.IncludeDeleted)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return ss, nil
}

func (s *SQLite) querySessions(ctx context.Context, query string, args ...any) ([]Session, error) {
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, sqliteError(err)
	}
	defer rows.Close()
	var ss []Session
	for rows.Next() {
		sess, err := scanSQLiteSession(rows)
		if err != nil {
			return nil, sqliteError(err)
		}
		ss = append(ss, sess)
	}
	return ss, sqliteError(rows.Err())
}

func (s *SQLite) Resolve(ctx context.Context, tenant, ref string) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, fmt.Errorf("resolve session: %w", err)
	}
	prefix, _ := idPrefix(ref)
	if id, err := uuid.Parse(ref); err == nil {
		prefix = id.String()
	}
	// idPrefix admits no LIKE wildcards, and ids are stored in lowercase.
	candidates, err := s.querySessions(ctx, "SELECT "+sqliteSessionColumns+` FROM sessions
		WHERE tenant = ? AND deleted_at IS NULL
		AND (label = ? OR (? <> '' AND id LIKE ? || '%'))`, tenant, ref, prefix, prefix)
	if err != nil {
		return Session{}, fmt.Errorf("resolve session: %w", err)
	}
	sess, err := resolve(candidates, ref)
	if err != nil {
		return Session{}, fmt.Errorf("resolve session: %w", err)
	}
	return sess, nil
}

func (s *SQLite) SetState(ctx context.Context, tenant string, id uuid.UUID, state State) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("set session state: %w", err)
	}
	if !state.valid() {
		return fmt.Errorf("set session state: unknown state %q: %w", state, ErrInvalid)
	}
	res, err := s.write.ExecContext(ctx, `UPDATE sessions SET state = ?, updated_at = ?
		WHERE id = ? AND tenant = ? AND deleted_at IS NULL`, state, now().UnixMicro(), id, tenant)
	if err != nil {
		return fmt.Errorf("set session state: %w", sqliteError(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("set session state: session %s: %w", id, ErrNotFound)
	}
	return nil
}

func (s *SQLite) Delete(ctx context.Context, tenant string, id uuid.UUID) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	t := now().UnixMicro()
	res, err := s.write.ExecContext(ctx, `UPDATE sessions SET deleted_at = ?, updated_at = ?
		WHERE id = ? AND tenant = ? AND deleted_at IS NULL`, t, t, id, tenant)
	if err != nil {
		return fmt.Errorf("delete session: %w", sqliteError(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("delete session: session %s: %w", id, ErrNotFound)
	}
	return nil
}

func (s *SQLite) Append(ctx context.Context, tenant string, session uuid.UUID, entries []Entry) error {
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
	stmts, err := s.appendStatements(ctx)
	if err != nil {
		return fmt.Errorf("append entries: prepare: %w", sqliteError(err))
	}
	err = withTx(ctx, s.beginWrite, func(tx sqlTx) error {
		id := session.String()
		var one int
		switch err := tx.StmtContext(ctx, stmts.live).QueryRowContext(ctx, id, tenant).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("session %s: %w", session, ErrNotFound)
		case err != nil:
			return err
		}
		insert := tx.StmtContext(ctx, stmts.insert)
		var inserted, lastSeq int64
		for _, e := range es {
			res, err := insert.ExecContext(ctx, id, tenant, e.seq, string(e.kind), string(e.payload), e.createdAt.UnixMicro())
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				inserted += n
				lastSeq = e.seq
			}
		}
		if _, err := tx.StmtContext(ctx, stmts.count).ExecContext(ctx, inserted, lastSeq, now().UnixMicro(), id, tenant); err != nil {
			return err
		}
		for _, e := range es {
			if e.kind != KindCompaction {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE entries SET compacted_by = ?
				WHERE session_id = ? AND tenant = ? AND seq < ? AND compacted_by IS NULL`,
				e.seq, session, tenant, e.firstKept); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append entries: %w", sqliteError(err))
	}
	return nil
}

const sqliteEntryColumns = "seq, kind, payload, created_at, coalesce(compacted_by, 0)"

// sqliteActiveEntryColumns are the columns of entries known to be active:
// their compacted_by is NULL, and querySQLiteEntries leaves it out (every
// column read costs the driver several calls into SQLite per row).
const sqliteActiveEntryColumns = "seq, kind, payload, created_at"

// querySQLiteEntries reads and decodes entries of one session; capacity is
// a hint of how many rows to expect.
func querySQLiteEntries(ctx context.Context, q sqlQuerier, session uuid.UUID, capacity int64, query string, args ...any) ([]Entry, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, sqliteError(err)
	}
	defer rows.Close()
	batch := newRowBatch(session, capacity)
	var (
		seq, created, compactedBy int64
		kind                      sql.RawBytes
		// The driver reads TEXT as a string, which a *string takes without
		// a copy.
		payload string
	)
	dest := []any{&seq, &kind, &payload, &created, &compactedBy}
	cols, err := rows.Columns()
	if err != nil {
		return nil, sqliteError(err)
	}
	if len(cols) == 4 { // sqliteActiveEntryColumns
		dest = dest[:4]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, sqliteError(err)
		}
		batch.add(seq, kind, payload, fromMicro(created), compactedBy)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteError(err)
	}
	return batch.decode()
}

// latest returns the latest entry of each of latestKinds at or before seq.
// It relies on SQLite taking the bare columns of an aggregate query from the
// row that holds the max().
func (s *SQLite) latest(ctx context.Context, q sqlQuerier, tenant string, session uuid.UUID, seq int64) ([]Entry, error) {
	kinds := latestKinds()
	args := []any{session, tenant, seq}
	for _, k := range kinds {
		args = append(args, k)
	}
	placeholders := strings.TrimSuffix(strings.Repeat("?, ", len(kinds)), ", ")
	return querySQLiteEntries(ctx, q, session, 0, `SELECT max(seq), kind, payload, created_at, coalesce(compacted_by, 0)
		FROM entries WHERE session_id = ? AND tenant = ? AND seq <= ? AND kind IN (`+placeholders+`)
		GROUP BY kind`, args...)
}

func (s *SQLite) Load(ctx context.Context, tenant string, session uuid.UUID) (Snapshot, error) {
	if err := checkTenant(tenant); err != nil {
		return Snapshot{}, fmt.Errorf("load session: %w", err)
	}
	var snap Snapshot
	err := withTx(ctx, s.beginRead, func(tx sqlTx) error {
		sess, err := s.liveSession(ctx, tx, tenant, session)
		if err != nil {
			return err
		}
		snap.Session, snap.Settings, snap.LastSeq = sess, sess.Settings, sess.LastSeq
		latest, err := s.latest(ctx, tx, tenant, session, math.MaxInt64)
		if err != nil {
			return err
		}
		applyLatest(&snap, latest)
		snap.Entries, err = querySQLiteEntries(ctx, tx, session, sess.EntryCount, "SELECT "+sqliteActiveEntryColumns+` FROM entries
			WHERE session_id = ? AND tenant = ? AND seq >= ? AND compacted_by IS NULL AND kind <> 'compaction'
			ORDER BY seq`, session, tenant, snap.tailStart())
		return err
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("load session: %w", sqliteError(err))
	}
	return snap, nil
}

func (s *SQLite) Entries(ctx context.Context, tenant string, session uuid.UUID) ([]Entry, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("read entries: %w", err)
	}
	var entries []Entry
	err := withTx(ctx, s.beginRead, func(tx sqlTx) error {
		sess, err := s.liveSession(ctx, tx, tenant, session)
		if err != nil {
			return err
		}
		entries, err = querySQLiteEntries(ctx, tx, session, sess.EntryCount, "SELECT "+sqliteEntryColumns+` FROM entries
			WHERE session_id = ? AND tenant = ? ORDER BY seq`, session, tenant)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read entries: %w", sqliteError(err))
	}
	return entries, nil
}

func (s *SQLite) Fork(ctx context.Context, tenant string, source uuid.UUID, opts ForkOptions) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, fmt.Errorf("fork session: %w", err)
	}
	var child Session
	err := withTx(ctx, s.beginWrite, func(tx sqlTx) error {
		src, err := s.liveSession(ctx, tx, tenant, source)
		if err != nil {
			return err
		}
		at, err := forkPoint(src, opts.At)
		if err != nil {
			return err
		}
		tools, err := querySQLiteEntries(ctx, tx, source, 0, "SELECT "+sqliteEntryColumns+` FROM entries
			WHERE session_id = ? AND tenant = ? AND kind IN ('tool_call', 'tool_completion') AND seq <= ?
			ORDER BY seq`, source, tenant, at)
		if err != nil {
			return err
		}
		if err := checkCut(tools, at); err != nil {
			return err
		}
		latest, err := s.latest(ctx, tx, tenant, source, at)
		if err != nil {
			return err
		}
		child, err = prepareFork(src, opts, latest, now())
		if err != nil {
			return err
		}
		if err := s.insertSession(ctx, tx, child); err != nil {
			return err
		}
		// Compaction marks are copied only when their checkpoint is: a
		// compaction after the cut does not exist in the child.
		res, err := tx.ExecContext(ctx, `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at, compacted_by)
			SELECT ?, tenant, seq, kind, payload, created_at, CASE WHEN compacted_by <= ? THEN compacted_by END
			FROM entries WHERE session_id = ? AND tenant = ? AND seq <= ?`, child.ID, at, source, tenant, at)
		if err != nil {
			return err
		}
		copied, _ := res.RowsAffected()
		fork, err := forkEntry(src, at, child.CreatedAt)
		if err != nil {
			return err
		}
		child.EntryCount, child.LastSeq = copied+1, fork.seq
		if _, err := tx.ExecContext(ctx, `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, child.ID, tenant, fork.seq, string(fork.kind), string(fork.payload),
			fork.createdAt.UnixMicro()); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE sessions SET entry_count = ?, last_seq = ? WHERE id = ?",
			child.EntryCount, child.LastSeq, child.ID)
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("fork session: %w", sqliteError(err))
	}
	return child, nil
}

func (s *SQLite) AddTrace(ctx context.Context, tenant string, tr Trace) (Trace, error) {
	if err := checkTenant(tenant); err != nil {
		return Trace{}, fmt.Errorf("add trace: %w", err)
	}
	tr, data, err := prepareTrace(tr)
	if err != nil {
		return Trace{}, fmt.Errorf("add trace: %w", err)
	}
	res, err := s.write.ExecContext(ctx, `INSERT INTO moa_traces (id, session_id, tenant, seq, created_at, data)
		SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (
			SELECT 1 FROM sessions WHERE id = ? AND tenant = ? AND deleted_at IS NULL)`,
		tr.ID, tr.Session, tenant, tr.Seq, tr.CreatedAt.UnixMicro(), string(data), tr.Session, tenant)
	if err != nil {
		return Trace{}, fmt.Errorf("add trace: %w", sqliteError(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Trace{}, fmt.Errorf("add trace: session %s: %w", tr.Session, ErrNotFound)
	}
	return tr, nil
}

func (s *SQLite) Traces(ctx context.Context, tenant string, session uuid.UUID) ([]Trace, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	var traces []Trace
	err := withTx(ctx, s.beginRead, func(tx sqlTx) error {
		if _, err := s.liveSession(ctx, tx, tenant, session); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT id, seq, created_at, data FROM moa_traces
			WHERE session_id = ? AND tenant = ? ORDER BY created_at, id`, session, tenant)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			tr := Trace{Session: session}
			var (
				created int64
				data    []byte
			)
			if err := rows.Scan(&tr.ID, &tr.Seq, &created, &data); err != nil {
				return err
			}
			tr.CreatedAt = fromMicro(created)
			if err := decodeTrace(&tr, data); err != nil {
				return err
			}
			traces = append(traces, tr)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list traces: %w", sqliteError(err))
	}
	return traces, nil
}

func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

// sqliteError marks errors worth retrying as ErrTransient and passes others
// through.
func sqliteError(err error) error {
	if err == nil || errors.Is(err, ErrTransient) || !sqliteTransient(err) {
		return err
	}
	return transientError{err}
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
