package transcript

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Decoding payloads is most of the cost of resuming a long session, and
// encoding/json spends it twice over: it checks the whole payload before
// decoding it, and then decodes through reflection. fastDecode decodes the
// kinds a transcript is made of in one pass without reflection.
//
// It accepts only part of what encoding/json accepts: well-formed JSON whose
// values have the types of the fields they go to, with keys in plain ASCII
// (no escapes), none repeated, and none that matches a field only when case
// is ignored, nested at most maxSkipDepth deep. For
// those payloads it gives exactly encoding/json's result (FuzzFastDecode
// holds it to that). Anything else makes it give up, and decodePayload hands
// the payload to encoding/json, which also makes the error of a corrupt
// payload: errors are never the fast path's to make.
//
// A decoded string that needs no unescaping and is most of its payload (a
// long text) shares the payload's memory rather than being copied, so the
// payload string must not be reused: callers pass a string they own.
// Shorter strings are copied, and the usual values of block types, tool
// statuses and stop reasons are constants: a small string kept (a call id)
// does not keep a large payload alive.

// fastDecode decodes the payload s of kind. ok is false when the kind has
// no fast decoder or s is outside what the fast decoder accepts.
//
// It is long because it is a flat table, one case per kind mapping the
// kind's fields to their decoders, which reads best side by side.
func fastDecode(kind EntryKind, s string) (p Payload, ok bool) {
	d := payloadDecoder{s: s}
	switch kind {
	case KindAssistantMessage:
		var m AssistantMessage
		ok = d.object(assistantMessageFields, func(f int) bool {
			switch f {
			case 0:
				return d.blocks(&m.Content)
			default:
				return d.strOf(&m.StopReason, stopReasons)
			}
		})
		p = m
	case KindToolResult:
		var r ToolResult
		ok = d.object(toolResultFields, func(f int) bool {
			switch f {
			case 0:
				return d.str(&r.CallID)
			case 1:
				return d.blocks(&r.Content)
			default:
				return d.boolean(&r.IsError)
			}
		})
		p = r
	case KindToolCall:
		var c ToolCall
		ok = d.object(toolCallFields, func(f int) bool {
			switch f {
			case 0:
				return d.str(&c.CallID)
			case 1:
				return d.str(&c.Name)
			default:
				return d.raw(&c.Input)
			}
		})
		p = c
	case KindToolCompletion:
		var c ToolCompletion
		ok = d.object(toolCompletionFields, func(f int) bool {
			switch f {
			case 0:
				return d.str(&c.CallID)
			case 1:
				return d.strOf((*string)(&c.Status), toolStatuses)
			case 2:
				return d.int((*int64)(&c.Duration))
			default:
				return d.str(&c.Error)
			}
		})
		p = c
	case KindUserMessage:
		var m UserMessage
		ok = d.object(userMessageFields, func(int) bool { return d.blocks(&m.Content) })
		p = m
	case KindUsage:
		var u Usage
		ok = d.usage(&u)
		p = u
	case KindCheckpoint:
		var c Checkpoint
		ok = d.object(checkpointFields, func(f int) bool {
			switch f {
			case 0:
				return d.int(&c.Turn)
			case 1:
				return d.str((*string)(&c.Outcome))
			default:
				return d.str(&c.Result)
			}
		})
		p = c
	case KindProviderChange:
		var c ProviderChange
		ok = d.object(providerChangeFields, func(int) bool { return d.str(&c.Provider) })
		p = c
	case KindModelChange:
		var c ModelChange
		ok = d.object(modelChangeFields, func(int) bool { return d.str(&c.Model) })
		p = c
	case KindPersonaChange:
		var c PersonaChange
		ok = d.object(personaChangeFields, func(int) bool { return d.str(&c.Persona) })
		p = c
	case KindReasoningChange:
		var c ReasoningChange
		ok = d.object(reasoningChangeFields, func(int) bool { return d.str(&c.Effort) })
		p = c
	default:
		// Compactions, forks, subagent outcomes and hook verdicts are a
		// handful per session: encoding/json decodes them.
		return nil, false
	}
	d.space()
	if !ok || d.i != len(d.s) {
		return nil, false
	}
	return p, true
}

// usage reads a Usage: the one payload whose fields alone would take
// fastDecode past what a function should branch on.
func (d *payloadDecoder) usage(u *Usage) bool {
	return d.object(usageFields, func(f int) bool {
		switch f {
		case 0:
			return d.int(&u.InputTokens)
		case 1:
			return d.int(&u.OutputTokens)
		case 2:
			return d.int(&u.CacheReadTokens)
		case 3:
			return d.int(&u.CacheWriteTokens)
		case 4:
			return d.int(&u.ReasoningTokens)
		case 5:
			return d.int(&u.Requests)
		case 6:
			return d.float(&u.CostUSD)
		default:
			return d.int(&u.ContextTokens)
		}
	})
}

