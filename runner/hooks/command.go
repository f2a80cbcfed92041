package hooks

import (
	"path/filepath"
	"strings"
)

// firstToken returns the program word of a shell command line: its first
// word after any VAR=value assignments, with quotes removed. expands
// reports that the word holds an unquoted or double-quoted $ or `, so that
// its value is known only to the shell. It is a lexer for the common
// forms, not a shell: what it cannot follow it reports as an expansion.
func firstToken(cmd string) (word string, expands bool) {
	rest := cmd
	for {
		word, expands, rest = nextWord(rest)
		if word == "" || expands || !isAssignment(word) {
			return word, expands
		}
	}
}

// nextWord lexes one word off the front of s.
func nextWord(s string) (word string, expands bool, rest string) {
	s = strings.TrimLeft(s, " \t\n")
	var b strings.Builder
	i := 0
loop:
	for i < len(s) {
		c := s[i]
		switch c {
		case ' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')':
			break loop
		case '\\':
			if i+1 < len(s) {
				b.WriteByte(s[i+1])
				i += 2
				continue
			}
			i++
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return b.String() + s[i+1:], true, ""
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 2
		case '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				switch s[j] {
				case '\\':
					if j+1 < len(s) {
						j++
					}
				case '$', '`':
					expands = true
				}
				b.WriteByte(s[j])
				j++
			}
			if j >= len(s) {
				return b.String(), true, ""
			}
			i = j + 1
		case '$', '`':
			expands = true
			b.WriteByte(c)
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), expands, s[i:]
}

// isAssignment reports whether word is NAME=value.
func isAssignment(word string) bool {
	name, _, ok := strings.Cut(word, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// commandExecutable returns the executable a hook command references for
// trust pins: its first token when that is path-bearing (it has a /), as
// the spec says; a bare name resolved through PATH references none. A
// relative path is resolved against dir, where the command runs, and ~/
// against home; a token whose value only the shell knows is kept as
// written.
func commandExecutable(cmd, dir, home string) (string, bool) {
	word, expands := firstToken(cmd)
	if !strings.Contains(word, "/") {
		return "", false
	}
	if expands {
		return word, true
	}
	switch {
	case strings.HasPrefix(word, "~/") && home != "":
		return filepath.Join(home, word[2:]), true
	case filepath.IsAbs(word) || strings.HasPrefix(word, "~"):
		return filepath.Clean(word), true
	case dir != "":
		return filepath.Join(dir, word), true
	}
	return word, true
}

// shellQuote quotes s as one word for sh and bash.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("_-./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
