package userlayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
)

const (
	skillDoc  = "---\nname: notes\ndescription: Use when taking notes.\n---\nWrite notes in NOTES.md.\n"
	skillDoc2 = "---\nname: notes\ndescription: Use when taking notes.\n---\nWrite notes in docs/NOTES.md.\n"
	toolDoc   = "name = \"wc\"\ndescription = \"Counts words.\"\ncommand = [\"/usr/bin/wc\", \"-w\"]\n"
	hooksDoc  = "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"true\"\n"
)

// fixture is a workspace with a project layer and a user layer.
type fixture struct {
	ws, project, home string
	layers            []layer.Layer
}

// newFixture writes files (paths from a directory holding ws/ and home/)
// and discovers the layers of a session in ws.
func newFixture(t testing.TB, files map[string]string) fixture {
	t.Helper()
	dir := t.TempDir()
	f := fixture{ws: filepath.Join(dir, "ws"), home: filepath.Join(dir, "home")}
	f.project = filepath.Join(f.ws, ".aerie")
	for _, d := range []string{f.project, f.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WriteTree(t, dir, files)
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: f.ws, Workspace: f.ws, Home: f.home})
	if err != nil {
		t.Fatal(err)
	}
	f.layers = layers
	return f
}

func (f fixture) manager(t *testing.T) *Manager {
	t.Helper()
	n := 0
	var mu sync.Mutex
	m, err := New(Options{Layers: f.layers, Workspace: f.ws, WorkDir: f.ws, Builtins: []string{"bash", "read_file"}, NewOperationID: func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("op-%d", n)
	}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func str(s string) *string { return &s }

func digestOf(s string) string { return layer.Digest([]byte(s)) }

// snapshot returns every file under dir (links as "->target"), so that a
// test can check a failed request changed nothing.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "->" + target
		case d.IsDir():
			out[rel+"/"] = ""
		case d.Type().IsRegular():
			if d.Name() == LockFile {
				return nil // the lock file stays, empty
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		default:
			out[rel] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func category(err error) Category {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Category
	}
	return ""
}

// TestApplyCreateReplaceDelete follows each kind through its life: created
// with a sidecar, listed without its body, replaced and deleted.
func TestApplyCreateReplaceDelete(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind      Kind
		name      string
		path      string
		body, new string
	}{
		{KindSkill, "notes", "skills/notes/SKILL.md", skillDoc, skillDoc2},
		{KindSystemPrompt, "", "SYSTEM.md", "You are careful.\n", "You are very careful.\n"},
		{KindAppendSystem, "", "APPEND_SYSTEM.md", "Be brief.\n", "Be briefer.\n"},
		{KindTool, "wc", "tools/wc.toml", toolDoc, strings.Replace(toolDoc, "Counts words.", "Counts the words.", 1)},
		{KindHooks, "", "hooks.toml", hooksDoc, strings.Replace(hooksDoc, "true", "echo done", 1)},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			m := f.manager(t)
			ctx := t.Context()
			abs := filepath.Join(f.home, tc.path)

			res, err := m.Apply(ctx, Request{Operation: OpCreate, Kind: tc.kind, Name: tc.name, Content: str(tc.body)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Path != abs || res.Digest != digestOf(tc.body) || res.OperationID != "op-1" || res.State != layer.StatusPendingReload {
				t.Errorf("create result %+v", res)
			}
			if b, _ := os.ReadFile(abs); string(b) != tc.body {
				t.Errorf("artifact %q", b)
			}
			p := layer.ReadProvenance(m.Layer(), abs)
			if p.State != layer.ProvenanceAgent || p.OperationID != "op-1" || p.Digest != digestOf(tc.body) || p.ActivationBoundary != ActivationBoundary || p.DigestMismatch {
				t.Errorf("provenance %+v", p)
			}
			if diff := cmp.Diff([]string{abs}, m.Pending()); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}

			// list shows metadata, never the body.
			lst, err := m.Apply(ctx, Request{Operation: OpList})
			if err != nil {
				t.Fatal(err)
			}
			if len(lst.Artifacts) != 1 {
				t.Fatalf("list %+v", lst.Artifacts)
			}
			e := lst.Artifacts[0]
			wantName := tc.name
			if wantName == "" {
				wantName = filepath.Base(tc.path)
			}
			if e.Kind != tc.kind || e.Name != wantName || e.Path != abs || e.Digest != digestOf(tc.body) || e.Size != int64(len(tc.body)) ||
				e.State != layer.StatusPendingReload || e.Provenance.State != layer.ProvenanceAgent {
				t.Errorf("entry %+v", e)
			}
			b, _ := json.Marshal(lst)
			if strings.Contains(string(b), strings.TrimSpace(strings.Split(tc.body, "\n")[1])) && tc.kind != KindSystemPrompt && tc.kind != KindAppendSystem {
				t.Errorf("list shows the body: %s", b)
			}
			if strings.Contains(string(b), tc.body) {
				t.Errorf("list shows the body: %s", b)
			}

			res, err = m.Apply(ctx, Request{Operation: OpReplace, Kind: tc.kind, Name: tc.name, Content: str(tc.new), ExpectedDigest: digestOf(tc.body)})
			if err != nil {
				t.Fatal(err)
			}
			if res.PreviousDigest != digestOf(tc.body) || res.Digest != digestOf(tc.new) || res.OperationID != "op-2" {
				t.Errorf("replace result %+v", res)
			}
			if b, _ := os.ReadFile(abs); string(b) != tc.new {
				t.Errorf("artifact after replace %q", b)
			}
			if p := layer.ReadProvenance(m.Layer(), abs); p.OperationID != "op-2" || p.Digest != digestOf(tc.new) {
				t.Errorf("provenance after replace %+v", p)
			}

			res, err = m.Apply(ctx, Request{Operation: OpDelete, Kind: tc.kind, Name: tc.name, ExpectedDigest: digestOf(tc.new)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Digest != digestOf(tc.new) {
				t.Errorf("delete result %+v", res)
			}
			// Nothing is left: no artifact, no sidecar, no skill directory,
			// no staged file or backup.
			want := map[string]string{"./": ""}
			if tc.kind == KindTool {
				want["tools/"] = ""
			}
			if tc.kind == KindSkill {
				want["skills/"] = ""
			}
			if diff := cmp.Diff(want, snapshot(t, f.home)); diff != "" {
				t.Errorf("user layer after delete (-want +got):\n%s", diff)
			}
		})
	}
}

// TestApplyRefusals checks every failure category: nothing is written, and
// the message names the field.
func TestApplyRefusals(t *testing.T) {
	t.Parallel()
	existing := map[string]string{
		"home/skills/notes/SKILL.md": skillDoc,
		"home/tools/wc.toml":         toolDoc,
	}
	big := "---\nname: notes\ndescription: d\n---\n" + strings.Repeat("x", MaxContentBytes)
	for _, tc := range []struct {
		name  string
		files map[string]string
		req   Request
		cat   Category
		field string
		msg   string
	}{
		{name: "bad skill name", req: Request{Operation: OpCreate, Kind: KindSkill, Name: "Notes", Content: str(skillDoc)}, cat: InvalidName, field: "name", msg: "not a skill name"},
		{name: "skill path escape", req: Request{Operation: OpCreate, Kind: KindSkill, Name: "../x", Content: str(skillDoc)}, cat: InvalidName, field: "name"},
		{name: "bad tool name", req: Request{Operation: OpCreate, Kind: KindTool, Name: "word-count", Content: str(toolDoc)}, cat: InvalidName, field: "name"},
		{name: "named prompt", req: Request{Operation: OpCreate, Kind: KindSystemPrompt, Name: "mine", Content: str("x")}, cat: InvalidName, field: "name", msg: "leave name out"},
		{name: "missing content", req: Request{Operation: OpCreate, Kind: KindAppendSystem}, cat: InvalidContent, field: "content", msg: "complete content"},
		{name: "empty content", req: Request{Operation: OpCreate, Kind: KindAppendSystem, Content: str(" \n")}, cat: InvalidContent, field: "content", msg: "empty"},
		{name: "too large", req: Request{Operation: OpCreate, Kind: KindSkill, Name: "notes", Content: str(big)}, cat: InvalidContent, field: "content", msg: "over the 256 KiB limit"},
		{name: "null byte", req: Request{Operation: OpCreate, Kind: KindAppendSystem, Content: str("a\x00b")}, cat: InvalidContent, field: "content", msg: "null byte"},
		{name: "not UTF-8", req: Request{Operation: OpCreate, Kind: KindAppendSystem, Content: str("a\xffb")}, cat: InvalidContent, field: "content", msg: "UTF-8"},
		{name: "secret", req: Request{Operation: OpCreate, Kind: KindAppendSystem, Content: str("Use the key\n" + "AKIA" + "IOSFODNN7EXAMPLE\n")}, cat: InvalidContent, field: "content", msg: "line 2 holds what looks like an AWS access key id"},
		{name: "skill without frontmatter", req: Request{Operation: OpCreate, Kind: KindSkill, Name: "notes", Content: str("Just notes.\n")}, cat: InvalidContent, field: "content", msg: "frontmatter"},
		{name: "skill without description", req: Request{Operation: OpCreate, Kind: KindSkill, Name: "notes", Content: str("---\nname: notes\n---\nx\n")}, cat: InvalidContent, field: "content", msg: "description"},
		{name: "skill name differs", req: Request{Operation: OpCreate, Kind: KindSkill, Name: "other", Content: str(skillDoc)}, cat: InvalidContent, field: "content", msg: `"notes" differs from the request's name "other"`},
		{name: "tool manifest", req: Request{Operation: OpCreate, Kind: KindTool, Name: "wc", Content: str("name = \"wc\"\ndescription = \"x\"\ncommand = [\"/bin/wc\"]\ntimeout_secs = 99999\n")}, cat: InvalidContent, field: "content", msg: "timeout_secs"},
		{name: "tool unknown key", req: Request{Operation: OpCreate, Kind: KindTool, Name: "wc", Content: str(toolDoc + "timeout = 3\n")}, cat: InvalidContent, field: "content", msg: "unknown key"},
		{name: "tool name differs", req: Request{Operation: OpCreate, Kind: KindTool, Name: "count", Content: str(toolDoc)}, cat: InvalidContent, field: "content", msg: "differs"},
		{name: "hooks", req: Request{Operation: OpCreate, Kind: KindHooks, Content: str("[[hooks.Stop]]\nmatcher = '('\n[[hooks.Stop.hooks]]\ncommand = 'x'\n")}, cat: InvalidContent, field: "content", msg: "hooks.toml: hooks.Stop[0].matcher"},
		{name: "hooks unknown event", req: Request{Operation: OpCreate, Kind: KindHooks, Content: str("[[hooks.Never]]\n")}, cat: InvalidContent, field: "content", msg: "unknown event"},
		{name: "builtin tool", req: Request{Operation: OpCreate, Kind: KindTool, Name: "bash", Content: str(strings.ReplaceAll(toolDoc, `"wc"`, `"bash"`))}, cat: NameCollision, field: "name", msg: "built-in"},
		{name: "project tool", files: map[string]string{"ws/.aerie/tools/mine.toml": strings.ReplaceAll(toolDoc, `"wc"`, `"count"`)},
			req: Request{Operation: OpCreate, Kind: KindTool, Name: "count", Content: str(strings.ReplaceAll(toolDoc, `"wc"`, `"count"`))}, cat: NameCollision, field: "name", msg: "the project layer .aerie defines a tool count"},
		{name: "project system prompt", files: map[string]string{"ws/.aerie/SYSTEM.md": "Project persona.\n"},
			req: Request{Operation: OpCreate, Kind: KindSystemPrompt, Content: str("Mine.\n")}, cat: NameCollision, field: "kind", msg: "use append_system"},
		{name: "project system prompt unreadable", files: map[string]string{"ws/.aerie/SYSTEM.md": "<fifo>"},
			req: Request{Operation: OpCreate, Kind: KindSystemPrompt, Content: str("Mine.\n")}, cat: NameCollision, field: "kind"},
		{name: "project hooks", files: map[string]string{"ws/.aerie/hooks.toml": hooksDoc},
			req: Request{Operation: OpCreate, Kind: KindHooks, Content: str(hooksDoc)}, cat: NameCollision, field: "kind", msg: "the nearest hooks.toml wins"},
		{name: "exists", files: existing, req: Request{Operation: OpCreate, Kind: KindSkill, Name: "notes", Content: str(skillDoc2)}, cat: AlreadyExists, field: "name", msg: digestOf(skillDoc)},
		{name: "replace missing", req: Request{Operation: OpReplace, Kind: KindSkill, Name: "notes", Content: str(skillDoc)}, cat: NotFound, field: "name"},
		{name: "delete missing", req: Request{Operation: OpDelete, Kind: KindHooks}, cat: NotFound, field: "name"},
		{name: "stale replace", files: existing, req: Request{Operation: OpReplace, Kind: KindSkill, Name: "notes", Content: str(skillDoc2), ExpectedDigest: digestOf("old")}, cat: StaleRevision, field: "expected_digest", msg: "has digest " + digestOf(skillDoc)},
		{name: "stale delete", files: existing, req: Request{Operation: OpDelete, Kind: KindTool, Name: "wc", ExpectedDigest: digestOf("old")}, cat: StaleRevision, field: "expected_digest"},
		{name: "malformed digest", files: existing, req: Request{Operation: OpDelete, Kind: KindTool, Name: "wc", ExpectedDigest: "abc"}, cat: StaleRevision, field: "expected_digest", msg: "from list"},
		{name: "digest on create", req: Request{Operation: OpCreate, Kind: KindAppendSystem, Content: str("x"), ExpectedDigest: digestOf("x")}, cat: UnsupportedOperation, field: "expected_digest"},
		{name: "content on delete", files: existing, req: Request{Operation: OpDelete, Kind: KindTool, Name: "wc", Content: str("x")}, cat: UnsupportedOperation, field: "content"},
		{name: "unknown operation", req: Request{Operation: "rename", Kind: KindTool, Name: "wc"}, cat: UnsupportedOperation, field: "operation"},
		{name: "unknown kind", req: Request{Operation: OpCreate, Kind: "plugin", Name: "x", Content: str("x")}, cat: UnsupportedOperation, field: "kind"},
		{name: "missing kind", req: Request{Operation: OpDelete, Name: "x"}, cat: UnsupportedOperation, field: "kind"},
		{name: "symlinked artifact", files: map[string]string{"home/outside.md": "mine\n", "home/APPEND_SYSTEM.md": "->outside.md"},
			req: Request{Operation: OpReplace, Kind: KindAppendSystem, Content: str("x")}, cat: UnsupportedOperation, field: "name", msg: "symbolic link"},
		{name: "dangling symlink", files: map[string]string{"home/SYSTEM.md": "->/nonexistent/SYSTEM.md"},
			req: Request{Operation: OpCreate, Kind: KindSystemPrompt, Content: str("x")}, cat: UnsupportedOperation, field: "name", msg: "symbolic link"},
		{name: "symlinked sidecar", files: map[string]string{"home/APPEND_SYSTEM.md": "a\n", "home/APPEND_SYSTEM.md.provenance.json": "->/etc/passwd"},
			req: Request{Operation: OpReplace, Kind: KindAppendSystem, Content: str("x")}, cat: UnsupportedOperation, field: "name", msg: "APPEND_SYSTEM.md.provenance.json"},
		{name: "symlinked directory", files: map[string]string{"elsewhere/x": "", "home/tools": "->../elsewhere"},
			req: Request{Operation: OpCreate, Kind: KindTool, Name: "wc", Content: str(toolDoc)}, cat: UnsupportedOperation, field: "name", msg: "symbolic link"},
		{name: "fifo", files: map[string]string{"home/hooks.toml": "<fifo>"},
			req: Request{Operation: OpDelete, Kind: KindHooks}, cat: UnsupportedOperation, field: "name", msg: "not a regular file"},
		{name: "directory", files: map[string]string{"home/SYSTEM.md/x": ""},
			req: Request{Operation: OpDelete, Kind: KindSystemPrompt}, cat: UnsupportedOperation, field: "name", msg: "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.files)
			m := f.manager(t)
			before := snapshot(t, filepath.Dir(f.home))
			_, err := m.Apply(t.Context(), tc.req)
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %v, want %s", err, tc.cat)
			}
			if e.Category != tc.cat || e.Field != tc.field || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("error %s %q %q; want %s %q containing %q", e.Category, e.Field, e.Message, tc.cat, tc.field, tc.msg)
			}
			if strings.Contains(e.Message, "IOSFODNN7EXAMPLE") {
				t.Errorf("the message repeats the secret: %s", e.Message)
			}
			after := snapshot(t, filepath.Dir(f.home))
			delete(after, "home/"+LockFile)
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("a refused request changed the files (-before +after):\n%s", diff)
			}
			if len(m.Pending()) != 0 {
				t.Errorf("pending after a refusal: %v", m.Pending())
			}
		})
	}
}

