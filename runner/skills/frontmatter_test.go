package skills

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFrontmatter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    Frontmatter
		wantErr string // "field: reason" prefix
	}{
		{
			name: "spec example",
			in:   "---\nname: release-notes\ndescription: Use when drafting release notes from merged pull requests.\n---\n# Release notes\n",
			want: Frontmatter{Name: "release-notes", Description: "Use when drafting release notes from merged pull requests."},
		},
		{
			name: "name defaults, other fields ignored",
			in:   "---\ndescription: Review a branch\nallowed-tools:\n  - Read\nmetadata:\n  version: \"1.9\"\nlicense: MIT\n---\nbody",
			want: Frontmatter{Description: "Review a branch"},
		},
		{
			name: "folded multi-line description",
			in:   "---\nname: a\ndescription: Open and advance a PR,\n  then watch CI.\n---\n",
			want: Frontmatter{Name: "a", Description: "Open and advance a PR, then watch CI."},
		},
		{
			name: "block scalar",
			in:   "---\nname: a\ndescription: |-\n  line one\n  line two\n---\n",
			want: Frontmatter{Name: "a", Description: "line one\nline two"},
		},
		{
			name: "BOM and CRLF",
			in:   "\xef\xbb\xbf---\r\nname: a-1\r\ndescription: x\r\n---\r\nbody\r\n",
			want: Frontmatter{Name: "a-1", Description: "x"},
		},
		{
			name: "closing fence at end of file",
			in:   "---\ndescription: x\n---",
			want: Frontmatter{Description: "x"},
		},
		{
			name: "numeric scalars are text",
			in:   "---\nname: \"2024\"\ndescription: 42\n---\n",
			want: Frontmatter{Name: "2024", Description: "42"},
		},
		{name: "no frontmatter", in: "# Title\n\ntext\n", wantErr: "does not start with YAML frontmatter"},
		{name: "frontmatter not first", in: "\n---\ndescription: x\n---\n", wantErr: "does not start with YAML frontmatter"},
		{name: "unclosed", in: "---\ndescription: x\n", wantErr: "does not start with YAML frontmatter"},
		{name: "empty file", in: "", wantErr: "does not start with YAML frontmatter"},
		{name: "empty frontmatter", in: "---\n---\n", wantErr: "description: missing"},
		{name: "missing description", in: "---\nname: a\n---\n", wantErr: "description: missing"},
		{name: "blank description", in: "---\ndescription: \"  \"\n---\n", wantErr: "description: is empty"},
		{name: "null description", in: "---\ndescription:\n---\n", wantErr: "description: must be a string"},
		{name: "list description", in: "---\ndescription: [a, b]\n---\n", wantErr: "description: must be a string"},
		{name: "uppercase name", in: "---\nname: Release_Notes\ndescription: x\n---\n", wantErr: `name: "Release_Notes" is not a valid skill name`},
		{name: "double hyphen", in: "---\nname: a--b\ndescription: x\n---\n", wantErr: `name: "a--b" is not a valid skill name`},
		{name: "leading hyphen", in: "---\nname: -a\ndescription: x\n---\n", wantErr: "name: \"-a\" is not a valid skill name"},
		{name: "colon in name", in: "---\nname: \"p:s\"\ndescription: x\n---\n", wantErr: `name: "p:s" is not a valid skill name`},
		{name: "empty name", in: "---\nname: \"\"\ndescription: x\n---\n", wantErr: `name: "" is not a valid skill name`},
		{name: "duplicate name", in: "---\nname: a\nname: b\ndescription: x\n---\n", wantErr: "name: appears twice"},
		{name: "invalid YAML", in: "---\ndescription: Use when: this\n---\n", wantErr: "invalid YAML in the frontmatter"},
		{name: "not a mapping", in: "---\n- a\n- b\n---\n", wantErr: "the frontmatter must be a mapping"},
		{name: "alias", in: "---\nx: &d hello\ndescription: *d\n---\n", want: Frontmatter{Description: "hello"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseFrontmatter([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want prefix %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"release-notes": true, "a": true, "a1-b2": true, "123": true,
		"": false, "A": false, "a_b": false, "a--b": false, "a-": false, "-a": false, "a b": false, "a:b": false, "é": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func FuzzParseFrontmatter(f *testing.F) {
	f.Add("---\nname: release-notes\ndescription: Use when drafting release notes.\n---\n# Body\n")
	f.Add("---\ndescription: |-\n  a\n  b\nmetadata: {a: 1}\n---\n")
	f.Add("\xef\xbb\xbf---\r\nname: x\r\ndescription: y\r\n---\r\n")
	f.Add("---\nx: &a [*a]\ndescription: *a\n---\n")
	f.Add("---\n---\n")
	f.Add("---\nname: [\n---\n")
	corpusSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		fm, err := ParseFrontmatter([]byte(in))
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("the parser panicked: %v", err)
			}
			if fm != (Frontmatter{}) {
				t.Fatalf("frontmatter %+v despite error %v", fm, err)
			}
			return
		}
		if strings.TrimSpace(fm.Description) == "" || fm.Description != strings.TrimSpace(fm.Description) {
			t.Fatalf("description %q accepted", fm.Description)
		}
		if fm.Name != "" && !ValidName(fm.Name) {
			t.Fatalf("name %q accepted", fm.Name)
		}
		again, err2 := ParseFrontmatter([]byte(in))
		if err2 != nil || again != fm {
			t.Fatalf("not deterministic: %+v %v", again, err2)
		}
	})
}

// FuzzParseSimple checks that the fast path for simple frontmatter
// agrees with the YAML parser wherever it answers.
func FuzzParseSimple(f *testing.F) {
	f.Add("name: release-notes\ndescription: Use when drafting release notes.\nlicense: MIT\n")
	f.Add("description: a: b\n")
	f.Add("description: x #comment\nname: a\n")
	f.Add("description: \u00a0x\u00a0\n")
	f.Add("description: yes\nname: \"a\"\n")
	f.Add("description: x\u2028y\n")
	f.Add("description: 'quoted'\n")
	f.Add("description: x\r\nname: a-b\r\n")
	f.Add("null: x\ndescription: ~\n")
	f.Fuzz(func(t *testing.T, block string) {
		fast, ok := parseSimple([]byte(block))
		if !ok {
			return
		}
		var slow Frontmatter
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			slow, err = parseYAML([]byte(block))
		}()
		if err != nil {
			t.Fatalf("fast path accepted %q (%+v); YAML: %v", block, fast, err)
		}
		if fast != slow {
			t.Fatalf("%q: fast %+v, YAML %+v", block, fast, slow)
		}
	})
}