// The JSON names of the fields of each payload, in the order the decoders
// of fastDecode number them. They must match the struct tags.
var (
	assistantMessageFields = []string{"content", "stop_reason"}         //nolint:goconst // keys of different payloads
	toolResultFields       = []string{"call_id", "content", "is_error"} //nolint:goconst // keys of different payloads
	toolCallFields         = []string{"call_id", "name", "input"}
	toolCompletionFields   = []string{"call_id", "status", "duration_ns", "error"}
	userMessageFields      = []string{"content"}
	usageFields            = []string{"input_tokens", "output_tokens", "cache_read_tokens",
		"cache_write_tokens", "reasoning_tokens", "requests", "cost_usd", "context_tokens"}
	checkpointFields      = []string{"turn", "outcome", "result"}
	providerChangeFields  = []string{"provider"}
	modelChangeFields     = []string{"model"}
	personaChangeFields   = []string{"persona"}
	reasoningChangeFields = []string{"effort"}
	blockFields           = []string{"type", "text", "signature", "id", "name", "input", "media_type", "data"}
)

// The usual values of a few fields, which decoding shares.
var (
	blockTypes   = []string{string(BlockText), string(BlockToolUse), string(BlockThinking), string(BlockImage)}
	toolStatuses = []string{
		string(ToolOK), string(ToolError), string(ToolCancelled), string(ToolTimeout), string(ToolDenied),
		string(ToolInterrupted),
	}
	stopReasons = []string{"tool_use", "end_turn", "max_tokens", "stop_sequence", "refusal", "context_window_exceeded"}
)

// payloadDecoder reads one JSON payload, s, from position i.
type payloadDecoder struct {
	s string
	i int
}

// maxSkipDepth bounds the nesting of values the decoder skips or keeps raw,
// far below encoding/json's own limit: deeper values are left to it.
const maxSkipDepth = 256

// object reads an object into a struct whose JSON field names are names.
// field is called with the index of each member's name and the decoder at
// the member's value, which it must read. Members of other names are
// skipped, as encoding/json ignores them.
func (d *payloadDecoder) object(names []string, field func(int) bool) bool {
	d.space()
	if !d.take('{') {
		return false
	}
	if d.space(); d.take('}') {
		return true
	}
	var seen uint64
	for {
		d.space()
		key, ok := d.key()
		if !ok {
			return false
		}
		d.space()
		if !d.take(':') {
			return false
		}
		d.space()
		switch f := fieldIndex(names, key); {
		case f >= 0:
			// Duplicate keys are rare and encoding/json's handling of them
			// (the last wins, merged into what the first decoded) is left
			// to it.
			if seen&(1<<f) != 0 {
				return false
			}
			seen |= 1 << f
			if !field(f) {
				return false
			}
		case f == unknownField:
			if !d.skip(0) {
				return false
			}
		default:
			return false
		}
		d.space()
		if d.i >= len(d.s) {
			return false
		}
		c := d.s[d.i]
		d.i++
		switch c {
		case ',':
		case '}':
			return true
		default:
			return false
		}
	}
}

const (
	unknownField = -1 // a name of no field: the member is ignored
	foldedField  = -2 // a name that matches a field only if case is ignored
)

// fieldIndex returns the index of key in names, unknownField or
// foldedField. Keys are ASCII here (key refuses others), so comparing them
// without case is what encoding/json's name folding does.
func fieldIndex(names []string, key string) int {
	for i, n := range names {
		if key == n {
			return i
		}
	}
	for _, n := range names {
		if strings.EqualFold(key, n) {
			return foldedField
		}
	}
	return unknownField
}

// key reads a member name: a string of printable ASCII without escapes.
func (d *payloadDecoder) key() (string, bool) {
	if !d.take('"') {
		return "", false
	}
	for j := d.i; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			k := d.s[d.i:j]
			d.i = j + 1
			return k, true
		case c == '\\' || c < ' ' || c >= utf8.RuneSelf:
			return "", false
		}
	}
	return "", false
}