// TestAppendSystemCoexists checks that an append prompt may be written
// beside a project's, and a skill beside a project skill of its name.
func TestAppendSystemCoexists(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{
		"ws/.aerie/APPEND_SYSTEM.md":          "Project append.\n",
		"ws/.aerie/skills/notes/SKILL.md":     skillDoc,
		"ws/.aerie/SYSTEM.md":                 "Project persona.\n",
		"ws/.aerie/tools/other.toml":          strings.ReplaceAll(toolDoc, `"wc"`, `"other"`),
		"ws/.aerie/hooks/guard.yaml":          "hooks: {}\n",
		"ws/.aerie/tools/broken_wc_copy.toml": "name = \"wc\"\n",
	})
	m := f.manager(t)
	for _, req := range []Request{
		{Operation: OpCreate, Kind: KindAppendSystem, Content: str("Mine.\n")},
		{Operation: OpCreate, Kind: KindSkill, Name: "notes", Content: str(skillDoc)},
		// A malformed project manifest of that name shadows nothing.
		{Operation: OpCreate, Kind: KindTool, Name: "wc", Content: str(toolDoc)},
		// hooks/*.yaml files are additive: they do not collide.
		{Operation: OpCreate, Kind: KindHooks, Content: str(hooksDoc)},
	} {
		if _, err := m.Apply(t.Context(), req); err != nil {
			t.Errorf("%s %s: %v", req.Operation, req.Kind, err)
		}
	}
}

