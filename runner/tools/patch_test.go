package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
)

func TestParsePatch(t *testing.T) {
	t.Parallel()
	patch := `*** Begin Patch
*** Add File: new.txt
+hello
+
*** Delete File: old.txt
*** Update File: a.go
*** Move to: b.go
@@ func f() {
 ctx
-old
+new
*** End of File
*** Update File: c.go
 first hunk without @@
-x
+y
@@
-z
*** End Patch
`
	got, err := ParsePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	want := &Patch{Files: []FilePatch{
		{Op: PatchAdd, Path: "new.txt", Content: "hello\n\n"},
		{Op: PatchDelete, Path: "old.txt"},
		{Op: PatchUpdate, Path: "a.go", MoveTo: "b.go", Hunks: []Hunk{
			{Context: "func f() {", Old: []string{"ctx", "old"}, New: []string{"ctx", "new"}, EOF: true, Line: 8},
		}},
		{Op: PatchUpdate, Path: "c.go", Hunks: []Hunk{
			{Old: []string{"first hunk without @@", "x"}, New: []string{"first hunk without @@", "y"}, Line: 14},
			{Old: []string{"z"}, Line: 17},
		}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParsePatch (-want +got):\n%s", diff)
	}

	bad := []struct{ name, patch, want string }{
		{"no begin", "*** Update File: a\n-x\n*** End Patch", "must start with"},
		{"no end", "*** Begin Patch\n*** Delete File: a", "must end with"},
		{"empty", "*** Begin Patch\n*** End Patch", "changes no files"},
		{"bad header", "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch", "line 2: expected"},
		{"add line without +", "*** Begin Patch\n*** Add File: a\nhello\n*** End Patch", "line 3: in added file a"},
		{"bad hunk line", "*** Begin Patch\n*** Update File: a\n@@\n?x\n*** End Patch", "line 4: in a, a hunk line must start"},
		{"update without hunks", "*** Begin Patch\n*** Update File: a\n*** End Patch", "has no hunks"},
		{"empty hunk", "*** Begin Patch\n*** Update File: a\n@@\n@@\n-x\n*** End Patch", "empty hunk"},
		{"duplicate file", "*** Begin Patch\n*** Delete File: a\n*** Delete File: a\n*** End Patch", "more than once"},
		{"missing path", "*** Begin Patch\n*** Delete File: \n*** End Patch", "missing file path"},
		{"eof outside hunk", "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch", "outside a hunk"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePatch(tt.patch)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParsePatch error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestApplyHunks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		hunks    []Hunk
		want     string
		wantErr  string
	}{
		{name: "replace", in: "a\nb\nc\n", hunks: []Hunk{{Old: []string{"a", "b"}, New: []string{"a", "B"}}}, want: "a\nB\nc\n"},
		{name: "context locates", in: "x\nf\nx\ng\nx\n", hunks: []Hunk{{Context: "g", Old: []string{"x"}, New: []string{"y"}}}, want: "x\nf\nx\ng\ny\n"},
		{name: "eof anchors", in: "x\ny\nx\n", hunks: []Hunk{{Old: []string{"x"}, New: []string{"z"}, EOF: true}}, want: "x\ny\nz\n"},
		{name: "pure insertion appends", in: "a\n", hunks: []Hunk{{New: []string{"b"}}}, want: "a\nb\n"},
		{name: "insertion after context", in: "a\nc\n", hunks: []Hunk{{Context: "a", New: []string{"b"}}}, want: "a\nb\nc\n"},
		{name: "trailing whitespace tolerated", in: "a  \nb\n", hunks: []Hunk{{Old: []string{"a", "b"}, New: []string{"c"}}}, want: "c\n"},
		{name: "indentation tolerated", in: "\tif x {\n", hunks: []Hunk{{Old: []string{"    if x {"}, New: []string{"\tif y {"}}}, want: "\tif y {\n"},
		{name: "two hunks in order", in: "1\n2\n3\n4\n", hunks: []Hunk{{Old: []string{"1"}, New: []string{"one"}}, {Old: []string{"4"}, New: []string{"four"}}}, want: "one\n2\n3\nfour\n"},
		{name: "delete all", in: "a\n", hunks: []Hunk{{Old: []string{"a"}}}, want: ""},
		{name: "no newline at end gets one", in: "a", hunks: []Hunk{{Old: []string{"a"}, New: []string{"b"}}}, want: "b\n"},
		{name: "not found", in: "a\n", hunks: []Hunk{{Old: []string{"a"}, New: []string{"b"}}, {Old: []string{"zzz"}, Line: 9}}, wantErr: "hunk 2 (patch line 9): these lines were not found"},
		{name: "out of order", in: "1\n2\n", hunks: []Hunk{{Old: []string{"2"}}, {Old: []string{"1"}}}, wantErr: "hunk 2"},
		{name: "context not found", in: "a\n", hunks: []Hunk{{Context: "func g()", Old: []string{"a"}}}, wantErr: `context line "func g()" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := applyHunks(tt.in, tt.hunks)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("applyHunks = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestApplyPatch(t *testing.T) {
	t.Parallel()
	initial := map[string]string{
		"a.txt":       "one\ntwo\nthree\n",
		"src/main.go": "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
		"gone.txt":    "bye\n",
		"move.txt":    "moving\n",
	}
	tests := []struct {
		name     string
		patch    string
		wantErr  bool
		contains []string
		want     map[string]string // files after; "" value means absent
	}{
		{
			name: "all operations",
			patch: `*** Begin Patch
*** Add File: new/dir/n.txt
+fresh
*** Delete File: gone.txt
*** Update File: src/main.go
@@ func main() {
-	println("hello")
+	println("bye")
*** Update File: move.txt
*** Move to: moved/here.txt
@@
-moving
+moved
*** End Patch`,
			contains: []string{"A new/dir/n.txt", "D gone.txt", "M src/main.go", "R move.txt -> moved/here.txt"},
			want: map[string]string{
				"new/dir/n.txt": "fresh\n", "gone.txt": "", "move.txt": "", "moved/here.txt": "moved\n",
				"src/main.go": "package main\n\nfunc main() {\n\tprintln(\"bye\")\n}\n",
			},
		},
		{
			name: "second file fails, first untouched",
			patch: `*** Begin Patch
*** Update File: a.txt
-two
+TWO
*** Update File: src/main.go
@@
-	println("nope")
+	println("x")
*** End Patch`,
			wantErr:  true,
			contains: []string{"update src/main.go: hunk 1 (patch line 6)", "println(\"nope\")", "no file was changed"},
			want:     initial,
		},
		{
			name:     "delete missing",
			patch:    "*** Begin Patch\n*** Add File: b.txt\n+b\n*** Delete File: nope.txt\n*** End Patch",
			wantErr:  true,
			contains: []string{"delete nope.txt: no such file"},
			want:     map[string]string{"b.txt": ""},
		},
		{
			name:     "add existing",
			patch:    "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch",
			wantErr:  true,
			contains: []string{"add a.txt: the file already exists"},
			want:     initial,
		},
		{
			name:     "move onto existing",
			patch:    "*** Begin Patch\n*** Update File: move.txt\n*** Move to: a.txt\n*** End Patch",
			wantErr:  true,
			contains: []string{"destination already exists"},
			want:     initial,
		},
		{
			name:     "escape by dotdot",
			patch:    "*** Begin Patch\n*** Add File: ../evil.txt\n+x\n*** End Patch",
			wantErr:  true,
			contains: []string{"outside the workspace"},
		},
		{
			name:     "escape by symlink",
			patch:    "*** Begin Patch\n*** Delete File: escape.txt\n*** End Patch",
			wantErr:  true,
			contains: []string{"outside the workspace"},
		},
		{
			name:     "escape by symlinked dir",
			patch:    "*** Begin Patch\n*** Add File: escapedir/evil.txt\n+x\n*** End Patch",
			wantErr:  true,
			contains: []string{"outside the workspace"},
		},
		{
			name:     "invalid",
			patch:    "*** Update File: a.txt",
			wantErr:  true,
			contains: []string{"invalid patch: line 1"},
		},
		{
			name:     "missing patch",
			patch:    "",
			wantErr:  true,
			contains: []string{`missing required argument "patch"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, dir := newWorkspace(t)
			testenv.WriteTree(t, dir, initial)
			outside := t.TempDir()
			testenv.WriteTree(t, outside, map[string]string{"secret.txt": "secret\n"})
			if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "escape.txt")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "escapedir")); err != nil {
				t.Fatal(err)
			}
			got := NewApplyPatch(l, l).Run(context.Background(), args(t, map[string]string{"patch": tt.patch}))
			check(t, got, tt.wantErr, tt.contains...)
			for name, want := range tt.want {
				data, err := os.ReadFile(filepath.Join(dir, name))
				if want == "" {
					if err == nil {
						t.Errorf("%s exists: %q", name, data)
					}
					continue
				}
				if string(data) != want {
					t.Errorf("%s = %q, %v; want %q", name, data, err, want)
				}
			}
			if secret, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(secret) != "secret\n" {
				t.Errorf("the file outside the workspace changed: %q, %v", secret, err)
			}
			if _, err := os.Stat(filepath.Join(outside, "evil.txt")); err == nil {
				t.Error("a file was written outside the workspace")
			}
		})
	}
}

