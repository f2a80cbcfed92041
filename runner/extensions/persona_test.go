package extensions

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

func TestParsePersona(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc string
		want      Persona
		err       string
	}{
		{name: "full", doc: "description = \"Reviews.\"\nprompt = \"\"\"\nYou review.\n\n\"\"\"\ntoolset = \"readonly\"\n",
			want: Persona{Description: "Reviews.", Prompt: "You review.", Toolset: "readonly", Path: "p.toml"}},
		{name: "prompt only", doc: "prompt = 'Terse.'", want: Persona{Prompt: "Terse.", Path: "p.toml"}},
		{name: "no prompt", doc: "toolset = \"readonly\"\n", err: "p.toml: prompt: missing"},
		{name: "blank prompt", doc: "prompt = \"  \\n\"\n", err: "p.toml:1: prompt: missing"},
		{name: "unknown key", doc: "prompt = \"x\"\ntoolsets = \"a\"\n", err: "p.toml:2:1: toolsets: unknown key"},
		{name: "wrong type", doc: "prompt = 3\n", err: "p.toml:1:10: prompt: want a string, got an integer"},
		{name: "padded toolset", doc: "prompt = \"x\"\ntoolset = \" a\"\n", err: "p.toml:2: toolset: \" a\" has blank space"},
		{name: "not UTF-8", doc: "prompt = \"\xff\"", err: "p.toml: not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePersona("p.toml", []byte(tc.doc))
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("error %v, want one starting %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("persona (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParsePersona: the parser never panics, and what it accepts has a
// prompt.
func FuzzParsePersona(f *testing.F) {
	for _, s := range []string{
		"prompt = 'x'",
		"description = \"d\"\nprompt = \"\"\"\nmulti\nline\n\"\"\"\ntoolset = \"readonly\"\n",
		"prompt = \"\"",
		"toolset = 3",
		"[prompt]\nx = 1",
		"prompt = 'a'\nprompt = 'b'",
		"\xff",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := ParsePersona("personas/x.toml", doc)
		if err != nil {
			var fe *layer.FileError
			if !errors.As(err, &fe) || fe.Path != "personas/x.toml" {
				t.Fatalf("error %v does not name the file", err)
			}
			return
		}
		if strings.TrimSpace(p.Prompt) == "" {
			t.Fatalf("accepted a persona without a prompt: %q", doc)
		}
	})
}

func TestLoadPersona(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	outside := t.TempDir()
	testenv.WriteTree(t, outside, map[string]string{"environ": "ANTHROPIC_API_KEY=sk-ant-secret"})
	testenv.WriteTree(t, ws, map[string]string{
		".aerie/personas/reviewer.toml": "prompt = 'Project reviewer.'\n",
		".aerie/personas/broken.toml":   "prompt = \n",
		".aerie/personas/leak.toml":     "->" + filepath.Join(outside, "environ"),
		"spec/personas/reviewer.toml":   "prompt = 'Spec reviewer.'\ntoolset = 'readonly'\n",
		"spec/personas/broken.toml":     "prompt = 'Spec fallback.'\n",
		"spec/personas/leak.toml":       "prompt = 'Not leaked.'\n",
		"bad/personas/bad.toml":         "prompt = 1\n",
		"bad/personas/default.toml":     "prompt = 'Platform default.'\n",
	})
	spec := layer.Layer{Name: "spec", Kind: layer.KindSpec, Dir: filepath.Join(ws, "spec")}
	bad := layer.Layer{Name: "bad", Kind: layer.KindPlatform, Dir: filepath.Join(ws, "bad")}
	src := layer.Source{Layers: []layer.Layer{project(ws, ".aerie"), spec, bad}, Workspace: ws}

	p, arts, err := LoadPersona(src, "reviewer")
	if err != nil || p.Prompt != "Project reviewer." || p.Toolset != "" || p.Path != filepath.Join(ws, ".aerie/personas/reviewer.toml") {
		t.Errorf("reviewer: %+v, %v", p, err)
	}
	if len(arts) != 2 || arts[0].Status != layer.StatusActive || arts[1].Status != layer.StatusShadowed {
		t.Errorf("reviewer artifacts %+v", arts)
	}

	// A broken project file is skipped for the next valid one; so is a
	// link out of the workspace, which is never read.
	for _, name := range []string{"broken", "leak"} {
		p, arts, err = LoadPersona(src, name)
		if err != nil || p.Path != filepath.Join(ws, "spec/personas", name+".toml") || arts[0].Status != layer.StatusSkipped {
			t.Errorf("%s: %+v, %+v, %v", name, p, arts, err)
		}
		if strings.Contains(p.Prompt, "secret") || strings.Contains(arts[0].Reason, "secret") {
			t.Errorf("%s: read outside the workspace: %+v", name, arts[0])
		}
	}

	// A broken file in a layer the submitter controls is an error.
	if _, _, err := LoadPersona(src, "bad"); err == nil || !strings.Contains(err.Error(), "bad.toml:1:10: prompt: want a string") {
		t.Errorf("bad: %v", err)
	}
	if _, _, err := LoadPersona(src, "nobody"); !errors.Is(err, ErrUnknownPersona) || !strings.Contains(err.Error(), `"spec", "bad"`) {
		t.Errorf("nobody: %v", err)
	}
	if _, _, err := LoadPersona(src, "../etc"); err == nil || !strings.Contains(err.Error(), "want 1-63 letters") {
		t.Errorf("../etc: %v", err)
	}

	// The default persona: a layer's file, or the caller's prompt.
	if p, _, err := LoadPersona(src, ""); err != nil || p.Name != DefaultPersona || p.Prompt != "Platform default." {
		t.Errorf("default with a file: %+v, %v", p, err)
	}
	if p, arts, err := LoadPersona(layer.Source{Layers: []layer.Layer{spec}}, ""); err != nil || p != (Persona{Name: DefaultPersona}) || len(arts) != 0 {
		t.Errorf("default without a file: %+v, %+v, %v", p, arts, err)
	}
}

// TestValidPersonaName checks the name rule against the pattern it states,
// spec.persona's.
func TestValidPersonaName(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	for _, name := range []string{"", "a", "Reviewer", "code-review.v2", "a_b", "-a", ".a", "_a", "a b", "a/b", "é", "0", strings.Repeat("a", 63), strings.Repeat("a", 64), "a\n", "\x00", ".."} {
		if got, want := ValidPersonaName(name), pattern.MatchString(name); got != want {
			t.Errorf("ValidPersonaName(%q) = %v, want %v", name, got, want)
		}
	}
}

func FuzzValidPersonaName(f *testing.F) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	for _, s := range []string{"", "a", "code-review.v2", "-a", strings.Repeat("a", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := ValidPersonaName(name), pattern.MatchString(name); got != want {
			t.Errorf("ValidPersonaName(%q) = %v, want %v", name, got, want)
		}
	})
}
