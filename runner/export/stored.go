package export

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/atif"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Lister is what StoredChildren needs of runner/store.
type Lister interface {
	List(ctx context.Context, tenant string, opts store.ListOptions) ([]store.Session, error)
	Entries(ctx context.Context, tenant string, session uuid.UUID) ([]transcript.Entry, error)
}

// Decorator adds to the Input of a stored session what only its caller
// knows (such as the way to the originals of its shortened results).
type Decorator func(s store.Session, entries []transcript.Entry, in *Input)

// StoredChildren reads the subagent sessions of a parent from st: the
// tenant's live sessions of kind subagent whose parent it is, oldest first,
// each with its whole stream, and with what decorate adds (nil: nothing).
// The tenant's sessions are listed once, at the first call.
func StoredChildren(st Lister, tenant string, decorate Decorator) ChildLoader {
	var byParent map[uuid.UUID][]store.Session
	return func(ctx context.Context, parent uuid.UUID) ([]Input, error) {
		if byParent == nil {
			list, err := st.List(ctx, tenant, store.ListOptions{})
			if err != nil {
				return nil, err
			}
			byParent = map[uuid.UUID][]store.Session{}
			for _, s := range list {
				if s.Kind == store.SessionSubagent && s.ParentID != uuid.Nil && s.ParentID != s.ID {
					byParent[s.ParentID] = append(byParent[s.ParentID], s)
				}
			}
			for _, children := range byParent {
				slices.SortFunc(children, func(a, b store.Session) int {
					if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
						return c
					}
					return slices.Compare(a.ID[:], b.ID[:])
				})
			}
		}
		var out []Input
		for _, s := range byParent[parent] {
			entries, err := st.Entries(ctx, tenant, s.ID)
			if err != nil {
				return nil, fmt.Errorf("read session %s: %w", s.ID, err)
			}
			in := Input{Session: Record(s), Entries: entries}
			if decorate != nil {
				decorate(s, entries, &in)
			}
			out = append(out, in)
		}
		return out, nil
	}
}

// Record is what a trajectory and an export take from a stored session's
// record.
func Record(s store.Session) atif.SessionRecord {
	return atif.SessionRecord{
		ID: s.ID, Kind: string(s.Kind), Label: s.Label, ParentID: s.ParentID, RootID: s.RootID,
		CreatedAt: s.CreatedAt, Settings: s.Settings,
	}
}

// WriteStored writes the export of the stored session sess of tenant in
// format f, by agent: its whole stream, with its subagent sessions for
// ATIF and Markdown, and for JSON Lines when tree is set.
func WriteStored(
	ctx context.Context, w io.Writer, st Lister, tenant string, sess store.Session,
	f Format, tree bool, agent atif.AgentInfo, decorate Decorator,
) error {
	entries, err := st.Entries(ctx, tenant, sess.ID)
	if err != nil {
		return fmt.Errorf("read session %s: %w", sess.ID, err)
	}
	in := Input{Session: Record(sess), Entries: entries, Agent: agent}
	if decorate != nil {
		decorate(sess, entries, &in)
	}
	if f != JSONL || tree {
		if in, err = LoadTree(ctx, in, StoredChildren(st, tenant, decorate)); err != nil {
			return err
		}
	}
	if err := Write(w, f, in); err != nil {
		return fmt.Errorf("export session %s: %w", sess.ID, err)
	}
	return nil
}
