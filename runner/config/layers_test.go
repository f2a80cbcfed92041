package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/plugins"
)

func TestLoadLayers(t *testing.T) {
	t.Parallel()
	// Every case runs in its own temp dir laid out as a runner pod:
	//   layers/spec/ layers/ns/ layers/platform/   the mounted layers
	//   ws/a/                                      the workspace and working directory
	tests := []struct {
		name    string
		files   map[string]string
		noWork  bool // skip the project search
		want    func(c *Config)
		project string   // wanted ProjectFile, relative to the temp dir
		applied []string // wanted LayerFiles, relative to the temp dir
		wantErr []string // substrings of the error; nil for success
		errIs   error
	}{
		{
			name: "no files gives the spec's defaults",
		},
		{
			name: "subagent limits layer key by key",
			files: map[string]string{
				"layers/platform/config.toml": "[subagents]\nmax_concurrent = 2\nmax_total = 10\n",
				"layers/spec/config.toml":     "[subagents]\nmax_depth = 1\n",
			},
			want: func(c *Config) {
				c.Subagents = Subagents{MaxConcurrent: 2, MaxDepth: 1, MaxTotal: 10}
			},
			applied: []string{"layers/spec/config.toml", "layers/platform/config.toml"},
		},
		{
			name: "the model's bounds layer key by key",
			files: map[string]string{
				"layers/platform/config.toml": "[model]\nstream_idle_timeout_secs = 60\nmax_answer_bytes = 1000000\n",
				"layers/spec/config.toml":     "[model]\nmax_answer_bytes = 5000\n",
			},
			want: func(c *Config) {
				c.Model = Model{StreamIdleTimeout: time.Minute, MaxAnswerBytes: 5000}
			},
			applied: []string{"layers/spec/config.toml", "layers/platform/config.toml"},
		},
		{
			name: "a layer's plugins.components, a nearer one's replaces it",
			files: map[string]string{
				"layers/platform/config.toml": "[plugins]\ncomponents = [\"all\"]\n",
				"layers/spec/config.toml":     "[plugins]\ncomponents = [\"hooks\", \"skills\", \"hooks\"]\n",
			},
			want: func(c *Config) {
				c.Plugins.Components = plugins.Components{plugins.ComponentSkills, plugins.ComponentHooks}
			},
			applied: []string{"layers/spec/config.toml", "layers/platform/config.toml"},
		},
		{
			name:    "an unknown plugin component names the key, the item and the names allowed",
			files:   map[string]string{"layers/ns/config.toml": "[plugins]\ncomponents = [\"skills\", \"lsp\"]\n"},
			wantErr: []string{"config.toml:2:1: plugins.components: item 1: unknown component \"lsp\"; want skills, agents, commands, hooks, mcp or all"},
		},
		{
			name:    "a negative subagent limit names its key",
			files:   map[string]string{"layers/spec/config.toml": "[subagents]\nmax_depth = -1\n"},
			wantErr: []string{"subagents.max_depth", "-1: want 0 or more", "config.toml:2:1"},
		},
		{
			name: "nearer layers override farther ones key by key",
			files: map[string]string{
				"layers/platform/config.toml": "[tool_results]\nmax_bytes = 9000\nhead_bytes = 100\ntail_bytes = 100\nmax_lines = 50\n[compaction]\nmodel = \"small\"\n",
				"layers/ns/config.toml":       "[tool_results]\nmax_lines = 40\n[plugins]\ndisabled = [\"a\"]\n",
				"layers/spec/config.toml":     "[tool_results]\nmax_bytes = 8000\n",
			},
			want: func(c *Config) {
				c.ToolResults = ToolResults{MaxBytes: 8000, HeadBytes: 100, TailBytes: 100, MaxLines: 40}
				c.Plugins.Disabled = []string{"a"}
				c.Compaction.Model = "small"
			},
			applied: []string{"layers/spec/config.toml", "layers/ns/config.toml", "layers/platform/config.toml"},
		},
		{
			name: "a layer's [moa] reaches the pod, a nearer one's keys override it",
			files: map[string]string{
				"layers/platform/config.toml": "[moa]\nreference_models = [\"anthropic:a\", \"openai:b\"]\naggregator_model = \"agg\"\n",
				"layers/spec/config.toml":     "[moa]\nreference_models = [\"c\"]\n",
			},
			want: func(c *Config) {
				c.MoA = MoA{ReferenceModels: []ModelRef{{Model: "c"}}, AggregatorModel: ModelRef{Model: "agg"}}
			},
			applied: []string{"layers/spec/config.toml", "layers/platform/config.toml"},
		},
		{
			name:    "a layer's [moa] with an unknown provider stops the launch",
			files:   map[string]string{"layers/ns/config.toml": "[moa]\nreference_models = [\"vertex:gemini\"]\n"},
			wantErr: []string{"config.toml:2:1: moa.reference_models: item 0:", `unknown provider "vertex"`},
		},
		{
			name: "the project file overrides the layers, but only adds disabled plugins",
			files: map[string]string{
				"layers/ns/config.toml":     "[tool_results]\nmax_lines = 40\n[plugins]\ndisabled = [\"a\", \"b\"]\n",
				"ws/a/.aerie/config.toml":   "[tool_results]\nmax_lines = 3\n[plugins]\ndisabled = [\"c\", \"a\"]\n",
				"ws/.aerie/config.toml":     "[tool_results]\nmax_lines = 99\n",
				"layers/spec/unrelated.txt": "",
			},
			want: func(c *Config) {
				c.ToolResults.MaxLines = 3
				c.Plugins.Disabled = []string{"a", "b", "c"}
			},
			project: "ws/a/.aerie/config.toml",
			applied: []string{"layers/ns/config.toml"},
		},
		{
			name:   "without the project search only the layers count",
			files:  map[string]string{"ws/a/.aerie/config.toml": "[tool_results]\nmax_lines = 3\n"},
			noWork: true,
		},
		{
			name:    "a malformed layer file names the layer and the key",
			files:   map[string]string{"layers/ns/config.toml": "\n[tool_results]\nmax_bytes = \"big\"\n"},
			wantErr: []string{"namespace layer team (configmap/team): ", "layers/ns/config.toml:3:1: tool_results.max_bytes: want an integer, got a string"},
		},
		{
			name:    "a syntax error in a layer file names the layer",
			files:   map[string]string{"layers/platform/config.toml": "[tool_results\n"},
			wantErr: []string{"platform layer base (configmap/base from configmap/aerie-system/base): ", "layers/platform/config.toml:1:"},
		},
		{
			name:    "database_url in a layer file stops launch",
			files:   map[string]string{"layers/spec/config.toml": "database_url = \"postgres://elsewhere/x\"\n"},
			wantErr: []string{"spec layer spec[0]: ", "config.toml:1:1: database_url: a layer config cannot replace the database connection; a runner's session store is the controller's --database-secret"},
			errIs:   ErrDatabaseURLInLayer,
		},
		{
			name:    "database_url in the project file stops launch",
			files:   map[string]string{"ws/a/.aerie/config.toml": "database_url = \"postgres://elsewhere/x\"\n"},
			wantErr: []string{"ws/a/.aerie/config.toml:1:1: database_url: a project config cannot replace the database connection"},
			errIs:   ErrDatabaseURLInProject,
		},
		{
			name: "limits are checked against what the farther layers set",
			files: map[string]string{
				"layers/platform/config.toml": "[tool_results]\nmax_bytes = 1000\nhead_bytes = 400\ntail_bytes = 400\n",
				"layers/ns/config.toml":       "[tool_results]\nmax_bytes = 500\n",
			},
			wantErr: []string{"namespace layer team (configmap/team): ", "layers/ns/config.toml:1:2: tool_results: head_bytes + tail_bytes (800) exceed max_bytes (500)"},
		},
		{
			name:    "an empty compaction model is refused",
			files:   map[string]string{"layers/spec/config.toml": "[compaction]\nmodel = \"\"\n"},
			wantErr: []string{"config.toml:2:1: compaction.model: empty"},
		},
		{
			name: "a link out of a layer is refused",
			files: map[string]string{
				"secret.toml":             "[tool_results]\nmax_lines = 9\n",
				"layers/spec/config.toml": "->../../secret.toml",
			},
			wantErr: []string{"spec layer spec[0]: ", "layers/spec/config.toml: "},
		},
		{
			name:  "zero caps turn capping off",
			files: map[string]string{"layers/ns/config.toml": "[tool_results]\nmax_bytes = 0\nmax_lines = 0\n"},
			want:  func(c *Config) { c.ToolResults.MaxBytes = 0 },
			applied: []string{
				"layers/ns/config.toml",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			testenv.WriteTree(t, dir, map[string]string{"ws/a/": "", "layers/spec/": "", "layers/ns/": "", "layers/platform/": ""})
			testenv.WriteTree(t, dir, tt.files)
			project, err := layer.ProjectLayers(filepath.Join(dir, "ws"), filepath.Join(dir, "ws/a"))
			if err != nil {
				t.Fatal(err)
			}
			opts := LayerOptions{
				Layers: append(project,
					layer.Layer{Name: "spec[0]", Kind: layer.KindSpec, Dir: filepath.Join(dir, "layers/spec")},
					layer.Layer{Name: "team", Kind: layer.KindNamespace, Dir: filepath.Join(dir, "layers/ns"), Source: "configmap/team"},
					layer.Layer{Name: "base", Kind: layer.KindPlatform, Dir: filepath.Join(dir, "layers/platform"), Source: "configmap/base from configmap/aerie-system/base"},
				),
				Workspace: filepath.Join(dir, "ws"),
				WorkDir:   filepath.Join(dir, "ws/a"),
			}
			if tt.noWork {
				opts.WorkDir = ""
			}

			got, err := LoadLayers(opts)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("LoadLayers() succeeded, want error containing %q", tt.wantErr)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("LoadLayers() error = %q, want it to contain %q", err, s)
					}
				}
				if _, ok := errors.AsType[*FileError](err); !ok {
					t.Errorf("LoadLayers() error is %T, want *FileError", err)
				}
				if tt.errIs != nil && !errors.Is(err, tt.errIs) {
					t.Errorf("LoadLayers() error = %v, want errors.Is %v", err, tt.errIs)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadLayers(): %v", err)
			}
			want := Config{ToolResults: ToolResults{
				MaxBytes: DefaultToolResultMaxBytes, HeadBytes: DefaultToolResultHeadBytes, TailBytes: DefaultToolResultTailBytes,
			}, Model: Defaults("").Model, Subagents: Defaults("").Subagents}
			if tt.want != nil {
				tt.want(&want)
			}
			if diff := cmp.Diff(want, got.Config); diff != "" {
				t.Errorf("LoadLayers().Config (-want +got):\n%s", diff)
			}
			wantProject := ""
			if tt.project != "" {
				wantProject = filepath.Join(dir, tt.project)
			}
			if got.ProjectFile != wantProject {
				t.Errorf("ProjectFile = %q, want %q", got.ProjectFile, wantProject)
			}
			var applied []string
			for _, f := range tt.applied {
				applied = append(applied, filepath.Join(dir, f))
			}
			if diff := cmp.Diff(applied, got.LayerFiles); diff != "" {
				t.Errorf("LayerFiles (-want +got):\n%s", diff)
			}
			if len(got.Warnings) != 0 {
				t.Errorf("Warnings = %q, want none", got.Warnings)
			}
		})
	}
}