// blocks reads an array of content blocks into *bs.
func (d *payloadDecoder) blocks(bs *[]Block) bool {
	if d.null() {
		return true
	}
	if !d.take('[') {
		return false
	}
	// Most messages have one or two blocks: collect them here and allocate
	// the result once, at its size.
	var first [4]Block
	out := first[:0]
	if d.space(); !d.take(']') {
		for {
			d.space()
			var b Block
			if !d.null() && !d.block(&b) {
				return false
			}
			out = append(out, b)
			d.space()
			if d.take(']') {
				break
			}
			if !d.take(',') {
				return false
			}
		}
	}
	// An empty array is an empty slice, not nil, as encoding/json makes it.
	*bs = append(make([]Block, 0, len(out)), out...)
	return true
}

func (d *payloadDecoder) block(b *Block) bool {
	return d.object(blockFields, func(f int) bool {
		switch f {
		case 0:
			return d.strOf((*string)(&b.Type), blockTypes)
		case 1:
			return d.str(&b.Text)
		case 2:
			return d.str(&b.Signature)
		case 3:
			return d.str(&b.ID)
		case 4:
			return d.str(&b.Name)
		case 5:
			return d.raw(&b.Input)
		case 6:
			return d.str(&b.MediaType)
		default:
			return d.bytes(&b.Data)
		}
	})
}

// null reads a null if there is one. encoding/json leaves a string, number,
// bool or struct as it is on null and sets a slice to nil; since the fast
// decoders refuse duplicate keys, they only meet values still at their zero
// value, which null then leaves alone. (json.RawMessage is the exception: it
// keeps the null, as raw does.)
func (d *payloadDecoder) null() bool {
	if strings.HasPrefix(d.s[d.i:], "null") {
		d.i += len("null")
		return true
	}
	return false
}

// str reads a string into *v.
func (d *payloadDecoder) str(v *string) bool { return d.strOf(v, nil) }

// strOf reads a string into *v; if it is one of known, *v is that constant.
func (d *payloadDecoder) strOf(v *string, known []string) bool {
	if d.null() {
		return true
	}
	s, shared, ok := d.quoted()
	if !ok {
		return false
	}
	for _, k := range known {
		if s == k {
			*v = k
			return true
		}
	}
	if shared && 2*len(s) < len(d.s) {
		s = strings.Clone(s)
	}
	*v = s
	return true
}

// quoted reads a string. shared says whether it is a slice of the payload
// rather than a new string.
func (d *payloadDecoder) quoted() (s string, shared, ok bool) {
	if !d.take('"') {
		return "", false, false
	}
	start := d.i
	// The common case: ASCII without escapes.
	j := start
	for j < len(d.s) && plainASCII[d.s[j]] {
		j++
	}
	if j < len(d.s) && d.s[j] == '"' {
		d.i = j + 1
		return d.s[start:j], true, true
	}
	return d.quotedSlow(start, j)
}

// plainASCII marks the bytes a string holds as they are: printable ASCII
// but the quote and the backslash.
var plainASCII = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// quotedSlow reads the rest of a string from j, the first byte that is not
// plain ASCII; the string started at start. It unescapes as encoding/json
// does, and like it replaces invalid UTF-8 and unpaired surrogates with
// U+FFFD.
func (d *payloadDecoder) quotedSlow(start, j int) (s string, shared, ok bool) {
	// Valid UTF-8 without escapes is still a slice of the payload.
	j = d.plain(j)
	if j < len(d.s) && d.s[j] == '"' {
		d.i = j + 1
		return d.s[start:j], true, true
	}
	// Find the closing quote, to allocate the result once: unescaping only
	// shrinks a string, but for invalid UTF-8 (3 bytes for 1), which the
	// builder grows for.
	end := j
	for ; end < len(d.s) && d.s[end] != '"'; end++ {
		if d.s[end] == '\\' {
			end++
		}
	}
	if end >= len(d.s) {
		return "", false, false
	}
	var b strings.Builder
	b.Grow(end - start)
	b.WriteString(d.s[start:j])
	for j < end {
		switch c := d.s[j]; {
		case c < ' ':
			return "", false, false
		case c == '\\':
			switch e := d.s[j+1]; e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r := hex4(d.s[j:])
				if r < 0 {
					return "", false, false
				}
				j += 6
				if utf16.IsSurrogate(r) {
					if pair := utf16.DecodeRune(r, hex4(d.s[j:])); pair != utf8.RuneError {
						r = pair
						j += 6
					} else {
						r = utf8.RuneError
					}
				}
				b.WriteRune(r)
				continue
			default:
				return "", false, false
			}
			j += 2
		case c >= utf8.RuneSelf:
			if _, n := utf8.DecodeRuneInString(d.s[j:]); n == 1 {
				b.WriteRune(utf8.RuneError)
				j++
				continue
			}
			fallthrough
		default:
			k := d.plain(j)
			b.WriteString(d.s[j:min(k, end)])
			j = k
		}
	}
	d.i = end + 1
	return b.String(), false, true
}

