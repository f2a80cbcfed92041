package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// Store is the contract DB fulfils over either backend (PostgreSQL or
// SQLite). It is declared here, next to its implementation, rather than by a
// consumer because it is the unit the conformance suite (storetest) pins
// down: consumers that need less declare their own narrow interface
// (journal.Store needs only Append).
//
// Every method takes the tenant that scopes it: the Kubernetes namespace in
// a pod, the working directory locally. A session is invisible to every other
// tenant: it is not found, listed, resolved, appended to, forked, loaded or
// deleted through any tenant but its own. An empty tenant is ErrInvalid.
//
// Implementations are safe for concurrent use.
type Store interface {
	// Create stores a new session with its first entries
	// (NewSession.Entries), in one transaction: the session and its
	// entries are stored together or not at all, so a session is never
	// found without them. Later entries are appended after them.
	Create(ctx context.Context, tenant string, s NewSession) (Session, error)
	// Session returns the session with the given id. A soft-deleted session
	// is ErrNotFound.
	Session(ctx context.Context, tenant string, id uuid.UUID) (Session, error)
	// List returns the tenant's sessions, most recently updated first.
	List(ctx context.Context, tenant string, opts ListOptions) ([]Session, error)
	// Page returns a page of the tenant's live sessions that pass opts'
	// filters, in its order, and how many pass them in all.
	Page(ctx context.Context, tenant string, opts PageOptions) ([]Session, int, error)
	// Resolve finds the session a user means by ref: its full id, a unique
	// prefix of its id, or its label. A prefix or label that matches several
	// sessions is an *AmbiguousError (ErrAmbiguous) listing them.
	Resolve(ctx context.Context, tenant, ref string) (Session, error)
	// SetState changes a session's state, for example to StateActive when a
	// session is switched to.
	SetState(ctx context.Context, tenant string, id uuid.UUID, state State) error
	// Delete soft-deletes a session: it disappears from every operation but
	// List with IncludeDeleted, and its records stay stored.
	Delete(ctx context.Context, tenant string, id uuid.UUID) error
	// Fork copies the source's entries through a cut into a new child
	// session and appends a Fork entry after them; the source is unchanged.
	// A cut inside an open tool call is ErrInvalidCut.
	Fork(ctx context.Context, tenant string, source uuid.UUID, opts ForkOptions) (Session, error)

	// Append stores entries of one session, in the order given; their
	// sequence numbers must increase. It is idempotent: an entry whose
	// (session, sequence number) is already stored is not written again, so
	// a batch whose commit was not acknowledged can be retried safely.
	// Appending a Compaction marks the entries before its FirstKept
	// compacted, in the same transaction. An unknown session is
	// ErrNotFound; errors worth retrying match ErrTransient.
	Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error
	// Load returns a session's record and what resuming it needs, read
	// together: the latest compaction replacement, the active entries, and
	// the settings, usage and completion state in force at its end. A
	// corrupt entry is a *transcript.EntryError.
	Load(ctx context.Context, tenant string, session uuid.UUID) (Session, transcript.Snapshot, error)
	// Entries returns the whole stream of a session, compacted entries
	// included, in sequence order. A corrupt entry is a
	// *transcript.EntryError.
	Entries(ctx context.Context, tenant string, session uuid.UUID) ([]transcript.Entry, error)

	// AddTrace stores a Mixture-of-Agents trace. Traces live in their own
	// table, outside the entry stream.
	AddTrace(ctx context.Context, tenant string, tr Trace) (Trace, error)
	// Traces returns a session's traces in the order they were added.
	Traces(ctx context.Context, tenant string, session uuid.UUID) ([]Trace, error)

	// PutToolOutput keeps the full, byte-exact output of a tool call whose
	// result reached the model shortened, replacing what was kept for the
	// same call. Outputs live in their own table, outside the entry stream.
	PutToolOutput(ctx context.Context, tenant string, session uuid.UUID, callID string, data []byte) error
	// ToolOutput returns what PutToolOutput kept for the call;
	// ErrNotFound if nothing was, or there is no such session.
	ToolOutput(ctx context.Context, tenant string, session uuid.UUID, callID string) ([]byte, error)

	// Memory returns the tenant's memory document of scope (a project; ""
	// for what is the tenant's, whatever the project) and target (the
	// document's name), with its version, which counts its writes: 0, and
	// no data, when there is none. Memory belongs to the tenant, not to a
	// session: it outlives the sessions that wrote it.
	Memory(ctx context.Context, tenant, scope, target string) (data []byte, version int64, err error)
	// PutMemory replaces the memory document with data if its version is
	// still version, the one Memory returned (0: there was none), and says
	// whether it did: false, with nothing written, when another write came
	// first. That compare-and-swap is what keeps two sessions' changes of
	// one document from losing either: read, change, put, and read again
	// when the put is refused.
	PutMemory(ctx context.Context, tenant, scope, target string, data []byte, version int64) (stored bool, err error)

	// Close releases the store's connections. The SQLite store also
	// checkpoints and truncates its write-ahead log.
	Close() error
}

// Errors returned by stores. Match them with errors.Is.
var (
	// ErrNotFound: no such session for this tenant (or it was deleted).
	ErrNotFound = errors.New("session not found")
	// ErrExists: a session with this id is already stored.
	ErrExists = errors.New("session already exists")
	// ErrAmbiguous: a reference matches several sessions; see AmbiguousError.
	ErrAmbiguous = errors.New("ambiguous session reference")
	// ErrInvalidCut: a fork sequence number is out of range or inside an
	// open tool call.
	ErrInvalidCut = errors.New("invalid fork cut")
	// ErrInvalid: the arguments are unusable (empty tenant, unknown state,
	// sequence numbers out of order, ...).
	ErrInvalid = errors.New("invalid argument")
	// ErrTransient: the operation failed for a reason that may go away (lost
	// connection, server restart, serialization failure, deadlock, a busy
	// SQLite file). Retrying the same call is safe. It and every error that
	// matches it also have a method Transient() bool that returns true, for
	// consumers that recognise such errors without importing this package
	// (the journal does).
	ErrTransient error = transientError{errors.New("transient database error")}
)