func FuzzParsePatch(f *testing.F) {
	f.Add("*** Begin Patch\n*** Add File: a\n+x\n*** End Patch")
	f.Add("*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@ ctx\n a\n-b\n+c\n*** End of File\n*** End Patch\n")
	f.Add("*** Begin Patch\n*** Delete File: a\n*** Update File: c\n x\n\n-y\n@@\n+z\n*** End Patch")
	f.Add("*** Begin Patch\r\n*** Update File: a\r\n@@\r\n-\r\n*** End Patch")
	f.Fuzz(func(t *testing.T, text string) {
		p, err := ParsePatch(text)
		if err != nil {
			return
		}
		if len(p.Files) == 0 {
			t.Fatal("a parsed patch changes no files")
		}
		for _, fp := range p.Files {
			if fp.Path == "" {
				t.Fatal("empty path")
			}
			for _, h := range fp.Hunks {
				if len(h.Old) == 0 && len(h.New) == 0 {
					t.Fatal("empty hunk")
				}
				// Applying to anything must not panic.
				if utf8.ValidString(text) {
					_, _ = applyHunks(text, []Hunk{h})
				}
				_, _ = applyHunks(strings.Join(h.Old, "\n"), fp.Hunks)
			}
		}
		// A hunk whose old lines are the whole file applies to it.
		for _, fp := range p.Files {
			if fp.Op != PatchUpdate || len(fp.Hunks) != 1 || fp.Hunks[0].Context != "" || len(fp.Hunks[0].Old) == 0 {
				continue
			}
			h := fp.Hunks[0]
			got, err := applyHunks(strings.Join(h.Old, "\n")+"\n", fp.Hunks)
			if err != nil {
				t.Fatalf("own old lines do not match: %v", err)
			}
			want := strings.Join(h.New, "\n") + "\n"
			if len(h.New) == 0 {
				want = ""
			}
			if got != want {
				t.Fatalf("applied = %q, want %q", got, want)
			}
		}
	})
}
