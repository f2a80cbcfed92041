package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aerie-run/aerie/runner/atomicfile"
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
// marker between them saying how much was dropped. When Dir is set the full
// output is first written, byte-exact, to Dir/<call id>.txt, and the marker
// names that file.
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
	// Dir is the sidecar directory for full outputs; empty: no spilling.
	Dir string
	// Logger receives spill failures, which are warnings. Nil discards.
	Logger *slog.Logger
}

// NewCapper returns a Capper with the default limits spilling to dir
// (empty: no spilling).
func NewCapper(dir string) *Capper {
	return &Capper{Max: DefaultMaxBytes, Head: DefaultHeadBytes, Tail: DefaultTailBytes, Dir: dir}
}

// Cap returns r with its content capped. A nil Capper returns r as is.
func (c *Capper) Cap(callID string, r Result) Result {
	if c == nil {
		return r
	}
	s := r.Content
	overBytes := c.Max > 0 && len(s) > c.Max
	overLines := c.MaxLines > 0 && lineCount(s) > c.MaxLines
	if !overBytes && !overLines {
		return r
	}
	headEnd := cutBack(s, min(c.Head, len(s)))
	tailStart := cutForward(s, max(0, len(s)-c.Tail))
	if c.MaxLines > 0 {
		headLines := (c.MaxLines + 1) / 2
		headEnd = min(headEnd, firstLinesEnd(s, headLines))
		tailStart = max(tailStart, lastLinesStart(s, c.MaxLines-headLines))
	}
	head, tail := s[:headEnd], s[max(headEnd, tailStart):]
	dropped := len(s) - len(head) - len(tail)
	where := ""
	if c.Dir != "" {
		path, err := c.spill(callID, s)
		if err != nil {
			c.logger().Warn("spill tool output", "tool_call", callID, "error", err)
		} else {
			where = "; full output in " + path
		}
	}
	r.Content = fmt.Sprintf("%s\n\n[... %d bytes dropped%s ...]\n\n%s", head, dropped, where, tail)
	return r
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

// spill writes s to the sidecar file of callID, atomically, mode 0600.
func (c *Capper) spill(callID, s string) (string, error) {
	name := sidecarName(callID)
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return "", fmt.Errorf("create sidecar directory: %w", err)
	}
	path := filepath.Join(c.Dir, name)
	if err := atomicfile.Write(path, []byte(s), 0o600); err != nil {
		return "", fmt.Errorf("write sidecar file: %w", err)
	}
	return path, nil
}

// sidecarName turns a call id, which comes from the model provider, into
// a safe file name.
func sidecarName(callID string) string {
	var b strings.Builder
	for _, r := range callID {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return fmt.Sprintf("call-%d.txt", time.Now().UnixNano())
	}
	return b.String() + ".txt"
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
