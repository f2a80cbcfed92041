package store

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// checkTenant refuses the empty tenant: it would scope nothing.
func checkTenant(tenant string) error {
	if tenant == "" {
		return fmt.Errorf("empty tenant: %w", ErrInvalid)
	}
	return nil
}

// prepareCreate fills NewSession's defaults and checks it, returning the
// session row to insert. The parent, if any, is checked by the caller inside
// its transaction.
func prepareCreate(tenant string, ns NewSession, at time.Time) (Session, error) {
	if err := checkTenant(tenant); err != nil {
		return Session{}, err
	}
	s := Session{
		ID:        ns.ID,
		Tenant:    tenant,
		Dir:       ns.Dir,
		Settings:  ns.Settings,
		Kind:      ns.Kind,
		Label:     ns.Label,
		ParentID:  ns.Parent,
		State:     ns.State,
		CreatedAt: at,
		UpdatedAt: at,
	}
	if s.ID == uuid.Nil {
		s.ID = uuid.New()
	}
	if s.Kind == "" {
		s.Kind = SessionUser
	}
	if s.State == "" {
		s.State = StateActive
	}
	switch {
	case s.Kind == SessionFork:
		return Session{}, fmt.Errorf("create a fork with Fork, not Create: %w", ErrInvalid)
	case !s.Kind.valid():
		return Session{}, fmt.Errorf("unknown session kind %q: %w", s.Kind, ErrInvalid)
	case !s.State.valid():
		return Session{}, fmt.Errorf("unknown session state %q: %w", s.State, ErrInvalid)
	}
	s.RootID = s.ID
	return s, nil
}

// forkPoint turns ForkOptions.At into the last sequence number to copy.
func forkPoint(src Session, at int64) (int64, error) {
	if at == 0 {
		return src.LastSeq, nil
	}
	if at < 0 || at > src.LastSeq {
		return 0, fmt.Errorf("sequence %d is outside the source's 1..%d: %w", at, src.LastSeq, ErrInvalidCut)
	}
	return at, nil
}

// prepareFork returns the child session row of a fork of src at a cut.
// latest are the source's latest setting entries at the cut: the child
// starts with the settings in force there, not those the source has now.
func prepareFork(src Session, opts ForkOptions, latest []transcript.Entry, at time.Time) (Session, error) {
	snap := transcript.Snapshot{Settings: src.Settings}
	applyLatest(&snap, latest)
	child := Session{
		ID:        opts.ID,
		Tenant:    src.Tenant,
		Dir:       src.Dir,
		Settings:  snap.Settings,
		Kind:      SessionFork,
		Label:     opts.Label,
		ParentID:  src.ID,
		RootID:    src.RootID,
		State:     opts.State,
		CreatedAt: at,
		UpdatedAt: at,
	}
	if child.ID == uuid.Nil {
		child.ID = uuid.New()
	}
	if child.State == "" {
		child.State = StateIdle
	}
	if !child.State.valid() {
		return Session{}, fmt.Errorf("unknown session state %q: %w", child.State, ErrInvalid)
	}
	return child, nil
}

// forkEntry is the Fork entry that follows the copied prefix in the child.
func forkEntry(src Session, at int64, createdAt time.Time) (EntryRow, error) {
	f := transcript.Fork{Source: src.ID, SourceSeq: at}
	payload, err := transcript.EncodePayload(f)
	if err != nil {
		return EntryRow{}, err
	}
	return EntryRow{Seq: at + 1, Kind: transcript.KindFork, Payload: payload, CreatedAt: createdAt}, nil
}

// now is the store's clock: UTC at the microsecond precision both backends
// keep, so that what is returned equals what is read back later.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// latestKinds are the kinds whose latest entry Load and Fork look up, even
// when it was compacted: they carry the state a session resumes with.
func latestKinds() []string {
	return []string{
		string(transcript.KindProviderChange), string(transcript.KindModelChange), string(transcript.KindPersonaChange),
		string(transcript.KindReasoningChange), string(transcript.KindUsage), string(transcript.KindCheckpoint),
		string(transcript.KindCompaction),
	}
}

// toolKinds are the kinds a fork's cut is checked against.
func toolKinds() []string {
	return []string{string(transcript.KindToolCall), string(transcript.KindToolCompletion)}
}

// applyLatest folds the latest entry of each of latestKinds into a snapshot.
func applyLatest(snap *transcript.Snapshot, latest []transcript.Entry) {
	for _, e := range latest {
		switch p := e.Payload.(type) {
		case transcript.ProviderChange:
			snap.Settings.Provider = p.Provider
		case transcript.ModelChange:
			snap.Settings.Model = p.Model
		case transcript.PersonaChange:
			snap.Settings.Persona = p.Persona
		case transcript.ReasoningChange:
			snap.Settings.Reasoning = p.Effort
		case transcript.Usage:
			snap.Usage = &p
		case transcript.Checkpoint:
			snap.Checkpoint = &p
		case transcript.Compaction:
			snap.Compaction = &p
			snap.CompactionSeq = e.Seq
		}
	}
}

// tailStart is where the active tail can begin: every entry before the
// latest compaction's first kept entry was compacted by it (if not before).
func tailStart(snap transcript.Snapshot) int64 {
	if snap.Compaction == nil {
		return 1
	}
	return snap.Compaction.FirstKept
}