// FuzzFrontmatterEnd checks that parsing the start of a file up to the
// end frontmatterEnd finds gives exactly what parsing the whole file does,
// wherever the start is cut: discovery reads no further.
func FuzzFrontmatterEnd(f *testing.F) {
	f.Add("---\nname: release-notes\ndescription: Use when drafting release notes.\n---\n# Body\n", 20)
	f.Add("\xef\xbb\xbf---\r\nname: x\r\ndescription: y\r\n---\r\nbody", 30)
	f.Add("---\nname: a\ndescription: b\n----\n---\n", 28)
	f.Add("---\nname: a\ndescription: b\n---", 100)
	f.Add("---\ndescription: |\n  ---\n---\n", 14)
	f.Add("no frontmatter\n---\n", 5)
	f.Fuzz(func(t *testing.T, in string, cut int) {
		if cut < 0 || cut > len(in) {
			return
		}
		end := frontmatterEnd([]byte(in[:cut]))
		if end == 0 {
			return
		}
		if end > cut || in[end-1] != '\n' {
			t.Fatalf("end %d of %q cut at %d", end, in, cut)
		}
		head, headErr := ParseFrontmatter([]byte(in[:end]))
		whole, wholeErr := ParseFrontmatter([]byte(in))
		if head != whole || fmt.Sprint(headErr) != fmt.Sprint(wholeErr) {
			t.Fatalf("%q: the start up to %d gives %+v %v, the whole %+v %v", in, end, head, headErr, whole, wholeErr)
		}
	})
}
