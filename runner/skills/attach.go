package skills

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// explicitPrefix introduces a skill named explicitly in a prompt,
// /skill:<name>, which is refused when no such skill is available.
// Plugins may not be called "skill", so it cannot be a plugin skill.
const explicitPrefix = "skill:"

// Attachment is a skill named in a prompt, with its content.
type Attachment struct {
	Skill   Skill
	Content string
}

// Attach finds the skills a prompt names and reads them. A skill is
// named by a word starting with "/" at the start of the prompt or after
// white space: /release-notes, /review:checklist (a plugin's skill) or
// /skill:release-notes. A bare /<name> that is no available skill stays
// plain text (it may be a path); /skill:<name> is an error wrapping
// ErrNotAvailable then. Each skill is attached once, in the order first
// named.
func (s *Set) Attach(prompt string) ([]Attachment, error) {
	var out []Attachment
	seen := make(map[string]bool)
	for i := 0; i < len(prompt); i++ {
		if prompt[i] != '/' {
			continue
		}
		if i > 0 {
			r, _ := utf8.DecodeLastRuneInString(prompt[:i])
			if !unicode.IsSpace(r) {
				continue
			}
		}
		rest := prompt[i+1:]
		var name string
		explicit := strings.HasPrefix(rest, explicitPrefix)
		if explicit {
			word := rest[len(explicitPrefix):]
			if j := strings.IndexFunc(word, unicode.IsSpace); j >= 0 {
				word = word[:j]
			}
			name = strings.TrimRight(word, ".,;:!?)")
			if name == "" {
				continue
			}
		} else {
			j := 0
			for j < len(rest) && nameByte(rest[j]) {
				j++
			}
			if j < len(rest) {
				r, _ := utf8.DecodeRuneInString(rest[j:])
				if !unicode.IsSpace(r) && !strings.ContainsRune(".,;!?)", r) {
					continue // part of a longer word: /usr/bin, /tmp/x
				}
			}
			name = strings.TrimRight(rest[:j], ":")
			if name == "" {
				continue
			}
		}
		sk, ok := s.Lookup(name)
		if !ok {
			if explicit {
				return nil, fmt.Errorf("attach skills: %w", s.notAvailable(name))
			}
			continue
		}
		if seen[sk.Name] {
			continue
		}
		seen[sk.Name] = true
		content, err := sk.Content()
		if err != nil {
			return nil, fmt.Errorf("attach skills: %w", err)
		}
		out = append(out, Attachment{Skill: sk, Content: content})
	}
	return out, nil
}

// nameByte reports whether c can be part of a skill name in a prompt.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == ':'
}

// Message returns the user message for prompt with the attachments
// before it, so that the agent follows them from the start. Without
// attachments it is prompt itself.
func Message(prompt string, atts []Attachment) string {
	if len(atts) == 0 {
		return prompt
	}
	var b strings.Builder
	if len(atts) == 1 {
		b.WriteString("The user attached a skill to this message; follow it.\n\n")
	} else {
		b.WriteString("The user attached skills to this message; follow them.\n\n")
	}
	for _, a := range atts {
		fmt.Fprintf(&b, "<skill name=%q directory=%q>\n", a.Skill.Name, a.Skill.Dir)
		b.WriteString(a.Content)
		if !strings.HasSuffix(a.Content, "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("</skill>\n\n")
	}
	b.WriteString(prompt)
	return b.String()
}
