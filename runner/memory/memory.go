// Package memory is the agent's built-in memory: what the model saves with
// the memory tool about the project (MEMORY.md) and about the user
// (USER.md), kept across sessions and given back to the next session in its
// system prompt.
//
// A memory document is a markdown list, one entry per item (see Parse).
// The tool adds an entry, replaces or removes the one entry that contains
// a given text; each mutation reads the document, changes it and writes it
// back under a lock, atomically, and is refused when the result would
// exceed the document's cap or an entry its own. A document that is not a
// list is never rewritten: where it is a file, a timestamped .bak copy is
// made and the mutation refused until someone repairs it.
//
// The documents live where whoever runs the session says (Documents): in
// files under $AERIE_HOME/memory locally (Files), in the session store per
// tenant and project in a pod. The system prompt carries the memory as it
// was when the session started: what the tool changes reaches the next
// session, and the prompt's prefix stays cacheable.
package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Target is which memory document an operation is about.
type Target string

// The targets.
const (
	// Project is the project's memory, MEMORY.md: what was learnt about
	// the code base, its conventions, commands and pitfalls.
	Project Target = "project"
	// User is the user's memory, USER.md: their preferences, across
	// projects.
	User Target = "user"
)

// Targets are the targets, in the order the prompt gives them.
var Targets = []Target{Project, User}

// FileName is the target's document name.
func (t Target) FileName() string {
	if t == User {
		return "USER.md"
	}
	return "MEMORY.md"
}

// heading is the first line Format writes in the target's document.
func (t Target) heading() string {
	if t == User {
		return "User memory"
	}
	return "Project memory"
}

// ParseTarget is the target named s.
func ParseTarget(s string) (Target, error) {
	switch t := Target(s); t {
	case Project, User:
		return t, nil
	}
	return "", fmt.Errorf("target %q: want %q or %q", s, Project, User)
}

// Limits are the caps of the memory documents, in bytes of the document
// as written.
type Limits struct {
	// Project caps MEMORY.md, User caps USER.md, Entry caps one entry.
	Project, User, Entry int
}

// DefaultLimits are the caps when none are configured: 8 KiB of project
// memory, 4 KiB of user memory, 1 KiB per entry.
var DefaultLimits = Limits{Project: 8 << 10, User: 4 << 10, Entry: 1 << 10}

func (l Limits) of(t Target) int {
	if t == User {
		return l.User
	}
	return l.Project
}

// Documents is where the memory documents are kept.
type Documents interface {
	// Read returns the target's document; a missing one is empty, with
	// no error.
	Read(ctx context.Context, t Target) ([]byte, error)
	// Update calls change with the target's document (empty when there is
	// none) and stores what it returns in its place, under a lock that
	// keeps other updates of the document out until then. An error from
	// change stores nothing and is returned; one matching ErrMalformed
	// means the document as stored is malformed.
	Update(ctx context.Context, t Target, change func(old []byte) ([]byte, error)) error
}

// Action is what a mutation does.
type Action string

// The actions.
const (
	Add     Action = "add"
	Replace Action = "replace"
	Remove  Action = "remove"
)

// Op is one mutation of a memory document.
type Op struct {
	Target Target
	Action Action
	// Content is the entry to add, or the replacement.
	Content string
	// OldText picks the entry to replace or remove: the one entry that
	// contains it.
	OldText string
}

// ErrRefused is what a mutation the caps or the document's entries do not
// allow is.
var ErrRefused = errors.New("memory mutation refused")

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Memory reads and changes the memory documents.
type Memory struct {
	docs   Documents
	limits Limits
}

// New returns the memory kept in docs, capped by limits; a zero field of
// limits takes DefaultLimits' value.
func New(docs Documents, limits Limits) *Memory {
	if limits.Project <= 0 {
		limits.Project = DefaultLimits.Project
	}
	if limits.User <= 0 {
		limits.User = DefaultLimits.User
	}
	if limits.Entry <= 0 {
		limits.Entry = DefaultLimits.Entry
	}
	return &Memory{docs: docs, limits: limits}
}

// Limits are the caps in force.
func (m *Memory) Limits() Limits { return m.limits }

// Entries returns the target's entries.
func (m *Memory) Entries(ctx context.Context, t Target) ([]string, error) {
	data, err := m.docs.Read(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.FileName(), err)
	}
	entries, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.FileName(), err)
	}
	return entries, nil
}

