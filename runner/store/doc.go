// Package store persists sessions: their records, their ordered entry
// streams (in the vocabulary of package transcript), their
// Mixture-of-Agents traces and the full output of their shortened tool
// results, in PostgreSQL (pods) or in a SQLite file (`aerie run`).
//
// # Opening
//
// The store is DB, the sessions' logic written once over a Backend that
// supplies one database system's statements. Package store/postgres and
// package store/sqlite are the two backends; their Open connects, runs the
// backend's embedded schema migrations before returning, so a session can be
// created as soon as Open succeeds, and returns the DB. Package store/dburl
// picks the backend from a database URL, whose forms ParseURL reads
// (postgres:// or postgresql:// for PostgreSQL; sqlite:PATH, sqlite://PATH,
// file:PATH or an absolute path for SQLite). A connection or migration failure is an error. Close releases the
// store; for SQLite it also checkpoints and truncates the write-ahead log.
//
//	st, err := dburl.Open(ctx, cfg.DatabaseURL)
//	if err != nil {
//		return fmt.Errorf("open session store: %w", err)
//	}
//	defer st.Close()
//
// This package itself links no database driver: what only needs the
// store's types, or the transcript's, does not link one either.
//
// # Tenants
//
// Every operation is scoped by a tenant: the Kubernetes namespace in a pod,
// the working directory locally. Sessions of other tenants are invisible:
// every operation on them reports ErrNotFound.
//
// # Sessions
//
// Create stores a new session (a subagent passes its parent in
// NewSession.Parent) together with its first entries, in one transaction,
// so that a session is never found without them; Session, List and Resolve find sessions (Resolve
// accepts a full id, a unique id prefix or a label, and reports an
// ambiguous one as an *AmbiguousError listing the candidates); BuildTree
// arranges a List into the parent/child trees of forks and subagents;
// SetState switches a session active, idle or to a terminal state; Delete
// soft-deletes it (hidden from everything but List with IncludeDeleted,
// with its records kept).
//
// # Entries
//
// A session's stream is a sequence of transcript.Entry values, numbered
// from 1 by the writer (see package journal) before they are queued.
// Payloads are stored as JSON beside their kind. An entry that cannot be
// decoded is reported as a *transcript.EntryError naming the session and
// sequence number (transcript.ErrCorruptEntry), which fails reading that
// session only.
//
// Append is idempotent per (session, sequence number), so a batch whose
// commit was not acknowledged can be written again. Errors worth retrying
// match ErrTransient.
//
// # Compaction, resume and fork
//
// A compaction is recorded by appending a Compaction entry: the replacement
// for the prefix before its FirstKept, with its provenance. In the same
// transaction the entries before FirstKept are marked compacted (their
// CompactedBy is the checkpoint's sequence number); nothing is deleted. Load
// returns the session's record and what resuming needs in a
// transcript.Snapshot: the latest compaction's replacement, the active
// entries after it, the settings (provider, model, persona, reasoning),
// usage and completion checkpoint in force at the end, and the last sequence
// number to continue from.
//
// Fork copies a session's entries through a sequence number (by default the
// latest) into a new child session with parent and root ids, then appends a
// Fork entry. The cut must not fall inside an open tool call: every
// ToolCall at or before it needs its ToolCompletion at or before it.
// Compactions after the cut are not carried over. The source is unchanged.
//
// # Backends
//
// A Backend implements Queries, the statements DB composes, and Append, the
// one operation whose best shape differs by database; WithTx is the one
// transaction helper of both. Both backends pass the conformance suite in
// package storetest. PostgreSQL is accessed through a pgx connection pool;
// small appends are one pipelined statement, large ones a COPY. SQLite
// (modernc.org/sqlite, no cgo) keeps one writer connection per process and a
// pool of query-only readers, with foreign keys, WAL, a 5 s busy timeout,
// NORMAL synchronous mode and a 500-page autocheckpoint on every connection;
// opening retries the races of several processes creating the same file.
package store
