// Package skills discovers the agent's skills — directories holding a
// SKILL.md with YAML frontmatter — and gives the agent what it needs to
// use them: a catalog of names and descriptions for the system prompt, a
// `skill` tool that reads a skill in full when a task calls for it, and
// the attachment of skills named in a prompt (/release-notes,
// /skill:release-notes, /review:checklist), and the skills a compaction
// re-attaches after the messages that read them are summarized (Restorer).
//
// Skills are searched, first one first, in the working directory's
// .agents/skills and .claude/skills, the skills/ directory of every
// extension layer, the skills of enabled plugins (named
// <plugin>:<skill>), and the home directory's .agents/skills and
// .claude/skills (see Roots). When two skills share a name the first one
// wins. A malformed skill is an error in a private layer and is skipped,
// with its reason, elsewhere.
//
// A skill's content is read when the agent asks for it, not at
// discovery: discovery reads only what the catalog needs, and an edit to
// a skill's body is seen at its next use.
package skills

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aerie-run/aerie/runner/layer"
)

// Skill is one discovered skill.
type Skill struct {
	// Name is the name the agent and the user call it by; a plugin's
	// skills are named <plugin>:<skill>.
	Name string `json:"name"`
	// Description says when to use the skill.
	Description string `json:"description"`
	// Dir is the skill's directory, where the files and scripts its
	// SKILL.md refers to are.
	Dir string `json:"dir"`
	// Root is the name of the root it was found in.
	Root string `json:"root"`
	// Plugin is the plugin the skill comes from, if any.
	Plugin string `json:"plugin,omitempty"`

	// confine is the directory reads stay inside ("" for none), and rel
	// the skill directory's slash path from it (or "." from Dir).
	confine string
	rel     string
}

// File returns the path of the skill's SKILL.md.
func (s Skill) File() string { return filepath.Join(s.Dir, "SKILL.md") }

// open opens the skill's directory, so that reading its files never
// leaves it; for a confined skill the path to it is resolved inside the
// confining directory first.
func (s Skill) open() (*layer.Dir, error) {
	if s.confine == "" {
		return layer.OpenDir(s.Dir)
	}
	outer, err := layer.OpenDir(s.confine)
	if err != nil {
		return nil, err
	}
	defer outer.Close()
	return outer.OpenDir(s.rel)
}

// Content reads the skill's SKILL.md in full.
func (s Skill) Content() (string, error) {
	r, err := s.open()
	if err != nil {
		return "", fmt.Errorf("read skill %s: %s", s.Name, describe(err))
	}
	defer r.Close()
	res := readIn(r, "SKILL.md")
	if res.err != nil {
		return "", fmt.Errorf("read skill %s: SKILL.md: %w", s.Name, res.err)
	}
	return string(res.data), nil
}

// Set is the skills available to a session, and the report of how they
// were found.
type Set struct {
	skills []Skill
	byName map[string]int

	// Entries lists every skill directory found, active, shadowed or
	// skipped, in the order found.
	Entries []Entry `json:"entries"`
	// Problems are the reasons skills or places searched were not used.
	Problems []layer.Problem `json:"problems,omitempty"`
}

// Skills returns the available skills in the order they were found.
func (s *Set) Skills() []Skill {
	if s == nil {
		return nil
	}
	return slices.Clone(s.skills)
}

// Len returns the number of available skills.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.skills)
}

// Lookup returns the skill called name.
func (s *Set) Lookup(name string) (Skill, bool) {
	if s == nil {
		return Skill{}, false
	}
	i, ok := s.byName[name]
	if !ok {
		return Skill{}, false
	}
	return s.skills[i], true
}

// Names returns the names of the available skills, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	names := make([]string, len(s.skills))
	for i, sk := range s.skills {
		names[i] = sk.Name
	}
	slices.Sort(names)
	return names
}

// Catalog is the block of the system prompt that tells the model which
// skills exist: each one's name and description, sorted by name, and how
// to read one. It is empty when there are no skills.
func (s *Set) Catalog() string {
	if s.Len() == 0 {
		return ""
	}
	sorted := s.Skills()
	slices.SortFunc(sorted, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	size := 512
	for _, sk := range sorted {
		size += len(sk.Name) + len(sk.Description) + 4
	}
	b.Grow(size)
	b.WriteString("# Skills\n\n")
	b.WriteString("Skills are instructions for particular kinds of tasks. When a task fits a skill's description, ")
	b.WriteString("read the skill with the `" + ToolName + "` tool before you start, and follow it. ")
	b.WriteString("A skill attached to the user's message is already in your context.\n\n")
	for _, sk := range sorted {
		b.WriteString("- ")
		b.WriteString(sk.Name)
		b.WriteString(": ")
		first := true
		for w := range strings.FieldsSeq(sk.Description) {
			if !first {
				b.WriteByte(' ')
			}
			b.WriteString(w)
			first = false
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ErrNotAvailable means a skill named in a prompt or a call is not
// available to the agent.
var ErrNotAvailable = errors.New("not available")

// notAvailable returns the error for a name that is not in the set,
// listing what is.
func (s *Set) notAvailable(name string) error {
	names := s.Names()
	if len(names) == 0 {
		return fmt.Errorf("skill %q: %w; no skills are available", name, ErrNotAvailable)
	}
	const show = 50
	list := names
	more := ""
	if len(list) > show {
		list, more = list[:show], fmt.Sprintf(" (and %d more)", len(names)-show)
	}
	return fmt.Errorf("skill %q: %w; available: %s%s", name, ErrNotAvailable, strings.Join(list, ", "), more)
}
