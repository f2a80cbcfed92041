package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/aerie-run/aerie/runner/atomicfile"
	"github.com/aerie-run/aerie/runner/store"
)

// SaveDatabaseURL sets database_url in the global config under home and
// returns the file it wrote. It creates home (0700) and the file (0600,
// since a URL can carry a password) when they are missing.
//
// The rest of the file is kept byte for byte — comments, formatting, key
// order and keys this version of aerie does not know — because the edit is
// textual: it replaces the old value, or inserts one line. The file is
// replaced atomically with its mode kept, and a symlinked config.toml (a
// dotfiles checkout) is edited where it points rather than replaced by a
// plain file.
//
// A file that is not valid TOML is left alone and reported: editing it
// could not be done safely, and overwriting it would lose the user's text.
func SaveDatabaseURL(home, databaseURL string) (string, error) {
	file := GlobalFile(home)
	if _, err := store.ParseURL(databaseURL); err != nil {
		return file, fmt.Errorf("save database_url: %w", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return file, fmt.Errorf("create aerie home: %w", err)
	}
	target := file
	if fi, err := os.Lstat(file); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if target, err = filepath.EvalSymlinks(file); err != nil {
			return file, fmt.Errorf("resolve symlinked global config %s (fix or remove the link): %w", file, err)
		}
	}
	perm := fs.FileMode(0o600)
	doc, err := os.ReadFile(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return file, fmt.Errorf("read global config: %w", err)
	default:
		fi, err := os.Stat(target)
		if err != nil {
			return file, fmt.Errorf("read global config: %w", err)
		}
		perm = fi.Mode().Perm()
	}
	out, err := setTopLevelString(target, doc, keyDatabaseURL, databaseURL)
	if err != nil {
		return file, err
	}
	if err := atomicfile.Write(target, out, perm); err != nil {
		return file, fmt.Errorf("write global config: %w", err)
	}
	return file, nil
}

// setTopLevelString returns doc with the top-level key set to the string
// value. path is used only in errors.
//
// Where: an existing `key = ...` before the first table header has its value
// replaced (a comment after it on the line stays). Otherwise a line is
// inserted: after the last top-level key/value when there is one, so the
// top-level keys stay together; else before the first table header and the
// comment block directly above it (that block documents the table); else at
// the end, which for a file of comments is after them.
func setTopLevelString(path string, doc []byte, key, value string) ([]byte, error) {
	if !utf8.ValidString(value) {
		return nil, fmt.Errorf("save %s: the value is not valid UTF-8, which TOML cannot hold", key)
	}
	var before map[string]any
	if err := toml.Unmarshal(doc, &before); err != nil {
		fe := syntaxError(path, err)
		fe.Fix = "fix it (or move it aside) and save again; the file was not changed"
		return nil, fe
	}

	var p unstable.Parser
	p.Reset(doc)
	var (
		valStart, valEnd = -1, -1 // the existing value's bytes
		lastTopEnd       = -1     // end of the last top-level key/value
		header           = -1     // offset of the first table header's key
	)
	for header < 0 && p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			it := e.Key()
			it.Next()
			header = int(it.Node().Raw.Offset)
		case unstable.KeyValue:
			lastTopEnd = int(e.Raw.Offset + e.Raw.Length)
			if k := keyOf(e.Key()); len(k) == 1 && k[0] == key {
				valStart, valEnd = valueStart(doc, e), lastTopEnd
			}
		}
	}
	if err := p.Error(); err != nil {
		// Unmarshal accepted the document, so the two parsers disagree.
		return nil, fmt.Errorf(
			"edit %s: could not set %s safely (the file was not changed; set it by hand): %w", path, key, err)
	}
	if _, ok := before[key]; ok && valStart < 0 {
		// Defined by a [key] header or a dotted key.key = ...: there is no
		// value to replace, and inserting one would redefine the key.
		line, col := locate(doc, []string{key})
		return nil, &FileError{
			Path: path, Line: line, Column: col, Key: key,
			Err: errors.New("is a table, not a string"),
			Fix: "remove that table and save again; the file was not changed",
		}
	}

	eol := "\n"
	if bytes.Contains(doc, []byte("\r\n")) {
		eol = "\r\n"
	}
	kv := key + " = " + quote(value)
	var out []byte
	switch {
	case valStart >= 0:
		out = splice(doc, valStart, valEnd, quote(value))
	case lastTopEnd >= 0:
		at := bytes.IndexByte(doc[lastTopEnd:], '\n')
		if at < 0 {
			out = splice(doc, len(doc), len(doc), eol+kv+eol)
		} else {
			at += lastTopEnd + 1
			out = splice(doc, at, at, kv+eol)
		}
	case header >= 0:
		at := commentBlockStart(doc, lineStart(doc, header))
		out = splice(doc, at, at, kv+eol+eol)
	default:
		text := kv + eol
		if len(doc) > 0 && doc[len(doc)-1] != '\n' {
			text = eol + text
		}
		out = splice(doc, len(doc), len(doc), text)
	}

	// The edit is built to be correct; this check turns a bug in it into an
	// error before the user's file is replaced.
	var after map[string]any
	if err := toml.Unmarshal(out, &after); err != nil || after[key] != value {
		return nil, fmt.Errorf("edit %s: could not set %s safely (the file was not changed); set it by hand", path, key)
	}
	return out, nil
}

// valueStart returns the offset of a key/value's value: after the last key
// part, the '=' and the whitespace around it. (Array and inline-table nodes
// carry no byte range of their own, so the value is found from the key.)
func valueStart(doc []byte, kv *unstable.Node) int {
	var last *unstable.Node
	for it := kv.Key(); it.Next(); {
		last = it.Node()
	}
	i := int(last.Raw.Offset + last.Raw.Length)
	i += len(doc[i:]) - len(bytes.TrimLeft(doc[i:], " \t"))
	i++ // '='
	i += len(doc[i:]) - len(bytes.TrimLeft(doc[i:], " \t"))
	return i
}

func splice(doc []byte, from, to int, text string) []byte {
	out := make([]byte, 0, len(doc)-(to-from)+len(text))
	out = append(out, doc[:from]...)
	out = append(out, text...)
	return append(out, doc[to:]...)
}

// lineStart returns the offset of the start of the line holding offset.
func lineStart(doc []byte, offset int) int {
	return bytes.LastIndexByte(doc[:offset], '\n') + 1
}

// commentBlockStart returns where the run of comment lines directly above
// the line starting at start begins (start itself when there is none).
func commentBlockStart(doc []byte, start int) int {
	for start > 0 {
		prev := lineStart(doc, start-1)
		if !strings.HasPrefix(strings.TrimLeft(string(doc[prev:start]), " \t"), "#") {
			break
		}
		start = prev
	}
	return start
}

// quote returns s as a TOML basic string.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