// TestPartialFailureRestores fails each step of a change in turn and
// checks that the artifact and its sidecar are left as they were.
func TestPartialFailureRestores(t *testing.T) {
	t.Parallel()
	const old = "Old append.\n"
	oldSidecar := string(layer.AgentSidecar("op-old", []byte(old), ActivationBoundary))
	for _, tc := range []struct {
		name  string
		files map[string]string
		req   Request
	}{
		{name: "create", req: Request{Operation: OpCreate, Kind: KindAppendSystem, Content: str("New.\n")}},
		{name: "create skill", req: Request{Operation: OpCreate, Kind: KindSkill, Name: "notes", Content: str(skillDoc)}},
		{name: "replace", files: map[string]string{"home/APPEND_SYSTEM.md": old, "home/APPEND_SYSTEM.md.provenance.json": oldSidecar},
			req: Request{Operation: OpReplace, Kind: KindAppendSystem, Content: str("New.\n")}},
		{name: "replace legacy", files: map[string]string{"home/APPEND_SYSTEM.md": old},
			req: Request{Operation: OpReplace, Kind: KindAppendSystem, Content: str("New.\n")}},
		{name: "delete", files: map[string]string{"home/APPEND_SYSTEM.md": old, "home/APPEND_SYSTEM.md.provenance.json": oldSidecar},
			req: Request{Operation: OpDelete, Kind: KindAppendSystem}},
	} {
		for _, step := range []string{
			"stage APPEND_SYSTEM.md", "stage APPEND_SYSTEM.md.provenance.json",
			"backup APPEND_SYSTEM.md", "backup APPEND_SYSTEM.md.provenance.json",
			"apply APPEND_SYSTEM.md", "apply APPEND_SYSTEM.md.provenance.json",
		} {
			if tc.req.Kind == KindSkill {
				step = strings.ReplaceAll(step, "APPEND_SYSTEM.md", "skills/notes/SKILL.md")
			}
			t.Run(tc.name+"/"+step, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, tc.files)
				m := f.manager(t)
				hit := false
				m.fault = func(s string) error {
					if s == step {
						hit = true
						return fmt.Errorf("injected failure at %s", s)
					}
					return nil
				}
				before := snapshot(t, f.home)
				_, err := m.Apply(t.Context(), tc.req)
				if !hit {
					if err != nil {
						t.Fatalf("the step was not reached, and the change failed: %v", err)
					}
					return // this change has no such step (no backup of a new file)
				}
				if category(err) != StorageUnavailable || !strings.Contains(err.Error(), "injected failure at "+step) {
					t.Fatalf("error %v, want storage_unavailable", err)
				}
				after := snapshot(t, f.home)
				delete(after, LockFile)
				delete(before, LockFile)
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("the failed change left the user layer changed (-before +after):\n%s", diff)
				}
				if len(m.Pending()) != 0 {
					t.Errorf("pending after a failure: %v", m.Pending())
				}
			})
		}
	}
}

