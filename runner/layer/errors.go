package layer

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
)

// FileError is a problem with one artifact file. Line and Column are
// 1-based, zero when the problem has no single place.
type FileError struct {
	// Path is the file, as the report shows it.
	Path string
	// Line and Column locate the problem.
	Line, Column int
	// Key is the dotted key at fault, when there is one.
	Key string
	// Err is what is wrong.
	Err error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// fieldError is a problem with one key, found after decoding.
type fieldError struct {
	key string
	err error
}

func (e *fieldError) Error() string { return e.key + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// FieldErrorf returns a problem with the key (dotted, as "pin[0].path")
// of a decoded file, which Placed locates in the file.
func FieldErrorf(key, format string, args ...any) error {
	return &fieldError{key: key, err: fmt.Errorf(format, args...)}
}

// DecodeTOML decodes doc strictly into v: an unknown key is an error, so
// that a misspelt field ("timeout" for timeout_secs) is reported instead
// of silently ignored. Errors are *FileError for path with a position.
func DecodeTOML(path string, doc []byte, v any) error {
	if !utf8.Valid(doc) {
		return &FileError{Path: path, Err: errors.New("not valid UTF-8 text")}
	}
	dec := toml.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	fe := &FileError{Path: path, Err: err}
	var sme *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case errors.As(err, &sme) && len(sme.Errors) > 0:
		first := sme.Errors[0]
		fe.Line, fe.Column = first.Position()
		fe.Key = strings.Join(first.Key(), ".")
		fe.Err = errors.New("unknown key; check its spelling against the documented fields")
	case errors.As(err, &de):
		fe.Line, fe.Column = de.Position()
		fe.Key = strings.Join(de.Key(), ".")
		fe.Err = errors.New(tomlMessage(de.Error()))
	}
	return fe
}

// Placed returns err as a *FileError for path, locating the key of an
// error from FieldErrorf in doc.
func Placed(path string, doc []byte, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*FileError](err); ok {
		return err
	}
	fe := &FileError{Path: path, Err: err}
	if ke, ok := errors.AsType[*fieldError](err); ok {
		fe.Key, fe.Err = ke.key, ke.err
		fe.Line = locateKey(doc, ke.key)
	}
	return fe
}

var cannotDecode = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`cannot decode TOML (\w+(?: \w+)?) into .* of type (\S+)`)
})

// tomlMessage rewrites go-toml's message in the file's terms: "want an
// array of strings, got a string" rather than Go type names.
func tomlMessage(msg string) string {
	msg = strings.TrimPrefix(msg, "toml: ")
	m := cannotDecode().FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	return fmt.Sprintf("want %s, got %s", goTypeInTOML(m[2]), article(m[1]))
}

func goTypeInTOML(t string) string {
	switch {
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"), strings.HasPrefix(t, "*int"):
		return "an integer"
	case t == "*bool":
		return "a boolean"
	case t == "[]string":
		return "an array of strings"
	case strings.HasPrefix(t, "[]"):
		return "an array of tables"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."):
		return "a table"
	default:
		return t
	}
}

func article(kind string) string {
	switch kind[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + kind
	}
	return "a " + kind
}

// locateKey returns the line of the last segment of a dotted key in doc,
// or 0. It is a best effort for messages: the key's last name at the start
// of a line.
func locateKey(doc []byte, key string) int {
	name := key[strings.LastIndexByte(key, '.')+1:]
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	for i, line := range strings.Split(string(doc), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, name) {
			rest := strings.TrimSpace(t[len(name):])
			if strings.HasPrefix(rest, "=") {
				return i + 1
			}
		}
	}
	return 0
}

// MaxReason bounds a reason in the report, in bytes (SanitizeReason cuts
// it there and marks the cut with "…").
const MaxReason = 400

// SanitizeReason makes a message safe to show as an artifact's reason in
// the report: control characters (terminal escapes included) become
// spaces, runs of space collapse, anything that looks like a credential is
// masked, and the message is cut to MaxReason bytes. Every loader that
// reports artifacts (hooks, skills, plugins, MCP servers) passes its
// reasons through it, since they quote files a repository controls. It is
// idempotent.
func SanitizeReason(msg string) string {
	if msg == "" {
		// Most artifacts have no reason: the report builders call this for
		// every one, and the credential patterns cost allocations even on
		// an empty message.
		return ""
	}
	msg = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, msg)
	msg = Redact(strings.Join(strings.Fields(msg), " "))
	if len(msg) > MaxReason {
		cut := MaxReason
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// Redact masks what looks like a credential in text (a value with a
// secret-sounding key, a URL's password, a common token prefix) as
// "[redacted]", as the report does; the rest of text is unchanged.
func Redact(text string) string {
	for _, re := range secretish() {
		text = re.ReplaceAllString(text, "${1}[redacted]")
	}
	return text
}

// secretish matches values that look like credentials — key=value pairs
// with a secret-sounding key, URL passwords, common token prefixes — with
// what to keep in group 1.
var secretish = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`(?i)((?:password|passwd|secret|token|api[_-]?key)\s*[=:]\s*)[^\s,;]+`),
		regexp.MustCompile(`(://[^:/@\s]+:)[^@\s]+`),
		regexp.MustCompile(`()\b(?:sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{16,}|xox[abp]-[A-Za-z0-9-]{8,})`),
	}
})
