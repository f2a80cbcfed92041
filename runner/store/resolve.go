package store

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// AmbiguousError is returned by Resolve when a reference matches several
// sessions. It matches ErrAmbiguous.
type AmbiguousError struct {
	Ref        string
	Candidates []Session
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session reference %q matches %d sessions:", e.Ref, len(e.Candidates))
	for _, s := range e.Candidates {
		b.WriteString(" ")
		b.WriteString(s.ID.String())
		if s.Label != "" {
			fmt.Fprintf(&b, " (%s)", s.Label)
		}
		b.WriteString(";")
	}
	b.WriteString(" use more of the id")
	return b.String()
}

// Is makes every AmbiguousError match ErrAmbiguous.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// idPrefix returns the lowercase id prefix ref could be, or false when ref
// cannot be a prefix of a UUID's canonical form. Backends use it to narrow
// their candidate query; it also keeps LIKE wildcards out of that query.
func idPrefix(ref string) (string, bool) {
	if ref == "" || len(ref) > 36 {
		return "", false
	}
	p := strings.ToLower(ref)
	for _, r := range p {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || r == '-') {
			return "", false
		}
	}
	return p, true
}

// resolve picks the session ref means among candidates: the sessions of the
// tenant whose id starts with ref or whose label is ref. A full id wins
// outright; otherwise exactly one candidate must match, whether by label or
// by prefix, since a label that looks like someone else's id prefix is as
// ambiguous to the user as two prefixes.
func resolve(candidates []Session, ref string) (Session, error) {
	if ref == "" {
		return Session{}, fmt.Errorf("empty session reference: %w", ErrInvalid)
	}
	if id, err := uuid.Parse(ref); err == nil {
		for _, s := range candidates {
			if s.ID == id {
				return s, nil
			}
		}
	}
	prefix, isPrefix := idPrefix(ref)
	var matches []Session
	for _, s := range candidates {
		if s.Label == ref || isPrefix && strings.HasPrefix(s.ID.String(), prefix) {
			matches = append(matches, s)
		}
	}
	switch len(matches) {
	case 0:
		return Session{}, fmt.Errorf("session %q: %w", ref, ErrNotFound)
	case 1:
		return matches[0], nil
	}
	slices.SortFunc(matches, func(a, b Session) int { return strings.Compare(a.ID.String(), b.ID.String()) })
	return Session{}, &AmbiguousError{Ref: ref, Candidates: matches}
}
