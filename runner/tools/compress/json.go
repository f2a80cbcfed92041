package compress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsonNode is a decoded JSON value with its object keys in document order,
// which a map would lose.
type jsonNode struct {
	// kind is '{', '[', '"' or 0 for the other scalars.
	kind byte
	// text is a scalar's text: a string's value, a number's, true, false
	// or null.
	text string
	keys []string
	kids []*jsonNode
}

// jsonLimits are how much of a document one view shows.
type jsonLimits struct {
	items, keys, str, depth int
}

// jsonLevels is how many views of a document renderJSON has.
const jsonLevels = 5

func jsonLimitsAt(level int) jsonLimits {
	return [jsonLevels]jsonLimits{
		{items: 20, keys: 60, str: 240, depth: 10},
		{items: 8, keys: 30, str: 120, depth: 6},
		{items: 4, keys: 16, str: 64, depth: 4},
		{items: 2, keys: 8, str: 32, depth: 3},
		{items: 1, keys: 4, str: 16, depth: 2},
	}[level]
}

// parseJSON reads s as one JSON object or array (a lone scalar has no
// structure worth a view).
func parseJSON(s string) (any, bool) {
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	n, err := decodeNode(dec, 0)
	if err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // more than one value
	}
	return n, true
}

// maxJSONDepth bounds the nesting decodeNode follows, so that a hostile
// output cannot exhaust the stack.
const maxJSONDepth = 10000

func decodeNode(dec *json.Decoder, depth int) (*jsonNode, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &jsonNode{kind: byte(v)}
		for dec.More() {
			if n.kind == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("read key: %w", err)
				}
				key, _ := k.(string)
				n.keys = append(n.keys, key)
			}
			kid, err := decodeNode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, fmt.Errorf("read end: %w", err)
		}
		return n, nil
	case string:
		return &jsonNode{kind: '"', text: v}, nil
	case json.Number:
		return &jsonNode{text: v.String()}, nil
	case bool:
		return &jsonNode{text: strconv.FormatBool(v)}, nil
	default:
		return &jsonNode{text: "null"}, nil
	}
}

func renderJSON(parsed any, level int) string {
	var b bytes.Buffer
	writeNode(&b, parsed.(*jsonNode), jsonLimitsAt(level), 0)
	b.WriteByte('\n')
	return b.String()
}

// writeNode writes n indented at depth: arrays and objects past the limits
// end with a string saying how many items or keys were left out, and
// values deeper than the limit are replaced by their size.
func writeNode(b *bytes.Buffer, n *jsonNode, l jsonLimits, depth int) {
	switch n.kind {
	case '"':
		s := n.text
		if len(s) > l.str {
			c := cut(s, l.str)
			s = fmt.Sprintf("%s… (%d more bytes)", s[:c], len(s)-c)
		}
		writeString(b, s)
		return
	case 0:
		b.WriteString(n.text)
		return
	}
	open, closing, what, limit := "[", "]", "items", l.items
	if n.kind == '{' {
		open, closing, what, limit = "{", "}", "keys", l.keys
	}
	if len(n.kids) == 0 {
		b.WriteString(open + closing)
		return
	}
	if depth >= l.depth {
		fmt.Fprintf(b, "%s\"… %d %s\"%s", open, len(n.kids), what, closing)
		return
	}
	b.WriteString(open)
	shown := min(len(n.kids), limit)
	for i := range shown {
		newline(b, depth+1)
		if n.kind == '{' {
			writeString(b, n.keys[i])
			b.WriteString(": ")
		}
		writeNode(b, n.kids[i], l, depth+1)
		if i < len(n.kids)-1 {
			b.WriteByte(',')
		}
	}
	if rest := len(n.kids) - shown; rest > 0 {
		newline(b, depth+1)
		fmt.Fprintf(b, "\"… %d more %s\"", rest, what)
	}
	newline(b, depth)
	b.WriteString(closing)
}

func newline(b *bytes.Buffer, depth int) {
	b.WriteByte('\n')
	for range depth {
		b.WriteString("  ")
	}
}

// writeString writes s as a JSON string, escaping only what JSON requires.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case r == utf8.RuneError:
			b.WriteString("\uFFFD")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
