package memory

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// ErrMalformed is what a memory document that is not a markdown list of
// entries is (see Parse).
var ErrMalformed = errors.New("malformed memory document")

// MalformedError says where a memory document stops being a list of
// entries, and how to repair it.
type MalformedError struct {
	// Line is the 1-based line that is neither an entry, a continuation,
	// a heading nor blank.
	Line int
	// Text is that line, shortened.
	Text string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("line %d %q is not a memory entry: start an entry with \"- \", "+
		"indent its further lines, or make the line a \"#\" heading", e.Line, e.Text)
}

// Is makes a MalformedError match ErrMalformed.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// Parse reads a memory document: a markdown list whose items are the
// entries. An entry starts with "- " and goes on over the indented lines
// after it; blank lines and "#" headings between entries are ignored. Any
// other line makes the document malformed (a *MalformedError), and then
// no entry of it is returned: a half-understood document is not rewritten.
// The entries come back normalized (see normalize), so that
// Parse(Format(entries)) gives them back.
func Parse(data []byte) ([]string, error) {
	var entries []string
	var cur []string
	flush := func() {
		if cur != nil {
			entries = append(entries, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRightFunc(line, unicode.IsSpace)
		switch {
		case line == "":
		case strings.HasPrefix(line, "- "):
			flush()
			cur = append(make([]string, 0, 4), strings.TrimLeftFunc(line[2:], unicode.IsSpace))
		case cur != nil && (line[0] == ' ' || line[0] == '\t'):
			cur = append(cur, continuation(line))
		case line[0] == '#':
			flush()
		default:
			return nil, &MalformedError{Line: i + 1, Text: shorten(line, 60)}
		}
	}
	flush()
	return entries, nil
}

// continuation is a further line of an entry without the indent Format
// gives it: two spaces, a tab, or the one space there is.
func continuation(line string) string {
	for _, p := range []string{"  ", "\t", " "} {
		if s, ok := strings.CutPrefix(line, p); ok {
			return s
		}
	}
	return line
}

// Format writes entries as a memory document under heading, one list item
// each, the further lines of an entry indented by two spaces.
func Format(heading string, entries []string) []byte {
	s := "# " + heading + "\n"
	if len(entries) > 0 {
		s += "\n" + list(entries)
	}
	return []byte(s)
}

// list is entries as a markdown list.
func list(entries []string) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString("- " + strings.ReplaceAll(e, "\n", "\n  ") + "\n")
	}
	return b.String()
}

// normalize is content as an entry: lines without trailing white space,
// blank lines dropped, the first line without leading white space. It is
// what Parse reads back from Format's list item.
func normalize(content string) string {
	var lines []string
	for _, l := range strings.Split(content, "\n") {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		if strings.TrimSpace(l) == "" {
			continue
		}
		if len(lines) == 0 {
			l = strings.TrimLeftFunc(l, unicode.IsSpace)
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// shorten cuts s to at most n runes.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
