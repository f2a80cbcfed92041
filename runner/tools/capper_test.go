package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCapperBoundaries(t *testing.T) {
	t.Parallel()
	c := NewCapper()
	ascii := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name       string
		capper     *Capper
		in         string
		wantCapped bool
		wantHead   string // prefix before the marker
		wantTail   string // suffix after the marker
		dropped    string
	}{
		{name: "empty", capper: c, in: ""},
		{name: "exactly at cap", capper: c, in: ascii(DefaultMaxBytes)},
		{name: "cap+1", capper: c, in: ascii(DefaultMaxBytes + 1), wantCapped: true,
			wantHead: ascii(DefaultHeadBytes), wantTail: ascii(DefaultTailBytes), dropped: "[... 8193 bytes dropped ...]"},
		{name: "disabled", capper: &Capper{}, in: ascii(DefaultMaxBytes * 3)},
		// max_bytes = 0 and max_lines = 0 disable capping, whatever the
		// head and tail sizes.
		{name: "no byte and no line limit", capper: &Capper{Head: DefaultHeadBytes, Tail: DefaultTailBytes}, in: ascii(DefaultMaxBytes * 3)},
		{name: "lines at the limit", capper: &Capper{MaxLines: 3, Head: 100, Tail: 100}, in: "1\n2\n3\n"},
		{name: "lines at the limit, no last newline", capper: &Capper{MaxLines: 3, Head: 100, Tail: 100}, in: "1\n2\n3"},
		{name: "one line over", capper: &Capper{MaxLines: 3, Head: 100, Tail: 100}, in: "1\n2\n3\n4\n", wantCapped: true,
			wantHead: "1\n2\n", wantTail: "4\n", dropped: "[... 2 bytes dropped ...]"},
		{name: "lines, no last newline", capper: &Capper{MaxLines: 4, Head: 100, Tail: 100}, in: "1\n2\n3\n4\n5", wantCapped: true,
			wantHead: "1\n2\n", wantTail: "4\n5", dropped: "[... 2 bytes dropped ...]"},
		{name: "one line kept", capper: &Capper{MaxLines: 1, Head: 100, Tail: 100}, in: "1\n2\n", wantCapped: true,
			wantHead: "1\n", wantTail: "", dropped: "[... 2 bytes dropped ...]"},
		// The line limit triggers without a byte limit, and the head and
		// tail bytes still bound what is kept.
		{name: "long lines over the line limit", capper: &Capper{MaxLines: 2, Head: 3, Tail: 3}, in: "aaaaa\nb\nccccc\n", wantCapped: true,
			wantHead: "aaa", wantTail: "cc\n", dropped: "[... 8 bytes dropped ...]"},
		// The byte limit triggers, and the line limit bounds the lines kept.
		{name: "bytes over, lines bounded", capper: &Capper{Max: 10, MaxLines: 20, Head: 8, Tail: 8}, in: strings.Repeat("x\n", 30), wantCapped: true,
			wantHead: "x\nx\nx\nx\n", wantTail: "x\nx\nx\nx\n", dropped: "[... 44 bytes dropped ...]"},
		{name: "lines bound a byte-capped head", capper: &Capper{Max: 10, MaxLines: 2, Head: 8, Tail: 8}, in: strings.Repeat("x\n", 30), wantCapped: true,
			wantHead: "x\n", wantTail: "x\n", dropped: "[... 56 bytes dropped ...]"},
		{name: "nil capper", capper: nil, in: ascii(DefaultMaxBytes * 3)},
		// "é" is two bytes: head 5 would cut the third é in half, so the
		// head keeps two; tail 5 would start inside one, so it keeps two.
		{name: "multibyte at the cut", capper: &Capper{Max: 8, Head: 5, Tail: 5}, in: strings.Repeat("é", 10), wantCapped: true,
			wantHead: "éé", wantTail: "éé", dropped: "[... 12 bytes dropped ...]"},
		// A four-byte rune straddling both cuts.
		{name: "emoji", capper: &Capper{Max: 6, Head: 3, Tail: 3}, in: "ab😀cd😀ef", wantCapped: true,
			wantHead: "ab", wantTail: "ef", dropped: "[... 10 bytes dropped ...]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.capper.Cap(t.Context(), "call", "read_file", Result{Content: tt.in, IsError: true})
			if !got.IsError {
				t.Error("IsError lost")
			}
			if !tt.wantCapped {
				if got.Content != tt.in {
					t.Errorf("content changed: %d bytes → %d", len(tt.in), len(got.Content))
				}
				return
			}
			if !utf8.ValidString(got.Content) {
				t.Error("capped content is not valid UTF-8")
			}
			head, rest, ok := strings.Cut(got.Content, "\n\n[...")
			if !ok {
				t.Fatalf("no marker in %q", got.Content)
			}
			i := strings.Index(rest, "...]\n\n")
			tail := rest[i+len("...]\n\n"):]
			if head != tt.wantHead || tail != tt.wantTail {
				t.Errorf("head, tail = %q, %q; want %q, %q", head, tail, tt.wantHead, tt.wantTail)
			}
			if !strings.Contains(got.Content, tt.dropped) {
				t.Errorf("marker %q not in %q", tt.dropped, "[..."+rest[:i+4])
			}
		})
	}
}

func TestCapperSpill(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "raw")
	c := &Capper{Max: 10, Head: 4, Tail: 4, Originals: Sidecars{Dir: dir}}
	in := "héllo, wörld\x00\xff binary and all"
	got := c.Cap(t.Context(), "toolu_01/../x", "read_file", Result{Content: in})
	path := filepath.Join(dir, "toolu_01____x.txt")
	if !strings.Contains(got.Content, "full output in "+path) {
		t.Errorf("marker does not name %s: %q", path, got.Content)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != in {
		t.Errorf("sidecar = %q, want %q", data, in)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("sidecar mode = %v, want 0600", perm)
	}
	// Below the cap nothing is spilled.
	c.Cap(t.Context(), "small", "read_file", Result{Content: "short"})
	if _, err := os.Stat(filepath.Join(dir, "small.txt")); err == nil {
		t.Error("small output was spilled")
	}
}

func TestCapperSpillFailureStillCaps(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Capper{Max: 10, Head: 4, Tail: 4, Originals: Sidecars{Dir: filepath.Join(file, "raw")}}
	got := c.Cap(t.Context(), "c1", "read_file", Result{Content: strings.Repeat("x", 50)})
	if want := "xxxx\n\n[... 42 bytes dropped ...]\n\nxxxx"; got.Content != want {
		t.Errorf("content = %q, want %q", got.Content, want)
	}
}

func TestSweep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := time.Now().Add(-8 * 24 * time.Hour)
	files := map[string]time.Time{
		"old.txt":    old,
		"new.txt":    time.Now(),
		"old.keep":   old, // not a sidecar
		"recent.txt": time.Now().Add(-6 * 24 * time.Hour),
	}
	for name, mtime := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Sweep(dir, 0)
	if err != nil || n != 1 {
		t.Errorf("Sweep = %d, %v; want 1, nil", n, err)
	}
	for name := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if gone := err != nil; gone != (name == "old.txt") {
			t.Errorf("%s: gone = %v", name, gone)
		}
	}
	if n, err := Sweep(filepath.Join(dir, "missing"), time.Hour); err != nil || n != 0 {
		t.Errorf("Sweep(missing) = %d, %v", n, err)
	}
}
