package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func bigDocument() string {
	var items []map[string]any
	for i := range 400 {
		items = append(items, map[string]any{"id": i, "name": fmt.Sprintf("item-%d", i), "note": strings.Repeat("n", 50)})
	}
	b, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func compressingCapper(dir string) *Capper {
	return &Capper{Max: 4096, Head: 1024, Tail: 1024, Compress: true, Originals: Sidecars{Dir: dir, Session: "s1"}}
}

// TestCapperCompresses checks a compressed result: a view with the
// original's digest and the retrieve marker, the original kept byte-exact
// before, and retrieve paging it back whole.
func TestCapperCompresses(t *testing.T) {
	t.Parallel()
	c := compressingCapper(t.TempDir())
	doc := bigDocument()
	got := c.Cap(t.Context(), "c1", "read_file", Result{Content: doc})
	sum := sha256.Sum256([]byte(doc))
	for _, w := range []string{`"items": [`, "more items", "sha256:" + hex.EncodeToString(sum[:]), "retrieve(handle=c1)"} {
		if !strings.Contains(got.Content, w) {
			t.Errorf("result lacks %q:\n%s", w, got.Content)
		}
	}
	if len(got.Content) > c.Max {
		t.Errorf("result is %d bytes, over %d", len(got.Content), c.Max)
	}
	kept, err := c.Originals.Original(t.Context(), "c1")
	if err != nil || kept != doc {
		t.Fatalf("kept original: %d bytes, %v; want the %d bytes", len(kept), err, len(doc))
	}
	// retrieve pages through it within the limits.
	r := NewRetrieve(c)
	var whole strings.Builder
	offset := 0
	for range 100 {
		res := r.Run(t.Context(), json.RawMessage(fmt.Sprintf(`{"handle": "c1", "offset": %d}`, offset)))
		if res.IsError || len(res.Content) > c.Max {
			t.Fatalf("page at %d: %d bytes, error %v: %.200s", offset, len(res.Content), res.IsError, res.Content)
		}
		page, note, _ := strings.Cut(res.Content, "\n[retrieve: bytes ")
		whole.WriteString(page)
		if strings.HasSuffix(note, "the end]") {
			break
		}
		if _, err := fmt.Sscanf(note[strings.LastIndex(note, "offset=")+len("offset="):], "%d", &offset); err != nil {
			t.Fatalf("no next offset in %q", note)
		}
	}
	if whole.String() != doc {
		t.Errorf("the pages make %d bytes, not the original's %d", whole.Len(), len(doc))
	}
	if res := r.Run(t.Context(), json.RawMessage(`{"handle": "nosuch"}`)); !res.IsError || !strings.Contains(res.Content, "no original") {
		t.Errorf("unknown handle: %+v", res)
	}
	// The output of retrieve is neither compressed nor capped again.
	small := c.Cap(t.Context(), "c2", RetrieveName, Result{Content: doc})
	if small.Content != doc {
		t.Error("retrieve's result was shortened")
	}
}

// TestCapperCompressesOnlyStructure checks what is never compressed —
// bash, errors, prose — and that it is capped as usual, its full output
// kept and retrievable.
func TestCapperCompressesOnlyStructure(t *testing.T) {
	t.Parallel()
	doc := bigDocument()
	prose := strings.Repeat("The build ran for a long time and printed words that are not structured at all. ", 100)
	for _, tt := range []struct {
		name, tool, in string
		isError        bool
	}{
		{"bash", "bash", doc, false},
		{"error", "read_file", doc, true},
		{"prose", "read_file", prose, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := compressingCapper(t.TempDir())
			got := c.Cap(t.Context(), "c1", tt.tool, Result{Content: tt.in, IsError: tt.isError})
			if strings.Contains(got.Content, "compressed from") || !strings.Contains(got.Content, "bytes dropped; full output: retrieve(handle=c1)") {
				t.Errorf("not capped with the retrieve marker:\n%.300s", got.Content)
			}
			if kept, err := c.Originals.Original(t.Context(), "c1"); err != nil || kept != tt.in {
				t.Errorf("kept %d bytes, %v", len(kept), err)
			}
		})
	}
}

// TestCapperCompressKeepFails checks the spec's fallback: an original
// that cannot be written leaves the result uncompressed, capped head and
// tail, and names no place to find it.
func TestCapperCompressKeepFails(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := compressingCapper(filepath.Join(file, "raw"))
	doc := bigDocument()
	got := c.Cap(t.Context(), "c1", "read_file", Result{Content: doc})
	want := fmt.Sprintf("%s\n\n[... %d bytes dropped ...]\n\n%s", doc[:1024], len(doc)-2048, doc[len(doc)-1024:])
	if got.Content != want {
		t.Errorf("result is not the head and tail of the output:\n%.300s", got.Content)
	}
}

// TestCapperCompressOff checks that without Compress, or without
// originals, nothing is compressed and retrieve is not offered.
func TestCapperCompressOff(t *testing.T) {
	t.Parallel()
	for _, c := range []*Capper{
		{Max: 4096, Head: 1024, Tail: 1024, Originals: Sidecars{Dir: t.TempDir()}},
		{Max: 4096, Head: 1024, Tail: 1024, Compress: true},
		nil,
	} {
		if c.Compresses() {
			t.Errorf("%+v compresses", c)
		}
		if got := c.Cap(t.Context(), "c1", "read_file", Result{Content: bigDocument()}); strings.Contains(got.Content, "compressed from") {
			t.Errorf("%+v compressed", c)
		}
	}
}
