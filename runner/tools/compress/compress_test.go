package compress

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// bigJSON is an API answer: an object with a long array of records.
func bigJSON(n int) string {
	type item struct {
		ID     int      `json:"id"`
		Name   string   `json:"name"`
		Tags   []string `json:"tags"`
		Detail string   `json:"detail"`
	}
	doc := struct {
		Total int    `json:"total"`
		Items []item `json:"items"`
	}{Total: n}
	for i := range n {
		doc.Items = append(doc.Items, item{
			ID: i, Name: fmt.Sprintf("item-%d", i), Tags: []string{"a", "b", "c"},
			Detail: strings.Repeat("lorem ipsum ", 40),
		})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

func searchOutputOf(files, perFile int) string {
	var b strings.Builder
	for f := range files {
		for l := range perFile {
			fmt.Fprintf(&b, "pkg/dir%d/file%d.go:%d: \tif err := doSomething(ctx, value%d); err != nil {\n", f%7, f, 10*l+3, l)
		}
	}
	return b.String()
}

func listingOf(dirs, perDir int) string {
	var b strings.Builder
	for d := range dirs {
		for f := range perDir {
			fmt.Fprintf(&b, "src/module%d/file_%d.go\n", d, f)
		}
	}
	return b.String()
}

func goSource(funcs int) string {
	var b strings.Builder
	b.WriteString("package demo\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n\n")
	for i := range funcs {
		fmt.Fprintf(&b, "// F%d does thing %d.\nfunc F%d(s string) (string, error) {\n", i, i, i)
		b.WriteString("\tif s == \"\" {\n\t\treturn \"\", fmt.Errorf(\"empty\")\n\t}\n")
		b.WriteString("\tfor i := 0; i < 10; i++ {\n\t\ts = strings.Repeat(s, 2)\n\t\tif len(s) > 100 {\n\t\t\tbreak\n\t\t}\n\t}\n")
		b.WriteString("\treturn s, nil\n}\n\n")
	}
	return b.String()
}

// numberedLines prints s as read_file does.
func numberedLines(s string) string {
	var b strings.Builder
	for i, l := range lines(s) {
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, l)
	}
	return b.String()
}

func prose(paragraphs int) string {
	var b strings.Builder
	for i := range paragraphs {
		fmt.Fprintf(&b, "Paragraph %d. The quick brown fox jumps over the lazy dog while the build runs\n"+
			"and nobody is watching the output scroll by on the screen of the machine\n"+
			"that was left on overnight in the office near the window.\n\n", i)
	}
	return b.String()
}

func TestCompressKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		kind  Kind
		limit int
		// want are strings the view must hold; absent, strings it must not.
		want, absent []string
	}{
		{
			name: "json", in: bigJSON(500), kind: KindJSON, limit: 8192,
			want:   []string{`"total": 500`, `"items": [`, `"id": 0`, `more items"`, `more bytes)`},
			absent: []string{`"item-499"`},
		},
		{
			name: "json read with line numbers", in: numberedLines(bigJSON(300)), kind: KindCode, limit: 8192,
			// Numbered, a document is no longer JSON; its nesting is code's
			// indentation.
			want: []string{"     1\t{", "lines ("},
		},
		{
			name: "search", in: searchOutputOf(400, 12), kind: KindSearch, limit: 8192,
			want:   []string{"4800 matches in 400 files", "pkg/dir0/file0.go: 12 matches", "  3: ", "more files with"},
			absent: []string{"pkg/dir6/file398.go: 12 matches"},
		},
		{
			name: "search with the grep tool's note", in: searchOutputOf(40, 30) + "[stopped after 1200 matches; narrow the pattern, path or glob, or raise max_results]\n",
			kind: KindSearch, limit: 4096,
			want: []string{"1200 matches in 40 files", "more at lines", "[stopped after 1200 matches"},
		},
		{
			name: "listing of paths", in: listingOf(30, 200), kind: KindListing, limit: 8192,
			want:   []string{"6000 entries (6000 files, 0 directories) in 30 directories", "src/module0/: 200 entries", "file_0.go", ".go"},
			absent: []string{"file_199.go"},
		},
		{
			name: "code", in: goSource(300), kind: KindCode, limit: 32768,
			want:   []string{"package demo", "func F0(s string) (string, error) {", "func F299(", "lines ("},
			absent: []string{"strings.Repeat(s, 2)"},
		},
		{
			name: "numbered code", in: numberedLines(goSource(300)), kind: KindCode, limit: 40000,
			want: []string{"     1\tpackage demo", "\tfunc F0(s string) (string, error) {", "\t\t… 10 lines (10–19)\n    20\t}"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			view, kind, ok := Compress(tt.in, tt.limit)
			if !ok || kind != tt.kind {
				t.Fatalf("Compress = kind %q, ok %v; want %q, true", kind, ok, tt.kind)
			}
			if len(view) > tt.limit {
				t.Errorf("view is %d bytes, over the limit %d", len(view), tt.limit)
			}
			for _, w := range tt.want {
				if !strings.Contains(view, w) {
					t.Errorf("view lacks %q:\n%s", w, head(view))
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(view, a) {
					t.Errorf("view holds %q:\n%s", a, head(view))
				}
			}
		})
	}
}

