package userlayer

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     Request
		cat      Category
		field    string
	}{
		{name: "create", in: `{"operation":"create","kind":"skill","name":"notes","content":"x"}`, want: Request{Operation: OpCreate, Kind: KindSkill, Name: "notes", Content: str("x")}},
		{name: "replace", in: `{"operation":"replace","kind":"system_prompt","content":"x","expected_digest":"sha256:` + strings.Repeat("a", 64) + `"}`,
			want: Request{Operation: OpReplace, Kind: KindSystemPrompt, Content: str("x"), ExpectedDigest: "sha256:" + strings.Repeat("a", 64)}},
		{name: "file name as name", in: `{"operation":"delete","kind":"hooks","name":"hooks.toml"}`, want: Request{Operation: OpDelete, Kind: KindHooks, Name: "hooks.toml"}},
		{name: "list", in: `{"operation":"list"}`, want: Request{Operation: OpList}},
		{name: "list a kind", in: ` {"operation":"list","kind":"tool"} `, want: Request{Operation: OpList, Kind: KindTool}},
		{name: "empty content is content", in: `{"operation":"create","kind":"append_system","content":""}`, want: Request{Operation: OpCreate, Kind: KindAppendSystem, Content: str("")}},

		{name: "empty", in: ``, cat: UnsupportedOperation, field: "operation"},
		{name: "not JSON", in: `create skill`, cat: UnsupportedOperation},
		{name: "array", in: `[1]`, cat: UnsupportedOperation},
		{name: "trailing", in: `{"operation":"list"} {}`, cat: UnsupportedOperation},
		{name: "unknown field", in: `{"operation":"list","recursive":true}`, cat: UnsupportedOperation, field: "recursive"},
		{name: "name not a string", in: `{"operation":"create","kind":"tool","name":3}`, cat: InvalidName, field: "name"},
		{name: "content not a string", in: `{"operation":"create","kind":"tool","name":"x","content":{"a":1}}`, cat: InvalidContent, field: "content"},
		{name: "null content", in: `{"operation":"create","kind":"append_system","content":null}`, cat: InvalidContent, field: "content"},
		{name: "digest not a string", in: `{"operation":"delete","kind":"hooks","expected_digest":1}`, cat: StaleRevision, field: "expected_digest"},
		{name: "operation not a string", in: `{"operation":1}`, cat: UnsupportedOperation, field: "operation"},
		{name: "list with name", in: `{"operation":"list","name":"x"}`, cat: UnsupportedOperation, field: "name"},
		{name: "list with content", in: `{"operation":"list","content":"x"}`, cat: UnsupportedOperation, field: "content"},
		{name: "list with digest", in: `{"operation":"list","expected_digest":"x"}`, cat: UnsupportedOperation, field: "expected_digest"},
		{name: "long name", in: `{"operation":"create","kind":"skill","name":"` + strings.Repeat("a", 65) + `","content":"x"}`, cat: InvalidName, field: "name"},
		{name: "tool name missing", in: `{"operation":"delete","kind":"tool"}`, cat: InvalidName, field: "name"},
		{name: "upper-case digest", in: `{"operation":"delete","kind":"hooks","expected_digest":"sha256:` + strings.Repeat("A", 64) + `"}`, cat: StaleRevision, field: "expected_digest"},
		{name: "too large", in: `{"operation":"create","kind":"append_system","content":"` + strings.Repeat("x", MaxRequestBytes) + `"}`, cat: InvalidContent, field: "content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeRequest([]byte(tc.in))
			if tc.cat == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
				return
			}
			e, ok := errors.AsType[*Error](err)
			if !ok || e.Category != tc.cat || e.Field != tc.field || e.Message == "" {
				t.Errorf("error %#v, want %s on %q", err, tc.cat, tc.field)
			}
		})
	}
}

func TestPath(t *testing.T) {
	t.Parallel()
	got := map[Kind]string{}
	for _, k := range Kinds {
		got[k] = Path(k, "x")
	}
	want := map[Kind]string{
		KindSkill: "skills/x/SKILL.md", KindSystemPrompt: "SYSTEM.md", KindAppendSystem: "APPEND_SYSTEM.md",
		KindTool: "tools/x.toml", KindHooks: "hooks.toml",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

// FuzzDecodeRequest checks that any input decodes to a valid request or
// fails with one of the stable categories, and that a decoded request
// encodes and decodes to itself.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"operation":"create","kind":"skill","name":"notes","content":"---\nname: notes\n---\n"}`,
		`{"operation":"replace","kind":"tool","name":"wc","content":"x","expected_digest":"sha256:` + strings.Repeat("0", 64) + `"}`,
		`{"operation":"delete","kind":"hooks"}`,
		`{"operation":"list","kind":"append_system"}`,
		`{"operation":"list","extra":1}`,
		`{"operation":"create","kind":"skill","name":"../../etc","content":"x"}`,
		`{"name":3}`, `[]`, `null`, `"x"`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	categories := []Category{InvalidName, InvalidContent, NameCollision, AlreadyExists, NotFound, StaleRevision, UnsupportedOperation, StorageUnavailable}
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := DecodeRequest(in)
		if err != nil {
			e, ok := errors.AsType[*Error](err)
			if !ok || !slices.Contains(categories, e.Category) || e.Message == "" {
				t.Fatalf("DecodeRequest(%q) = %#v", in, err)
			}
			return
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("decoded %+v is invalid: %v", req, err)
		}
		if req.Operation != OpList {
			if p := Path(req.Kind, req.Name); strings.Contains(p, "..") || strings.HasPrefix(p, "/") {
				t.Fatalf("request %+v leads to %q", req, p)
			}
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeRequest(b)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		if diff := cmp.Diff(req, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
