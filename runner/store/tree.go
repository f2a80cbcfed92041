package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// Node is a session in a tree of forks and subagents.
type Node struct {
	Session  Session
	Children []*Node
}

// BuildTree arranges sessions (as returned by List) into trees by their
// parent ids, oldest first at every level. A session whose parent is not
// among them (deleted, or in another tenant) becomes a root, so nothing
// listed is lost from the tree.
func BuildTree(sessions []Session) []*Node {
	nodes := make(map[uuid.UUID]*Node, len(sessions))
	for _, s := range sessions {
		nodes[s.ID] = &Node{Session: s}
	}
	var roots []*Node
	for _, s := range sessions {
		n := nodes[s.ID]
		if parent, ok := nodes[s.ParentID]; ok && s.ParentID != s.ID {
			parent.Children = append(parent.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	sortNodes(roots)
	return roots
}

func sortNodes(nodes []*Node) {
	slices.SortFunc(nodes, func(a, b *Node) int {
		if c := a.Session.CreatedAt.Compare(b.Session.CreatedAt); c != 0 {
			return c
		}
		return slices.Compare(a.Session.ID[:], b.Session.ID[:])
	})
	for _, n := range nodes {
		sortNodes(n.Children)
	}
}

// EntryReader is what SubagentOutcomes needs of a Store.
type EntryReader interface {
	Entries(ctx context.Context, tenant string, session uuid.UUID) ([]transcript.Entry, error)
}

// SubagentOutcomes reads, from the stream of every session in the trees
// that has subagent children, the outcome it recorded for each of them:
// where a subagent's end is recorded (its own stream may stop short of it,
// if its process was lost). Sessions without subagents are not read.
func SubagentOutcomes(
	ctx context.Context, st EntryReader, tenant string, roots []*Node,
) (map[uuid.UUID]transcript.SubagentOutcome, error) {
	outcomes := map[uuid.UUID]transcript.SubagentOutcome{}
	var walk func(nodes []*Node) error
	walk = func(nodes []*Node) error {
		for _, n := range nodes {
			if slices.ContainsFunc(n.Children, func(c *Node) bool { return c.Session.Kind == SessionSubagent }) {
				entries, err := st.Entries(ctx, tenant, n.Session.ID)
				if err != nil {
					return fmt.Errorf("read the subagent outcomes of session %s: %w", n.Session.ID, err)
				}
				for _, e := range entries {
					if o, ok := e.Payload.(transcript.SubagentOutcome); ok {
						outcomes[o.Session] = o
					}
				}
			}
			if err := walk(n.Children); err != nil {
				return err
			}
		}
		return nil
	}
	return outcomes, walk(roots)
}
