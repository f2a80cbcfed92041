package skills

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

// toolSet discovers a home layer holding two skills, one with files.
func toolSet(t *testing.T) (*Set, string) {
	t.Helper()
	outside := tree(t, map[string]string{"secret.txt": "runner secret"})
	dir := tree(t, map[string]string{
		"skills/release-notes/SKILL.md":           md("release-notes", "Use when drafting release notes."),
		"skills/release-notes/references/tone.md": "Be brief.",
		"skills/release-notes/scripts/list.sh":    "#!/bin/sh\n",
		"skills/release-notes/leak":               "-> " + filepath.Join(outside, "secret.txt"),
		"skills/other/SKILL.md":                   md("other", "Other things."),
	})
	set, err := Discover(Roots([]layer.Layer{{Name: "home", Dir: dir, Kind: layer.KindHome}}, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	return set, filepath.Join(dir, "skills/release-notes")
}

func TestTool(t *testing.T) {
	t.Parallel()
	set, skillDir := toolSet(t)
	tool := NewTool(set)
	var _ tools.Tool = tool
	var schema map[string]any
	if err := json.Unmarshal(tool.Schema(), &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("schema %s: %v", tool.Schema(), err)
	}
	tests := []struct {
		args    string
		want    string // substring
		isError bool
	}{
		{`{"name":"release-notes"}`, "Skill release-notes\nDirectory: " + skillDir + " (files the skill refers to are relative to it)\n\n---\nname: release-notes\n", false},
		{`{"name":"/release-notes","file":"SKILL.md"}`, "# release-notes\n\nDo the thing.", false},
		{`{"name":"release-notes","file":"references/tone.md"}`, "Be brief.", false},
		{`{"name":"release-notes","file":"./references/../references/tone.md"}`, "Be brief.", false},
		{`{"name":"release-notes","file":"."}`, "Directory . of skill release-notes:\nSKILL.md\nleak\nreferences/\nscripts/\n", false},
		{`{"name":"release-notes","file":"references"}`, "tone.md\n", false},
		{`{"name":"release-notes","file":"../other/SKILL.md"}`, "give a path relative to the skill's directory", true},
		{`{"name":"release-notes","file":"/etc/passwd"}`, "give a path relative to the skill's directory", true},
		{`{"name":"release-notes","file":"leak"}`, "it leads outside the skill's directory", true},
		{`{"name":"release-notes","file":"missing.md"}`, `file "missing.md": no such file in the skill's directory`, true},
		{`{"name":"nope"}`, `skill: skill "nope": not available; available: other, release-notes`, true},
		{`{}`, `missing required argument "name"`, true},
		{`{"name":"x","extra":1}`, `invalid arguments: json: unknown field "extra"`, true},
		{``, `missing required argument "name"`, true},
	}
	for _, tt := range tests {
		r := tool.Run(t.Context(), json.RawMessage(tt.args))
		if r.IsError != tt.isError || !strings.Contains(r.Content, tt.want) {
			t.Errorf("%s: got (%v) %q, want (%v) containing %q", tt.args, r.IsError, r.Content, tt.isError, tt.want)
		}
	}
}

// The content is read when asked for, so an edit is seen at the next
// call, and a removed skill is an error result, not a crash.
func TestToolReadsCurrentContent(t *testing.T) {
	t.Parallel()
	set, skillDir := toolSet(t)
	tool := NewTool(set)
	if err := os.WriteFile(filepath.Join(skillDir, "SKILL.md"), []byte(md("release-notes", "edited")+"New step.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := tool.Run(t.Context(), json.RawMessage(`{"name":"release-notes"}`)); r.IsError || !strings.Contains(r.Content, "New step.") {
		t.Errorf("%v %q", r.IsError, r.Content)
	}
	if err := os.RemoveAll(skillDir); err != nil {
		t.Fatal(err)
	}
	if r := tool.Run(t.Context(), json.RawMessage(`{"name":"release-notes"}`)); !r.IsError || !strings.Contains(r.Content, "read skill release-notes") {
		t.Errorf("%v %q", r.IsError, r.Content)
	}
}

func TestAttach(t *testing.T) {
	t.Parallel()
	set, _ := toolSet(t)
	plugin := tree(t, map[string]string{"checklist/SKILL.md": md("", "Review checklist.")})
	pset, err := Discover(append(Roots(nil, Options{}), Root{Name: "plugin review", Dir: plugin, Namespace: "review"}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		set     *Set
		prompt  string
		want    []string
		wantErr string
	}{
		{set, "/release-notes for v1.2", []string{"release-notes"}, ""},
		{set, "please /release-notes, then /other.", []string{"release-notes", "other"}, ""},
		{set, "/release-notes /release-notes /skill:release-notes", []string{"release-notes"}, ""},
		{set, "/skill:other now", []string{"other"}, ""},
		{set, "(/skill:other)", nil, ""},
		{set, "\t/other\n", []string{"other"}, ""},
		{set, "/release-notes: go", []string{"release-notes"}, ""},
		{set, "look in /tmp and /usr/bin", nil, ""},
		{set, "/other/path is a path", nil, ""},
		{set, "a/other is not a mention", nil, ""},
		{set, "/Other is not a name", nil, ""},
		{set, "/missing stays plain text", nil, ""},
		{set, "/skill: is plain text", nil, ""},
		{set, "/skill:missing", nil, `attach skills: skill "missing": not available; available: other, release-notes`},
		{set, "/skill:Bad_Name.", nil, `skill "Bad_Name": not available`},
		{pset, "/review:checklist and /skill:review:checklist", []string{"review:checklist"}, ""},
		{pset, "/checklist is not its name", nil, ""},
		{nil, "/skill:x", nil, `skill "x": not available; no skills are available`},
		{nil, "/x", nil, ""},
	}
	for _, tt := range tests {
		atts, err := tt.set.Attach(tt.prompt)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrNotAvailable) {
				t.Errorf("%q: error %v, want %q", tt.prompt, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.prompt, err)
			continue
		}
		var names []string
		for _, a := range atts {
			names = append(names, a.Skill.Name)
			if !strings.Contains(a.Content, "description:") {
				t.Errorf("%q: %s content %q", tt.prompt, a.Skill.Name, a.Content)
			}
		}
		if diff := cmp.Diff(tt.want, names); diff != "" {
			t.Errorf("%q (-want +got)\n%s", tt.prompt, diff)
		}
	}
}

func TestMessage(t *testing.T) {
	t.Parallel()
	if got := Message("hello", nil); got != "hello" {
		t.Errorf("%q", got)
	}
	sk := Skill{Name: "a", Dir: "/s/a"}
	got := Message("/a do it", []Attachment{{Skill: sk, Content: "---\ndescription: x\n---\nbody"}})
	want := "The user attached a skill to this message; follow it.\n\n<skill name=\"a\" directory=\"/s/a\">\n---\ndescription: x\n---\nbody\n</skill>\n\n/a do it"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func FuzzAttach(f *testing.F) {
	f.Add("/release-notes please")
	f.Add("/skill:other")
	f.Add("x /skill: /a/b /other.")
	f.Add("/\xff/skill:\xfe")
	dir := filepath.Join(f.TempDir(), "skills")
	testenv.WriteTree(f, dir, map[string]string{"release-notes/SKILL.md": md("", "x"), "other/SKILL.md": md("", "y")})
	set, err := Discover([]Root{{Name: "r", Dir: dir}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, prompt string) {
		atts, err := set.Attach(prompt)
		if err != nil {
			if !errors.Is(err, ErrNotAvailable) || !strings.Contains(prompt, "/skill:") {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, a := range atts {
			if seen[a.Skill.Name] || !strings.Contains(prompt, "/") {
				t.Fatalf("attachments %v", atts)
			}
			seen[a.Skill.Name] = true
		}
		if msg := Message(prompt, atts); !strings.HasSuffix(msg, prompt) {
			t.Fatalf("message lost the prompt")
		}
	})
}
