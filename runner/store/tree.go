package store

import (
	"slices"

	"github.com/google/uuid"
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