// TestConcurrentChanges races two managers of one user layer (two
// sessions): of two creates one wins, of two replaces with the same
// expected digest one wins and the other is stale.
func TestConcurrentChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a, b := f.manager(t), f.manager(t)
	for round := range 20 {
		name := fmt.Sprintf("skill-%d", round)
		doc := strings.ReplaceAll(skillDoc, "notes", name)
		results := make([]error, 2)
		var wg sync.WaitGroup
		for i, m := range []*Manager{a, b} {
			wg.Go(func() {
				_, results[i] = m.Apply(t.Context(), Request{Operation: OpCreate, Kind: KindSkill, Name: name, Content: str(doc)})
			})
		}
		wg.Wait()
		if cats := []Category{category(results[0]), category(results[1])}; !cmp.Equal(cats, []Category{"", AlreadyExists}) && !cmp.Equal(cats, []Category{AlreadyExists, ""}) {
			t.Fatalf("round %d creates: %v, %v", round, results[0], results[1])
		}
		for i, m := range []*Manager{a, b} {
			wg.Go(func() {
				_, results[i] = m.Apply(t.Context(), Request{Operation: OpReplace, Kind: KindSkill, Name: name, ExpectedDigest: digestOf(doc),
					Content: str(strings.ReplaceAll(doc, "NOTES.md", fmt.Sprintf("NOTES-%d.md", i)))})
			})
		}
		wg.Wait()
		if cats := []Category{category(results[0]), category(results[1])}; !cmp.Equal(cats, []Category{"", StaleRevision}) && !cmp.Equal(cats, []Category{StaleRevision, ""}) {
			t.Fatalf("round %d replaces: %v, %v", round, results[0], results[1])
		}
	}
}

