package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aerie-run/aerie/runner/tools/compress"
)

// Default capping limits, in bytes.
const (
	DefaultMaxBytes  = 32768
	DefaultHeadBytes = 12288
	DefaultTailBytes = 12288
	// DefaultRetention is how long Sweep keeps sidecar files.
	DefaultRetention = 7 * 24 * time.Hour
)

// Capper limits the size of tool results. An output longer than Max bytes,
// or than MaxLines lines, keeps its first Head and last Tail bytes, cut on
// UTF-8 boundaries, and with MaxLines set no more than MaxLines lines of
// them (the first half from the start, the rest from the end), with a
// marker between them saying how much was dropped. When Originals is set
// the full output is first kept there, byte-exact, and the marker says
// where.
//
// With Compress set, a large output (one the limits would cap; with
// capping off, one over DefaultMaxBytes) whose structure package compress
// knows — JSON, search results, code, a directory listing — is replaced by
// a view of that structure instead, once its original is kept: the view
// ends with the original's size and SHA-256 digest and the call that
// retrieves it, retrieve(handle=CALL_ID). The output of bash and of
// retrieve is never compressed, nor is an error's. An original that cannot
// be kept leaves the result uncompressed, capped as without Compress.
type Capper struct {
	// Max is the largest result in bytes kept whole; zero sets no byte
	// limit.
	Max int
	// MaxLines is the largest result in lines kept whole; zero, the
	// default, sets no line limit. Max and MaxLines both zero disable
	// capping, as the spec says.
	MaxLines int
	// Head and Tail are the bytes kept from the start and the end.
	Head, Tail int
	// Compress turns on the compression of large structured outputs; it
	// needs Originals.
	Compress bool
	// Originals keeps the full output of the session's capped and
	// compressed results; nil keeps none, and compresses none.
	Originals Originals
	// Logger receives the failures to keep an original, which are
	// warnings. Nil discards.
	Logger *slog.Logger
}

// NewCapper returns a Capper with the default limits that keeps no
// originals.
func NewCapper() *Capper {
	return &Capper{Max: DefaultMaxBytes, Head: DefaultHeadBytes, Tail: DefaultTailBytes}
}

// Compresses reports whether c compresses outputs, and so whether the
// retrieve tool is offered beside it.
func (c *Capper) Compresses() bool { return c != nil && c.Compress && c.Originals != nil }

// Cap returns r, the result of the call callID of the tool named tool,
// capped or compressed. A nil Capper returns r as is.
func (c *Capper) Cap(ctx context.Context, callID, tool string, r Result) Result {
	if c == nil || (tool == RetrieveName && c.Compresses()) {
		// retrieve pages the originals within the limits itself.
		return r
	}
	s := r.Content
	over := c.over(s)
	large := over || (c.Max == 0 && c.MaxLines == 0 && len(s) > DefaultMaxBytes)
	keep := c.Originals != nil
	if large && c.Compresses() && !r.IsError && tool != bashName {
		view, kept, err := c.compress(ctx, callID, s)
		if err == nil && kept {
			r.Content = view
			return r
		}
		if err != nil {
			// The spec: a failed write disables compression for this
			// result, which is capped as usual, without another try.
			c.logger().Warn("keep the original of a tool output; not compressing it",
				"tool_call", callID, "tool", tool, "error", err)
			keep = false
		}
	}
	if !over {
		return r
	}
	r.Content = c.truncate(ctx, callID, s, keep)
	return r
}

// over reports whether s is over the limits.
func (c *Capper) over(s string) bool {
	return (c.Max > 0 && len(s) > c.Max) || (c.MaxLines > 0 && lineCount(s) > c.MaxLines)
}

// bashName is the bash tool's name: its output is never compressed.
const bashName = "bash"

// markerReserve is room a compressed view leaves under Max for the lines
// that say how to retrieve the original.
const markerReserve = 256