// Apply performs op and says what it did, with the document's use of its
// cap. A refused mutation is an error matching ErrRefused, one on a
// malformed document an error matching ErrMalformed; neither changes the
// document.
func (m *Memory) Apply(ctx context.Context, op Op) (string, error) {
	if _, err := ParseTarget(string(op.Target)); err != nil {
		return "", refused("%v", err)
	}
	var msg string
	err := m.docs.Update(ctx, op.Target, func(old []byte) ([]byte, error) {
		entries, err := Parse(old)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.Target.FileName(), err)
		}
		next, what, err := m.change(entries, op)
		if err != nil {
			return nil, err
		}
		data := Format(op.Target.heading(), next)
		limit := m.limits.of(op.Target)
		if len(data) > limit && len(data) > len(old) {
			return nil, refused("%s would be %d bytes, over its cap of %d: remove or shorten entries first",
				op.Target.FileName(), len(data), limit)
		}
		msg = fmt.Sprintf("%s; %s is %d of %d bytes", what, op.Target.FileName(), len(data), limit)
		return data, nil
	})
	if err != nil {
		return "", err
	}
	return msg, nil
}

// change applies op to entries.
func (m *Memory) change(entries []string, op Op) ([]string, string, error) {
	content := normalize(op.Content)
	switch op.Action {
	case Add, Replace:
		if content == "" {
			return nil, "", refused("content is empty: give the entry to %s", op.Action)
		}
		if len(content) > m.limits.Entry {
			return nil, "", refused("the entry is %d bytes, over the cap of %d per entry: say it shorter",
				len(content), m.limits.Entry)
		}
	case Remove:
	default:
		return nil, "", refused("action %q: want %q, %q or %q", op.Action, Add, Replace, Remove)
	}
	if op.Action == Add {
		for _, e := range entries {
			if e == content {
				return entries, "the entry is saved already", nil
			}
		}
		return append(entries, content), "entry added", nil
	}
	i, err := find(entries, op.OldText)
	if err != nil {
		return nil, "", err
	}
	out := append([]string(nil), entries...)
	if op.Action == Remove {
		return append(out[:i], out[i+1:]...), "entry removed", nil
	}
	out[i] = content
	return out, "entry replaced", nil
}

// find is the index of the one entry that contains old.
func find(entries []string, old string) (int, error) {
	old = strings.TrimSpace(old)
	if old == "" {
		return 0, refused("old_text is empty: give a part of the entry to change")
	}
	found := -1
	n := 0
	for i, e := range entries {
		if strings.Contains(e, old) {
			found = i
			n++
		}
	}
	switch n {
	case 0:
		return 0, refused("no entry contains old_text %q", shorten(old, 60))
	case 1:
		return found, nil
	}
	return 0, refused("old_text %q is in %d entries: give more of the one to change", shorten(old, 60), n)
}

// Prompt is the memory as the system prompt gives it: each document's
// entries under a heading, or "" when both are empty. A document that
// cannot be read or is malformed is left out, with the error in errs.
func (m *Memory) Prompt(ctx context.Context) (prompt string, errs []error) {
	var parts []string
	for _, t := range Targets {
		entries, err := m.Entries(ctx, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(entries) == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("## %s (%s)\n\n%s", t.heading(), t.FileName(),
			strings.TrimSuffix(list(entries), "\n")))
	}
	if len(parts) == 0 {
		return "", errs
	}
	return "# Memory\n\nWhat earlier sessions saved with the memory tool, as it was when this session started:\n\n" +
		strings.Join(parts, "\n\n"), errs
}

// Write replaces the target's document with doc, as someone edited it:
// a malformed doc or one over the target's cap is refused and nothing
// changes. It is how a malformed document is repaired.
func (m *Memory) Write(ctx context.Context, t Target, doc []byte) error {
	if _, err := ParseTarget(string(t)); err != nil {
		return refused("%v", err)
	}
	entries, err := Parse(doc)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	for _, e := range entries {
		if len(e) > m.limits.Entry {
			return refused("entry %q is %d bytes, over the cap of %d per entry", shorten(e, 40), len(e), m.limits.Entry)
		}
	}
	if limit := m.limits.of(t); len(doc) > limit {
		return refused("%s is %d bytes, over its cap of %d", t.FileName(), len(doc), limit)
	}
	return m.docs.Update(ctx, t, func([]byte) ([]byte, error) { return doc, nil })
}