// Transient marks err, a backend's error (not nil), as worth retrying: the
// result matches ErrTransient and unwraps to err.
func Transient(err error) error { return transientError{err} }

// transientError marks an error worth retrying.
type transientError struct{ err error }

func (e transientError) Error() string        { return e.err.Error() }
func (e transientError) Unwrap() error        { return e.err }
func (e transientError) Is(target error) bool { return target == ErrTransient }

// Transient says the error is worth retrying.
func (transientError) Transient() bool { return true }

// SessionKind says how a session came to be.
type SessionKind string

// Session kinds.
const (
	SessionUser     SessionKind = "user"     // started by a person (TUI, /new)
	SessionHeadless SessionKind = "headless" // started by the headless command or a pod
	SessionFork     SessionKind = "fork"     // made by Fork
	SessionSubagent SessionKind = "subagent" // a child agent of another session
)

func (k SessionKind) valid() bool {
	switch k {
	case SessionUser, SessionHeadless, SessionFork, SessionSubagent:
		return true
	}
	return false
}

// State is where a session is in its life.
type State string

// Session states.
const (
	StateActive    State = "active" // has a live journal writer
	StateIdle      State = "idle"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
)

func (s State) valid() bool {
	switch s {
	case StateActive, StateIdle, StateCompleted, StateFailed, StateCancelled:
		return true
	}
	return false
}

// Session is a stored session record.
type Session struct {
	ID     uuid.UUID
	Tenant string
	// Dir is the working directory the session runs in.
	Dir string
	// Settings are the settings the session was created with. Later changes
	// are entries of the stream; Load returns the settings in force.
	Settings transcript.Settings
	Kind     SessionKind
	// Label is an optional name, usable as a reference in Resolve.
	Label string
	// ParentID is the session this one was forked from or is a subagent
	// of; uuid.Nil for a root session.
	ParentID uuid.UUID
	// RootID is the root of the session's tree; its own ID for a root.
	RootID uuid.UUID
	State  State
	// EntryCount is the number of stored entries, compacted ones included.
	EntryCount int64
	// LastSeq is the highest stored sequence number, 0 for no entries.
	LastSeq   int64
	CreatedAt time.Time
	// UpdatedAt is when the session last changed or got entries.
	UpdatedAt time.Time
	// DeletedAt is when the session was soft-deleted; zero if it was not.
	DeletedAt time.Time
}

// NewSession describes a session to Create.
type NewSession struct {
	// ID is the session's id; uuid.Nil picks a random one. In a pod it is
	// the AgentSession's UID.
	ID       uuid.UUID
	Dir      string
	Settings transcript.Settings
	// Kind defaults to SessionUser. SessionFork is refused: use Fork.
	Kind  SessionKind
	Label string
	// Parent makes the new session a child (a subagent) of another session
	// of the same tenant; its RootID is inherited.
	Parent uuid.UUID
	// State defaults to StateActive.
	State State
	// Entries are the session's first entries, stored with it: what a run
	// journals before its first model request (the layers it uses, the
	// user's prompt), so that a crash after the session is stored cannot
	// leave it without them. Their sequence numbers follow Append's rules;
	// a compaction is refused (a new session has nothing to compact), and
	// so is every entry Append would refuse, and then nothing is stored.
	// The session's EntryCount and LastSeq count them.
	Entries []transcript.Entry
}

// ListOptions narrows List.
type ListOptions struct {
	// IncludeDeleted lists soft-deleted sessions too.
	IncludeDeleted bool
}

// ForkOptions describes a fork.
type ForkOptions struct {
	// At is the last sequence number copied; 0 means the source's latest.
	// Every tool call at or before At must be completed at or before At.
	At int64
	// ID is the child's id; uuid.Nil picks a random one.
	ID uuid.UUID
	// Label names the child (a branch label).
	Label string
	// State defaults to StateIdle.
	State State
}

// Trace is a Mixture-of-Agents trace: the proposals of several models and
// their aggregation for one step.
type Trace struct {
	// ID is assigned by AddTrace when zero.
	ID      uuid.UUID
	Session uuid.UUID
	// Seq is the entry the trace produced (typically the aggregated
	// assistant message), or 0.
	Seq int64
	// CreatedAt is set by AddTrace when zero.
	CreatedAt time.Time
	// CallID is the model's tool call the trace answered, when it was
	// made by one (mixture_of_agents).
	CallID    string
	Proposals []TraceCall
	Aggregate TraceCall
}

// TraceCall is one model call of a Mixture-of-Agents step.
type TraceCall struct {
	Provider     string        `json:"provider,omitempty"`
	Model        string        `json:"model,omitempty"`
	Output       string        `json:"output,omitempty"`
	InputTokens  int64         `json:"input_tokens,omitempty"`
	OutputTokens int64         `json:"output_tokens,omitempty"`
	Duration     time.Duration `json:"duration_ns,omitempty"`
	Error        string        `json:"error,omitempty"`
}

// traceData is the JSON stored for a trace's calls.
type traceData struct {
	CallID    string      `json:"call_id,omitempty"`
	Proposals []TraceCall `json:"proposals"`
	Aggregate TraceCall   `json:"aggregate"`
}
