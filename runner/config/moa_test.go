package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"

	"github.com/aerie-run/aerie/runner/transcript"
)

func TestParseModelRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, wantErr string
		want        ModelRef
	}{
		{in: "claude-haiku-4-5", want: ModelRef{Model: "claude-haiku-4-5"}},
		{in: " anthropic:claude-opus-4-1 ", want: ModelRef{Provider: "anthropic", Model: "claude-opus-4-1"}},
		{in: "openai-compatible:llama3:8b", want: ModelRef{Provider: "openai-compatible", Model: "llama3:8b"}},
		{in: "scripted:plan", want: ModelRef{Provider: "scripted", Model: "plan"}},
		{in: "", wantErr: "empty"},
		{in: "llama3:8b", wantErr: `unknown provider "llama3"; want one of anthropic, openai, openai-compatible, scripted`},
		{in: "openai:", wantErr: "no model after the provider"},
	} {
		got, err := ParseModelRef(tc.in)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseModelRef(%q) error = %v, want %q", tc.in, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("ParseModelRef(%q) = %+v, %v, want %+v", tc.in, got, err, tc.want)
		}
		if err == nil {
			if back, err := ParseModelRef(got.String()); err != nil || back != got {
				t.Errorf("ParseModelRef(%q.String()) = %+v, %v", tc.in, back, err)
			}
		}
	}
}

// TestLoadMoA: the project file's [moa] overrides the global file's key by
// key, and a bad one names the file, the line and the key.
func TestLoadMoA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, map[string]string{
		"home/config.toml":      "[moa]\nreference_models = [\"anthropic:a\"]\naggregator_model = \"openai:agg\"\n",
		"ws/.aerie/config.toml": "[moa]\nreference_models = [\"b\", \"openai:c\"]\n",
	})
	got, err := Load(Options{Home: filepath.Join(dir, "home"), WorkDir: filepath.Join(dir, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	want := MoA{
		ReferenceModels: []ModelRef{{Model: "b"}, {Provider: "openai", Model: "c"}},
		AggregatorModel: ModelRef{Provider: "openai", Model: "agg"},
	}
	if diff := cmp.Diff(want, got.Config.MoA); diff != "" {
		t.Errorf("MoA (-want +got):\n%s", diff)
	}
	refs, agg := got.Config.MoA.Models()
	if diff := cmp.Diff([]transcript.Settings{{Model: "b"}, {Provider: "openai", Model: "c"}}, refs); diff != "" ||
		agg != (transcript.Settings{Provider: "openai", Model: "agg"}) {
		t.Errorf("Models() = %v, %v", refs, agg)
	}

	testenv.WriteTree(t, dir, map[string]string{"ws/.aerie/config.toml": "# models\n[moa]\nreference_models = \"b\"\n"})
	_, err = Load(Options{Home: filepath.Join(dir, "home"), WorkDir: filepath.Join(dir, "ws")})
	if err == nil || !strings.Contains(err.Error(), "config.toml:3:1: moa.reference_models: want an array, got a string") {
		t.Errorf("Load error = %v, want the key placed", err)
	}
}