// TestLifecycleAndTrust checks what a session makes of managed artifacts:
// pending until the reload, then active — or inactive for a tool, which
// the manager never trusts, until a person pins it.
func TestLifecycleAndTrust(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"home/APPEND_SYSTEM.md": "A person's append.\n"})
	m := f.manager(t)
	ctx := t.Context()
	for _, req := range []Request{
		{Operation: OpCreate, Kind: KindTool, Name: "wc", Content: str(toolDoc)},
		{Operation: OpCreate, Kind: KindHooks, Content: str(hooksDoc)},
		{Operation: OpCreate, Kind: KindSystemPrompt, Content: str("You are careful.\n")},
	} {
		if _, err := m.Apply(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	states := func() map[string]string {
		t.Helper()
		res, err := m.Apply(ctx, Request{Operation: OpList})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, e := range res.Artifacts {
			out[string(e.Kind)+" "+e.Name] = fmt.Sprintf("%s %s %s", e.State, e.Trust, e.Provenance.State)
		}
		return out
	}
	if diff := cmp.Diff(map[string]string{
		"tool wc":                        "pending_reload  agent",
		"hooks hooks.toml":               "pending_reload  agent",
		"system_prompt SYSTEM.md":        "pending_reload  agent",
		"append_system APPEND_SYSTEM.md": "inactive  legacy",
	}, states()); diff != "" {
		t.Errorf("before the reload (-want +got):\n%s", diff)
	}

	reload := func() {
		t.Helper()
		pending := m.Pending()
		set, err := extensions.Load(layer.Source{Layers: f.layers, Workspace: f.ws, WorkDir: f.ws}, extensions.Options{Builtins: []string{"bash"}})
		if err != nil {
			t.Fatal(err)
		}
		hk, err := hooks.Load(f.layers, set.Pins, hooks.LoadOptions{Dir: f.ws})
		if err != nil {
			t.Fatal(err)
		}
		r := set.Report
		r.Artifacts = append(r.Artifacts, hk.Artifacts(f.ws)...)
		m.Reloaded(r, pending)
	}
	reload()
	if diff := cmp.Diff(map[string]string{
		"tool wc":                        "inactive untrusted agent",
		"hooks hooks.toml":               "inactive untrusted agent",
		"system_prompt SYSTEM.md":        "active  agent",
		"append_system APPEND_SYSTEM.md": "active  legacy",
	}, states()); diff != "" {
		t.Errorf("after the reload (-want +got):\n%s", diff)
	}

	// A person reviews the tool and pins it: active at the next load.
	pin, err := layer.ComputePin(f.ws, m.Layer(), filepath.Join(f.home, "tools/wc.toml"), []string{"/usr/bin/wc"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WriteTree(t, f.home, map[string]string{layer.TrustFile: pin.TOML()})
	reload()
	if got := states()["tool wc"]; got != "active trusted agent" {
		t.Errorf("after pinning: %s", got)
	}
}

// TestTool runs the extension_manage tool as the model calls it.
func TestTool(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tool := NewTool(f.manager(t))
	var schema map[string]any
	if err := json.Unmarshal(tool.Schema(), &schema); err != nil {
		t.Fatalf("schema: %v", err)
	}
	if tool.Name() != ToolName {
		t.Errorf("name %s", tool.Name())
	}
	res := tool.Run(t.Context(), json.RawMessage(`{"operation":"create","kind":"append_system","content":"Be brief.\n"}`))
	var ok struct {
		OK          bool   `json:"ok"`
		Digest      string `json:"digest"`
		State       string `json:"state"`
		OperationID string `json:"operation_id"`
	}
	if err := json.Unmarshal([]byte(res.Content), &ok); err != nil || res.IsError || !ok.OK || ok.Digest != digestOf("Be brief.\n") || ok.State != "pending_reload" || ok.OperationID != "op-1" {
		t.Errorf("create: %+v %v\n%s", ok, err, res.Content)
	}
	res = tool.Run(t.Context(), json.RawMessage(`{"operation":"replace","kind":"append_system","content":"x","expected_digest":"sha256:`+strings.Repeat("0", 64)+`"}`))
	var bad struct {
		OK       bool   `json:"ok"`
		Category string `json:"category"`
		Field    string `json:"field"`
		Message  string `json:"message"`
	}
	if err := json.Unmarshal([]byte(res.Content), &bad); err != nil || !res.IsError || bad.OK || bad.Category != "stale_revision" || bad.Field != "expected_digest" || bad.Message == "" {
		t.Errorf("stale replace: %+v %v\n%s", bad, err, res.Content)
	}
	res = tool.Run(t.Context(), json.RawMessage(`{"operation":"create","kind":"skill","nme":"x"}`))
	if err := json.Unmarshal([]byte(res.Content), &bad); err != nil || !res.IsError || bad.Category != "unsupported_operation" || bad.Field != "nme" {
		t.Errorf("unknown field: %+v %v\n%s", bad, err, res.Content)
	}
}

func TestNewWithoutUserLayer(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{Layers: []layer.Layer{layer.Bundled()}}); !errors.Is(err, ErrNoUserLayer) {
		t.Errorf("error %v, want ErrNoUserLayer", err)
	}
}

func TestStorageUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	m := f.manager(t)
	if err := os.RemoveAll(f.home); err != nil {
		t.Fatal(err)
	}
	for _, req := range []Request{
		{Operation: OpCreate, Kind: KindAppendSystem, Content: str("x")},
		{Operation: OpList},
	} {
		_, err := m.Apply(t.Context(), req)
		if e, ok := errors.AsType[*Error](err); !ok || e.Category != StorageUnavailable || !strings.Contains(e.Message, "$AERIE_HOME") {
			t.Errorf("%s: %v", req.Operation, err)
		}
	}
	// A lock held elsewhere past the call's deadline.
	g := newFixture(t, nil)
	m = g.manager(t)
	lock, err := os.OpenFile(filepath.Join(g.home, LockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Apply(ctx, Request{Operation: OpCreate, Kind: KindAppendSystem, Content: str("x")}); category(err) != StorageUnavailable || !strings.Contains(err.Error(), "lock") {
		t.Errorf("locked: %v", err)
	}
}