// TestCompressListingTree checks that a tree's indentation makes the
// paths of the entries below a directory.
func TestCompressListingTree(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("src/\n")
	for d := range 5 {
		fmt.Fprintf(&b, "  pkg%d/\n", d)
		for f := range 100 {
			fmt.Fprintf(&b, "    f%d.go (%d bytes)\n", f, 100+f)
		}
	}
	b.WriteString("  README.md (12 bytes)\n")
	view, kind, ok := Compress(b.String(), 2048)
	if !ok || kind != KindListing {
		t.Fatalf("Compress = %q, %v", kind, ok)
	}
	for _, w := range []string{"src/pkg0/: 100 entries", "src/: 6 entries", "f0.go (100 bytes)", "README.md (12 bytes)"} {
		if !strings.Contains(view, w) {
			t.Errorf("view lacks %q:\n%s", w, view)
		}
	}
}

// TestCompressLeavesAlone checks what is never compressed: prose, small
// or unstructured text, and structures no view makes shorter.
func TestCompressLeavesAlone(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"prose":           prose(200),
		"empty":           "",
		"scalar json":     `"` + strings.Repeat("x", 10000) + `"`,
		"few matches":     searchOutputOf(1, 3),
		"flat code":       strings.Repeat("x = 1;\n", 500),
		"binary":          strings.Repeat("\x00\xff\xfe", 3000),
		"markdown prose":  strings.Repeat("# Title\n\nSome words about the project, and more words.\n- a point made in words\n", 100),
		"small json list": `[1, 2, 3]`,
	} {
		if view, kind, ok := Compress(in, 100); ok {
			t.Errorf("%s: compressed as %s:\n%s", name, kind, head(view))
		}
	}
}

// TestCompressBrokenJSON checks that what only resembles JSON is not
// taken for it: cut short, or two documents, it is shown as the indented
// text it is.
func TestCompressBrokenJSON(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"cut short":     bigJSON(50)[:5000],
		"two documents": bigJSON(2) + bigJSON(2),
	} {
		if _, kind, _ := Compress(in, 100); kind == KindJSON {
			t.Errorf("%s: compressed as JSON", name)
		}
	}
}

// TestCompressShrinks checks that a view is never longer than the output.
func TestCompressShrinks(t *testing.T) {
	t.Parallel()
	for _, in := range []string{bigJSON(3), searchOutputOf(2, 5), listingOf(1, 9), goSource(3)} {
		if view, _, ok := Compress(in, 1<<20); ok && len(view) >= len(in) {
			t.Errorf("view of %d bytes for %d bytes", len(view), len(in))
		}
	}
}

func FuzzCompress(f *testing.F) {
	for _, s := range []string{
		bigJSON(3), searchOutputOf(3, 4), listingOf(2, 6), goSource(4), numberedLines(goSource(3)), prose(2),
		`{"a": [1, {"b": "\u0000\ud800"}], "c": null}`, "a/\n  b/\n    c\n" + strings.Repeat("  d (1 bytes)\n", 9),
		strings.Repeat("[", 20000),
	} {
		f.Add(s, 512)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		view, kind, ok := Compress(s, limit)
		if !ok {
			if view != "" {
				t.Fatalf("not compressed, yet a view of %d bytes", len(view))
			}
			return
		}
		if len(view) >= len(s) {
			t.Fatalf("%s view of %d bytes for %d bytes", kind, len(view), len(s))
		}
		if utf8.ValidString(s) && !utf8.ValidString(view) {
			t.Fatalf("%s view of valid UTF-8 is not valid UTF-8", kind)
		}
	})
}

func BenchmarkCompress(b *testing.B) {
	for _, bm := range []struct {
		name, in string
	}{
		{"json", bigJSON(2000)},
		{"search", searchOutputOf(2000, 5)},
		{"listing", listingOf(100, 200)},
		{"code", numberedLines(goSource(2000))},
		{"prose", prose(3000)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(bm.in)))
			b.ReportAllocs()
			for b.Loop() {
				Compress(bm.in, 32768)
			}
		})
	}
}

func head(s string) string {
	if len(s) > 1500 {
		return s[:1500] + "\n[...]"
	}
	return s
}
