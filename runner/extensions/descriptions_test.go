package extensions

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

func TestParseDescriptions(t *testing.T) {
	t.Parallel()
	m, err := ParseDescriptions("d.toml", []byte("bash = \"Run it.\"\nword_count = \"\"\"\nCounts.\n\"\"\"\n\"mcp__x__y\" = \"z\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bash": "Run it.", "word_count": "Counts.\n", "mcp__x__y": "z"}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for doc, msg := range map[string]string{
		"bash = 1\n":                  "d.toml:1: bash: want a string (the description), got an integer",
		"[bash]\ndescription = 'x'\n": "bash: want a string (the description), got a table",
		"bash = ' '\n":                "bash: the description is empty",
		"bash = \n":                   "d.toml:1",
	} {
		if _, err := ParseDescriptions("d.toml", []byte(doc)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: err = %v, want %q", doc, err, msg)
		}
	}
}

func TestDescriptionPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		env   string
		// bundled adds a layer of kind bundled at bundled/ after home.
		bundled bool
		want    string // bash's override, "" for none
		source  string // relative to the temporary directory
	}{
		{name: "none", want: ""},
		{
			name:   "nearest wins",
			files:  map[string]string{"ws/a/.aerie/tool-descriptions.toml": "bash = 'near'", "ws/.aerie/tool-descriptions.toml": "bash = 'far'", "home/tool-descriptions.toml": "bash = 'home'"},
			want:   "near",
			source: "ws/a/.aerie/tool-descriptions.toml",
		},
		{
			name:   "environment file wins",
			files:  map[string]string{"ws/.aerie/tool-descriptions.toml": "bash = 'layered'", "env.toml": "bash = 'env'"},
			env:    "env.toml",
			want:   "env",
			source: "env.toml",
		},
		{
			name:   "malformed environment file: the layered file",
			files:  map[string]string{"ws/.aerie/tool-descriptions.toml": "bash = 'layered'", "env.toml": "bash = "},
			env:    "env.toml",
			want:   "layered",
			source: "ws/.aerie/tool-descriptions.toml",
		},
		{
			name:    "malformed nearest file: the bundled descriptions, not a farther file",
			files:   map[string]string{"ws/.aerie/tool-descriptions.toml": "bash = 1", "home/tool-descriptions.toml": "bash = 'home'", "bundled/tool-descriptions.toml": "bash = 'bundled'"},
			bundled: true,
			want:    "bundled",
			source:  "bundled/tool-descriptions.toml",
		},
		{
			name:  "malformed nearest file without bundled descriptions: the tools' own",
			files: map[string]string{"ws/.aerie/tool-descriptions.toml": "bash = 1", "home/tool-descriptions.toml": "bash = 'home'"},
			want:  "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			testenv.WriteTree(t, dir, tt.files)
			src := promptLayers(t, dir)
			if tt.bundled {
				n := len(src.Layers) - 1
				src.Layers = append(src.Layers[:n:n], layer.Layer{Name: "bundled", Dir: filepath.Join(dir, "bundled"), Kind: layer.KindBundled})
			}
			if tt.env != "" {
				src.Getenv = func(k string) string {
					if k == ToolDescriptionsFileEnv {
						return filepath.Join(dir, tt.env)
					}
					return ""
				}
			}
			d, arts, err := LoadDescriptions(src)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := d.Lookup("bash")
			if got != tt.want {
				t.Errorf("bash = %q, want %q", got, tt.want)
			}
			if src := filepath.Join(dir, tt.source); tt.source != "" && d.Source != src {
				t.Errorf("source = %s, want %s", d.Source, src)
			}
			for _, a := range arts {
				if a.Status != layer.StatusActive && a.Reason == "" {
					t.Errorf("%s is %s without a reason", a.Path, a.Status)
				}
			}
		})
	}
}

func TestDescriptionsApply(t *testing.T) {
	t.Parallel()
	d := Descriptions{m: map[string]string{"bash": "custom"}}
	bash := tools.NewBash(nil, nil)
	got := d.Apply(bash)
	if got.Description() != "custom" || got.Name() != "bash" || string(got.Schema()) != string(bash.Schema()) {
		t.Errorf("applied: %s %q", got.Name(), got.Description())
	}
	rf := tools.NewReadFile(nil)
	if d.Apply(rf) != tools.Tool(rf) {
		t.Error("a tool without an override was wrapped")
	}
	// The wrapper still runs the tool.
	res := got.Run(context.Background(), json.RawMessage(`{"command": 1}`))
	if !res.IsError || !strings.Contains(res.Content, "bash: invalid arguments") {
		t.Errorf("run through the wrapper: %+v", res)
	}
}