// compress replaces s with a view of its structure once its original is
// kept. kept is false, and err nil, when s has no structure a view
// shortens.
func (c *Capper) compress(ctx context.Context, callID, s string) (string, bool, error) {
	limit := c.Max
	if limit == 0 {
		limit = DefaultMaxBytes
	}
	view, kind, ok := compress.Compress(s, max(limit-markerReserve, limit/2))
	if !ok {
		return "", false, nil
	}
	if _, err := c.Originals.Keep(ctx, callID, s); err != nil {
		return "", false, err
	}
	sum := sha256.Sum256([]byte(s))
	out := fmt.Sprintf(
		"%s\n[%s output compressed from %d to %d bytes; the original (sha256:%s) in full: retrieve(handle=%s)]",
		strings.TrimSuffix(view, "\n"), kind, len(s), len(view), hex.EncodeToString(sum[:]), callID)
	if c.over(out) {
		// A view can stay over a line limit, or over Max when even its
		// tightest level is long: capped, it keeps its end, which says how
		// to retrieve the original.
		out = c.cut(out, fmt.Sprintf("; the original in full: retrieve(handle=%s)", callID))
	}
	return out, true, nil
}

// truncate keeps the head and tail of s, the full output kept first when
// keep says so.
func (c *Capper) truncate(ctx context.Context, callID, s string, keep bool) string {
	where := ""
	if keep {
		loc, err := c.Originals.Keep(ctx, callID, s)
		switch {
		case err != nil:
			c.logger().Warn("keep the full tool output", "tool_call", callID, "error", err)
		case c.Compresses():
			where = fmt.Sprintf("; full output: retrieve(handle=%s)", callID)
		default:
			where = "; full output in " + loc
		}
	}
	return c.cut(s, where)
}

// cut keeps the head and tail of s within the limits, with a marker
// between them saying how much was dropped, and where (after "; ").
func (c *Capper) cut(s, where string) string {
	headEnd := cutBack(s, min(c.Head, len(s)))
	tailStart := cutForward(s, max(0, len(s)-c.Tail))
	if c.MaxLines > 0 {
		headLines := (c.MaxLines + 1) / 2
		headEnd = min(headEnd, firstLinesEnd(s, headLines))
		tailStart = max(tailStart, lastLinesStart(s, c.MaxLines-headLines))
	}
	head, tail := s[:headEnd], s[max(headEnd, tailStart):]
	dropped := len(s) - len(head) - len(tail)
	return fmt.Sprintf("%s\n\n[... %d bytes dropped%s ...]\n\n%s", head, dropped, where, tail)
}

// lineCount counts the lines of s; a last line without a newline counts.
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// firstLinesEnd is where the first n lines of s end, their newline
// included.
func firstLinesEnd(s string, n int) int {
	end := 0
	for ; n > 0; n-- {
		i := strings.IndexByte(s[end:], '\n')
		if i < 0 {
			return len(s)
		}
		end += i + 1
	}
	return end
}

// lastLinesStart is where the last n lines of s start.
func lastLinesStart(s string, n int) int {
	if n == 0 {
		return len(s)
	}
	// The newline that ends s ends its last line; it starts none.
	start := len(strings.TrimSuffix(s, "\n"))
	for ; n > 0; n-- {
		i := strings.LastIndexByte(s[:start], '\n')
		if i < 0 {
			return 0
		}
		start = i
	}
	return start + 1
}

func (c *Capper) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// cutBack moves i back to the start of the rune it falls in.
func cutBack(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// cutForward moves i forward to the start of the next rune.
func cutForward(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// Sweep removes sidecar files (*.txt) in dir older than maxAge
// (DefaultRetention when zero) and returns how many it removed. A missing
// dir is not an error.
func Sweep(dir string, maxAge time.Duration) (int, error) {
	if maxAge <= 0 {
		maxAge = DefaultRetention
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sweep %s: %w", dir, err)
	}
	cutoff := time.Now().Add(-maxAge)
	var n int
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || filepath.Ext(e.Name()) != ".txt" {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("sweep %s: %w", dir, err)
	}
	return n, nil
}