// plain returns the index of the first byte from j on that is a quote, a
// backslash, a control character or the start of invalid UTF-8.
func (d *payloadDecoder) plain(j int) int {
	for j < len(d.s) {
		c := d.s[j]
		if plainASCII[c] {
			j++
			continue
		}
		if c < utf8.RuneSelf {
			return j
		}
		r, n := utf8.DecodeRuneInString(d.s[j:])
		if r == utf8.RuneError && n == 1 {
			return j
		}
		j += n
	}
	return j
}

// hex4 returns the code unit of the \uXXXX escape s starts with, or -1.
func hex4(s string) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range []byte(s[2:6]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// bytes reads a base64 string into *v, as encoding/json decodes []byte.
func (d *payloadDecoder) bytes(v *[]byte) bool {
	if d.null() {
		return true
	}
	s, _, ok := d.quoted()
	if !ok {
		return false
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, []byte(s))
	if err != nil {
		return false
	}
	*v = b[:n]
	return true
}

// raw reads any value into *v as it is written, as json.RawMessage keeps it.
func (d *payloadDecoder) raw(v *json.RawMessage) bool {
	start := d.i
	if !d.skip(0) {
		return false
	}
	*v = json.RawMessage(d.s[start:d.i])
	return true
}

// int reads an integer into *v; encoding/json refuses fractions and
// exponents for integer fields.
func (d *payloadDecoder) int(v *int64) bool {
	if d.null() {
		return true
	}
	lit, ok := d.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		return false
	}
	*v = n
	return true
}

func (d *payloadDecoder) float(v *float64) bool {
	if d.null() {
		return true
	}
	lit, ok := d.number()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return false
	}
	*v = f
	return true
}

func (d *payloadDecoder) boolean(v *bool) bool {
	switch {
	case d.null():
	case strings.HasPrefix(d.s[d.i:], "true"):
		d.i += len("true")
		*v = true
	case strings.HasPrefix(d.s[d.i:], "false"):
		d.i += len("false")
		*v = false
	default:
		return false
	}
	return true
}

// number reads a number literal, checking it against JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *payloadDecoder) number() (string, bool) {
	s, start, j := d.s, d.i, d.i
	if j < len(s) && s[j] == '-' {
		j++
	}
	switch {
	case j < len(s) && s[j] == '0':
		j++
	case j < len(s) && '1' <= s[j] && s[j] <= '9':
		j = digits(s, j)
	default:
		return "", false
	}
	if j < len(s) && s[j] == '.' {
		if k := digits(s, j+1); k > j+1 {
			j = k
		} else {
			return "", false
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if k := digits(s, j); k > j {
			j = k
		} else {
			return "", false
		}
	}
	d.i = j
	return s[start:j], true
}

// digits returns the index of the first byte from j on that is not a digit.
func digits(s string, j int) int {
	for j < len(s) && '0' <= s[j] && s[j] <= '9' {
		j++
	}
	return j
}

// skip reads any value, checking its syntax, at nesting depth depth.
func (d *payloadDecoder) skip(depth int) bool {
	if d.i >= len(d.s) {
		return false
	}
	switch c := d.s[d.i]; c {
	case '{', '[':
		if depth >= maxSkipDepth {
			return false
		}
		d.i++
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		if d.space(); d.take(end) {
			return true
		}
		for {
			d.space()
			if c == '{' {
				if !d.skipString() {
					return false
				}
				d.space()
				if !d.take(':') {
					return false
				}
				d.space()
			}
			if !d.skip(depth + 1) {
				return false
			}
			d.space()
			if d.take(end) {
				return true
			}
			if !d.take(',') {
				return false
			}
		}
	case '"':
		return d.skipString()
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		_, ok := d.number()
		return ok
	}
}

// skipString reads a string, checking its escapes.
func (d *payloadDecoder) skipString() bool {
	if !d.take('"') {
		return false
	}
	for j := d.i; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			d.i = j + 1
			return true
		case c < ' ':
			return false
		case c == '\\':
			if j+1 >= len(d.s) {
				return false
			}
			switch d.s[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if hex4(d.s[j:]) < 0 {
					return false
				}
				j += 5
			default:
				return false
			}
		}
	}
	return false
}

func (d *payloadDecoder) literal(lit string) bool {
	if !strings.HasPrefix(d.s[d.i:], lit) {
		return false
	}
	d.i += len(lit)
	return true
}

// space skips JSON whitespace.
func (d *payloadDecoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// take reads c if it is next.
func (d *payloadDecoder) take(c byte) bool {
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}
