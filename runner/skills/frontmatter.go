package skills

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// namePattern is the spec's rule for a skill name: lowercase letters,
// digits and single hyphens, neither first nor last.
var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`) })

// ValidName reports whether name is a valid skill (or plugin) name.
func ValidName(name string) bool { return namePattern().MatchString(name) }

// Frontmatter is what aerie reads from a SKILL.md's frontmatter. Other
// fields are ignored, as the spec says.
type Frontmatter struct {
	// Name is the name field, "" when absent (the directory name is then
	// the skill's name).
	Name string
	// Description says when to use the skill; required.
	Description string
}

// FieldError is a problem with one field of a SKILL.md ("" for the file
// as a whole).
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ParseFrontmatter reads the YAML frontmatter at the start of a SKILL.md:
//
//	---
//	name: release-notes
//	description: Use when drafting release notes from merged pull requests.
//	---
//
// The file must start with it (a UTF-8 byte order mark and CRLF line
// ends are tolerated). The name, when present, must be a valid name; the
// description must be present and not blank. The error is a *FieldError.
func ParseFrontmatter(data []byte) (fm Frontmatter, err error) {
	defer func() {
		// yaml.v3 has panicked on hostile input before; a skill file
		// must never take the runner down with it.
		if r := recover(); r != nil {
			fm, err = Frontmatter{}, fieldErr("", "cannot parse the frontmatter: internal error: %v", r)
		}
	}()
	block, ok := frontmatterBlock(data)
	if !ok {
		return Frontmatter{}, fieldErr("",
			"does not start with YAML frontmatter (a line \"---\", the fields, a line \"---\")")
	}
	if len(bytes.TrimSpace(block)) == 0 {
		return Frontmatter{}, fieldErr("description", "missing; say when the agent should use the skill")
	}
	if fm, ok := parseSimple(block); ok {
		return fm, nil
	}
	return parseYAML(block)
}

// parseYAML reads a frontmatter block with the YAML parser.
func parseYAML(block []byte) (fm Frontmatter, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(block, &doc); err != nil {
		return Frontmatter{}, fieldErr("", "invalid YAML in the frontmatter: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind != yaml.MappingNode {
		return Frontmatter{}, fieldErr("", "the frontmatter must be a mapping of fields (line %d)", top.Line)
	}
	var seenName, seenDesc bool
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		switch k.Value {
		case "name":
			if seenName {
				return Frontmatter{}, fieldErr("name", "appears twice (line %d)", k.Line)
			}
			seenName = true
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return Frontmatter{}, fieldErr("name", "must be a string (line %d)", v.Line)
			}
			if !ValidName(v.Value) {
				return Frontmatter{}, fieldErr("name", "%q is not a valid skill name: "+
					"use lowercase letters, digits and single hyphens, such as release-notes", v.Value)
			}
			fm.Name = v.Value
		case "description":
			if seenDesc {
				return Frontmatter{}, fieldErr("description", "appears twice (line %d)", k.Line)
			}
			seenDesc = true
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return Frontmatter{}, fieldErr("description", "must be a string (line %d)", v.Line)
			}
			if strings.TrimSpace(v.Value) == "" {
				return Frontmatter{}, fieldErr("description", "is empty; say when the agent should use the skill")
			}
			fm.Description = strings.TrimSpace(v.Value)
		}
	}
	if !seenDesc {
		return Frontmatter{}, fieldErr("description", "missing; say when the agent should use the skill")
	}
	return fm, nil
}

// frontmatterBlock returns the text between the opening "---" line and
// the closing one.
func frontmatterBlock(data []byte) ([]byte, bool) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	first, rest, ok := cutLine(data)
	if !ok || !isFence(first) {
		return nil, false
	}
	start := len(data) - len(rest)
	for off := start; off < len(data); {
		line, _, hasNL := cutLine(data[off:])
		if isFence(line) {
			return data[start:off], true
		}
		if !hasNL {
			break
		}
		off += len(line) + 1
	}
	return nil, false
}

// cutLine returns the first line of data (without "\n") and the rest.
func cutLine(data []byte) (line, rest []byte, hasNL bool) {
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		return data, nil, false
	}
	return data[:i], data[i+1:], true
}

// isFence reports whether line is "---", ignoring trailing blanks and a
// carriage return.
func isFence(line []byte) bool {
	return string(bytes.TrimRight(line, " \t\r")) == "---"
}

// parseSimple reads frontmatter made only of "key: value" lines with
// plain one-line values — most of it — without the YAML parser, which
// costs more than all the file system calls of discovering a skill. It
// returns false for anything else, and for anything that would be an
// error, so that the YAML parser decides every case it is unsure of;
// FuzzParseSimple checks that both agree.
func parseSimple(block []byte) (Frontmatter, bool) {
	var fm Frontmatter
	var seenDesc bool
	// The keys seen, as slices of block: a frontmatter has a handful, and
	// a map and a string per key cost more than comparing them.
	var seenBuf [8][]byte
	seen := seenBuf[:0]
	for len(block) > 0 {
		line, rest, _ := cutLine(block)
		block = rest
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimRight(line, " ")) == 0 {
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !simpleKey(line[:colon]) {
			return Frontmatter{}, false
		}
		key := line[:colon]
		val := line[colon+1:]
		if len(val) > 0 && val[0] != ' ' {
			return Frontmatter{}, false
		}
		val = bytes.Trim(val, " ")
		if !simpleValue(val) {
			return Frontmatter{}, false
		}
		for _, k := range seen {
			if bytes.Equal(k, key) {
				return Frontmatter{}, false
			}
		}
		seen = append(seen, key)
		switch string(key) {
		case "name":
			if !ValidName(string(val)) {
				return Frontmatter{}, false
			}
			fm.Name = string(val)
		case "description":
			fm.Description = strings.TrimSpace(string(val))
			if fm.Description == "" {
				return Frontmatter{}, false
			}
			seenDesc = true
		}
	}
	return fm, seenDesc
}

// simpleKey reports whether k is a key the YAML parser reads as itself.
func simpleKey(k []byte) bool {
	for i, c := range k {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case c == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}

// simpleValue reports whether v, a trimmed one-line value, is a plain
// scalar whose text is v itself: not empty or null, not starting with an
// indicator, without ": " or " #" in it, of printable characters.
func simpleValue(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	switch string(v) {
	case "~", "null", "Null", "NULL":
		return false
	}
	if bytes.IndexByte([]byte("-?:,[]{}#&*!|>'\"%@`"), v[0]) >= 0 {
		return false
	}
	if v[len(v)-1] == ':' || bytes.Contains(v, []byte(": ")) || bytes.Contains(v, []byte(" #")) {
		return false
	}
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRune(v[i:])
		i += size
		switch {
		case r == utf8.RuneError, r == '\ufeff', r == '\u2028', r == '\u2029':
			return false // invalid UTF-8, a byte order mark, line separators
		case r >= 0x20 && r <= 0x7e:
		case r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		default:
			return false // control characters, which YAML refuses or treats specially
		}
	}
	return true
}

// SplitFrontmatter returns the YAML frontmatter of a Markdown file (the
// text between its opening "---" line and the closing one) and the body
// after it; ok is false when the file does not start with frontmatter.
// Claude's agent and command files share SKILL.md's shape.
func SplitFrontmatter(data []byte) (block, body []byte, ok bool) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	first, rest, ok := cutLine(data)
	if !ok || !isFence(first) {
		return nil, nil, false
	}
	start := len(data) - len(rest)
	for off := start; off < len(data); {
		line, after, hasNL := cutLine(data[off:])
		if isFence(line) {
			return data[start:off], after, true
		}
		if !hasNL {
			break
		}
		off += len(line) + 1
	}
	return nil, nil, false
}
