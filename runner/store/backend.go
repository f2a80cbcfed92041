package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Backend is one database system as DB uses it: its queries, its
// transactions and its bulk append, and nothing of the sessions' logic,
// which DB holds once for both. It is the contract between this package and
// its backends, store/postgres and store/sqlite; consumers use DB, or
// Store, and never a Backend.
//
// Every error a Backend returns is classified already: ErrNotFound and
// ErrExists where a method says so, and errors worth retrying marked with
// Transient.
type Backend interface {
	// Queries run each statement on its own, outside any transaction.
	Queries
	// Read begins a consistent, read-only transaction: its queries all see
	// the database as it was when the first one ran.
	Read(ctx context.Context) (Tx, error)
	// Write begins a transaction that writes. Writes of other transactions
	// wait for it (or it for them); they never interleave.
	Write(ctx context.Context) (Tx, error)
	// Append stores a batch of a session's entries and accounts for the
	// rows really inserted in the session row (EntryCount, LastSeq, and
	// UpdatedAt, raised to at), atomically. Rows already stored are skipped:
	// the batch may be the retry of one whose commit was not acknowledged.
	// A row with a FirstKept marks the entries before it compacted by it,
	// unless they are already. A session that is not live in the tenant is
	// ErrNotFound, and nothing is written then.
	Append(ctx context.Context, tenant string, session uuid.UUID, rows []EntryRow, at time.Time) error
	// Close releases the backend's connections.
	Close() error
}

// Tx is a transaction of a Backend.
type Tx interface {
	Queries
	Transaction
}

// Queries are the statements of a Backend. Sessions are scoped by tenant;
// "live" means not soft-deleted.
type Queries interface {
	// Session returns the tenant's live session id; ErrNotFound (as it
	// is: the caller names the id) if there is none.
	Session(ctx context.Context, tenant string, id uuid.UUID) (Session, error)
	// Sessions returns the tenant's sessions, most recently updated first
	// and then by id; soft-deleted ones only with includeDeleted.
	Sessions(ctx context.Context, tenant string, includeDeleted bool) ([]Session, error)
	// SessionPage returns the page of the tenant's live sessions that
	// opts (checked by Page) chooses, and how many pass its filters.
	SessionPage(ctx context.Context, tenant string, opts PageOptions) ([]Session, int, error)
	// Candidates returns the tenant's live sessions labelled ref, and, if
	// prefix is not empty, those whose id (lowercase, canonical) starts
	// with prefix. prefix holds no LIKE wildcards.
	Candidates(ctx context.Context, tenant, ref, prefix string) ([]Session, error)
	// InsertSession stores a session row as it is. An id already stored
	// is ErrExists (as it is: the caller names the id).
	InsertSession(ctx context.Context, s Session) error
	// SetState sets a live session's state and UpdatedAt; found is false
	// if there is no such session.
	SetState(ctx context.Context, tenant string, id uuid.UUID, state State, at time.Time) (found bool, err error)
	// Delete sets a live session's DeletedAt and UpdatedAt; found is false
	// if there is no such session.
	Delete(ctx context.Context, tenant string, id uuid.UUID, at time.Time) (found bool, err error)
	// SetCounts sets a session's EntryCount and LastSeq.
	SetCounts(ctx context.Context, id uuid.UUID, entryCount, lastSeq int64) error

	// The entry reads add the rows they find to rows, in any order.

	// Entries reads all of a session's entries.
	Entries(ctx context.Context, tenant string, session uuid.UUID, rows *EntryRows) error
	// ActiveEntries reads the entries from sequence number from on that
	// are not compacted and are not compaction checkpoints. Their
	// CompactedBy is 0 and may be left out.
	ActiveEntries(ctx context.Context, tenant string, session uuid.UUID, from int64, rows *EntryRows) error
	// KindEntries reads the entries of the given kinds through sequence
	// number through.
	KindEntries(
		ctx context.Context, tenant string, session uuid.UUID, kinds []string, through int64, rows *EntryRows,
	) error
	// Latest reads the latest entry of each of the given kinds through
	// sequence number through, compacted or not.
	Latest(ctx context.Context, tenant string, session uuid.UUID, kinds []string, through int64, rows *EntryRows) error
	// CopyEntries copies the source's entries through sequence number
	// through into child, of the same tenant, and returns how many it
	// copied. A copied entry keeps its compaction mark only if the
	// compaction that made it is copied too.
	CopyEntries(ctx context.Context, tenant string, source, child uuid.UUID, through int64) (int64, error)
	// InsertEntry stores one entry row, without accounting for it in the
	// session row.
	InsertEntry(ctx context.Context, tenant string, session uuid.UUID, row EntryRow) error

	// InsertTrace stores a trace of a live session of the tenant, its
	// calls encoded as data; found is false if there is no such session.
	InsertTrace(ctx context.Context, tenant string, tr Trace, data []byte) (found bool, err error)
	// Traces hands add each of a session's traces, ordered by CreatedAt
	// and then ID, with the data it was stored with; add's error stops the
	// read and is returned.
	Traces(ctx context.Context, tenant string, session uuid.UUID, add func(tr Trace, data []byte) error) error

	// PutToolOutput stores data as the output of a call of a live session
	// of the tenant, replacing what was stored for it; found is false if
	// there is no such session.
	PutToolOutput(
		ctx context.Context, tenant string, session uuid.UUID, callID string, data []byte, at time.Time,
	) (found bool, err error)
	// ToolOutput returns what PutToolOutput stored for the call; found is
	// false if nothing was.
	ToolOutput(ctx context.Context, tenant string, session uuid.UUID, callID string) (data []byte, found bool, err error)

	// Memory returns the tenant's memory document of scope and target and
	// its version; version 0 (and no data) if there is none.
	Memory(ctx context.Context, tenant, scope, target string) (data []byte, version int64, err error)
	// PutMemory stores data as the memory document of scope and target,
	// with version+1, if its stored version is still version (0: there is
	// none yet); stored is false, and nothing is written, if it is not.
	PutMemory(
		ctx context.Context, tenant, scope, target string, data []byte, version int64, at time.Time,
	) (stored bool, err error)
}
