// Package compress shortens large tool outputs by their structure: a JSON
// document, search results (path:line: text), source code or a directory
// listing becomes a view that keeps its shape and says what it left out.
// Prose has none of these structures and is left alone.
//
// It only transforms text. Keeping the original, and telling the model how
// to have it back, is the caller's job (tools.Capper).
package compress

import (
	"fmt"
	"strings"
)

// Kind is the structure a view was made for.
type Kind string

// The structures Compress recognises.
const (
	KindJSON    Kind = "json"
	KindSearch  Kind = "search"
	KindCode    Kind = "code"
	KindListing Kind = "listing"
)

// compressor recognises one structure and renders views of it, each level
// shorter than the one before.
type compressor struct {
	kind Kind
	// parse returns what render needs of s, or false when s does not have
	// the structure.
	parse func(s string) (any, bool)
	// render returns the view of the parsed text at a level, from 0 (the
	// most detail) to levels-1.
	render func(parsed any, level int) string
	levels int
}

// compressors are tried in order: the strict structures first, so that a
// JSON document is never taken for code, nor search results for a listing.
func compressors() [4]compressor {
	return [...]compressor{
		{kind: KindJSON, parse: parseJSON, render: renderJSON, levels: jsonLevels},
		{kind: KindSearch, parse: parseSearch, render: renderSearch, levels: searchLevels},
		{kind: KindListing, parse: parseListing, render: renderListing, levels: listingLevels},
		{kind: KindCode, parse: parseCode, render: renderCode, levels: codeLevels},
	}
}

// Compress returns a view of s that fits in limit bytes if one does (else
// the shortest it has), and the structure it found. ok is false when s has
// none of the structures, or when no view is shorter than s itself.
func Compress(s string, limit int) (view string, kind Kind, ok bool) {
	for _, c := range compressors() {
		parsed, match := c.parse(s)
		if !match {
			continue
		}
		for level := range c.levels {
			v := c.render(parsed, level)
			if view == "" || len(v) < len(view) {
				view = v
			}
			if len(v) <= limit {
				break
			}
		}
		if len(view) >= len(s) {
			return "", c.kind, false
		}
		return view, c.kind, true
	}
	return "", "", false
}

// lines splits s into lines without their newlines; a last newline ends
// the last line rather than starting an empty one.
func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:cut(s, n)] + "…"
}

// cut is the rune boundary at or before byte n of s.
func cut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !runeStart(s[n]) {
		n--
	}
	return n
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// notes splits off the tool's own notes at the end of its output — lines in
// brackets such as "[stopped after 100 matches ...]" — which every view
// keeps.
func notes(ls []string) (body, tail []string) {
	end := len(ls)
	for end > 0 {
		l := strings.TrimSpace(ls[end-1])
		if l != "" && !(strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]")) {
			break
		}
		end--
	}
	return ls[:end], ls[end:]
}

// moreGroups writes the line that ends a view which leaves n groups out
// (directories of a listing, files of a search): how many, what they hold
// (what), and the paths of the first limit of them.
func moreGroups(b *strings.Builder, what string, n, limit int, path func(i int) string) {
	fmt.Fprintf(b, "… %d more %s:", n, what)
	for i := range n {
		if i == limit {
			fmt.Fprintf(b, " … (%d more)", n-i)
			break
		}
		b.WriteString(" " + path(i))
	}
	b.WriteByte('\n')
}
