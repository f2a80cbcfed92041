package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	// Every case runs in its own temp dir laid out as
	//   home/         $AERIE_HOME
	//   ws/a/b/       the workspace and the default working directory
	tests := []struct {
		name      string
		files     map[string]string
		workspace string // relative to the temp dir; default "ws"
		workDir   string // default "ws/a/b"; "-" skips the project search
		want      func(c *Config)
		project   string   // wanted ProjectFile, relative to the temp dir
		warnings  []string // substrings, one per wanted warning
		wantErr   []string // substrings of the error; nil for success
		errIs     error
	}{
		{
			name: "no files gives the defaults",
		},
		{
			name: "global file sets the database and limits",
			files: map[string]string{"home/config.toml": `
# my settings
database_url = "postgres://u:p@db/aerie"
unknown_top = 1
[tool_results]
compress_context = true
max_bytes = 1000
head_bytes = 100
tail_bytes = 200
max_lines = 50
future_key = "kept"
[some_future_section]
x = [1, 2]
`},
			want: func(c *Config) {
				c.DatabaseURL = "postgres://u:p@db/aerie"
				c.ToolResults = ToolResults{CompressContext: true, MaxBytes: 1000, HeadBytes: 100, TailBytes: 200, MaxLines: 50}
			},
		},
		{
			name:     "malformed global file is a warning and the defaults are used",
			files:    map[string]string{"home/config.toml": "database_url = \"postgres://db/x\"\n[tool_results\n"},
			warnings: []string{"home/config.toml:2:"},
		},
		{
			name: "a wrong type in the global file drops the whole file",
			files: map[string]string{"home/config.toml": `database_url = "postgres://db/x"
[tool_results]
max_bytes = "big"
`},
			warnings: []string{"home/config.toml:3:1: tool_results.max_bytes: want an integer, got a string; using the defaults"},
		},
		{
			name:     "an invalid database_url in the global file is a warning",
			files:    map[string]string{"home/config.toml": "\ndatabase_url = \"mysql://db/x\"\n"},
			warnings: []string{"home/config.toml:2:1: database_url: want postgres://"},
		},
		{
			name:     "limits that contradict each other in the global file are a warning",
			files:    map[string]string{"home/config.toml": "[tool_results]\nmax_bytes = 100\n"},
			warnings: []string{"home/config.toml:1:2: tool_results: head_bytes + tail_bytes (24576) exceed max_bytes (100); lower them or raise max_bytes"},
		},
		{
			name:     "a negative limit is out of range",
			files:    map[string]string{"home/config.toml": "tool_results = { max_lines = -1 }\n"},
			warnings: []string{"home/config.toml:1:1: tool_results.max_lines: -1 is out of range"},
		},
		{
			name: "the model's bounds, the project's key overriding the global one",
			files: map[string]string{
				"home/config.toml":          "[model]\nstream_idle_timeout_secs = 30\nmax_answer_bytes = 1048576\n",
				"ws/a/b/.aerie/config.toml": "model.max_answer_bytes = 2048\n",
			},
			want: func(c *Config) {
				c.Model = Model{StreamIdleTimeout: 30 * time.Second, MaxAnswerBytes: 2048}
			},
			project: "ws/a/b/.aerie/config.toml",
		},
		{
			name:     "a zero stream idle timeout is refused",
			files:    map[string]string{"home/config.toml": "[model]\nstream_idle_timeout_secs = 0\n"},
			warnings: []string{"home/config.toml:2:1: model.stream_idle_timeout_secs: 0: want a positive number"},
		},
		{
			name:     "a stream idle timeout over a day is refused",
			files:    map[string]string{"home/config.toml": "[model]\nstream_idle_timeout_secs = 86401\n"},
			warnings: []string{"home/config.toml:2:1: model.stream_idle_timeout_secs: 86401: want at most 86400 seconds"},
		},
		{
			name:     "an answer cap over 1 GiB is out of range",
			files:    map[string]string{"home/config.toml": "[model]\nmax_answer_bytes = 2000000000\n"},
			warnings: []string{"home/config.toml:2:1: model.max_answer_bytes: 2000000000 is out of range; use 1 to 1073741824"},
		},
		{
			name:     "an answer cap of the wrong type",
			files:    map[string]string{"home/config.toml": "[model]\nmax_answer_bytes = \"32M\"\n"},
			warnings: []string{"home/config.toml:2:1: model.max_answer_bytes: want an integer, got a string"},
		},
		{
			name: "project file overrides the global one key by key",
			files: map[string]string{
				"home/config.toml":          "database_url = \"postgres://db/x\"\n[tool_results]\nmax_lines = 7\n",
				"ws/a/b/.aerie/config.toml": "[tool_results]\ncompress_context = true\nproject_only = 1\n",
			},
			want: func(c *Config) {
				c.DatabaseURL = "postgres://db/x"
				c.ToolResults.MaxLines = 7
				c.ToolResults.CompressContext = true
			},
			project: "ws/a/b/.aerie/config.toml",
		},
		{
			name: "search goes upward to the nearest file",
			files: map[string]string{
				"ws/.aerie/config.toml":   "[tool_results]\nmax_lines = 1\n",
				"ws/a/.aerie/config.toml": "[tool_results]\nmax_lines = 2\n",
				"ws/a/b/.aerie/":          "", // a layer directory without config.toml
			},
			want:    func(c *Config) { c.ToolResults.MaxLines = 2 },
			project: "ws/a/.aerie/config.toml",
		},
		{
			name: "search stops at the workspace boundary",
			files: map[string]string{
				".aerie/config.toml": "[tool_results]\nmax_lines = 1\n",
			},
		},
		{
			name: "the workspace root itself is searched",
			files: map[string]string{
				".aerie/config.toml":    "[tool_results]\nmax_lines = 1\n",
				"ws/.aerie/config.toml": "[tool_results]\nmax_lines = 3\n",
			},
			want:    func(c *Config) { c.ToolResults.MaxLines = 3 },
			project: "ws/.aerie/config.toml",
		},
		{
			name:      "without a workspace only the working directory is searched",
			files:     map[string]string{"ws/a/.aerie/config.toml": "[tool_results]\nmax_lines = 2\n"},
			workspace: "-",
		},
		{
			name:    "the .osprey alias is read",
			files:   map[string]string{"ws/a/.osprey/config.toml": "[tool_results]\nmax_lines = 4\n"},
			want:    func(c *Config) { c.ToolResults.MaxLines = 4 },
			project: "ws/a/.osprey/config.toml",
		},
		{
			name: ".aerie wins over .osprey at the same level, with a warning",
			files: map[string]string{
				"ws/a/.aerie/config.toml":  "[tool_results]\nmax_lines = 5\n",
				"ws/a/.osprey/config.toml": "[tool_results]\nmax_lines = 6\n",
			},
			want:     func(c *Config) { c.ToolResults.MaxLines = 5 },
			project:  "ws/a/.aerie/config.toml",
			warnings: []string{"ws/a/.osprey/config.toml: ignored: "},
		},
		{
			name: "a nearer .osprey beats a farther .aerie",
			files: map[string]string{
				"ws/.aerie/config.toml":    "[tool_results]\nmax_lines = 5\n",
				"ws/a/.osprey/config.toml": "[tool_results]\nmax_lines = 6\n",
			},
			want:    func(c *Config) { c.ToolResults.MaxLines = 6 },
			project: "ws/a/.osprey/config.toml",
		},
		{
			name:  "a .aerie file (not a directory) is skipped",
			files: map[string]string{"ws/a/b/.aerie": "not a dir", "ws/a/.aerie/config.toml": "[tool_results]\nmax_lines = 2\n"},
			want:  func(c *Config) { c.ToolResults.MaxLines = 2 }, project: "ws/a/.aerie/config.toml",
		},
		{
			name:    "malformed project file stops launch",
			files:   map[string]string{"ws/a/.aerie/config.toml": "[tool_results]\nmax_lines = = 3\n"},
			wantErr: []string{"ws/a/.aerie/config.toml:2:13: "},
		},
		{
			name:    "a wrong type in the project file stops launch",
			files:   map[string]string{"ws/a/.aerie/config.toml": "\n\ntool_results.compress_context = \"yes\"\n"},
			wantErr: []string{"ws/a/.aerie/config.toml:3:1: tool_results.compress_context: want a boolean, got a string"},
		},
		{
			name: "database_url in a project file stops launch",
			files: map[string]string{
				"ws/a/.aerie/config.toml": "# project\ndatabase_url = \"postgres://evil/x\"\n",
			},
			wantErr: []string{
				"ws/a/.aerie/config.toml:2:1: database_url: a project config cannot replace the database connection; move it to the global config ",
				"home/config.toml",
			},
			errIs: ErrDatabaseURLInProject,
		},
		{
			name: "a malformed global file does not excuse a malformed project file",
			files: map[string]string{
				"home/config.toml":        "=",
				"ws/a/.aerie/config.toml": "=",
			},
			wantErr: []string{"ws/a/.aerie/config.toml:1:1"},
		},
		{
			name: "project limits are checked against the merged configuration",
			files: map[string]string{
				"ws/a/.aerie/config.toml": "[tool_results]\nhead_bytes = 30000\n",
			},
			wantErr: []string{"ws/a/.aerie/config.toml:1:2: tool_results: head_bytes + tail_bytes (42288) exceed max_bytes (32768)"},
		},
		{
			name: "a symlink out of the workspace is refused",
			files: map[string]string{
				"secret/config.toml": "[tool_results]\nmax_lines = 9\n",
				"ws/a/.aerie":        "->../../secret",
			},
			wantErr: []string{"ws/a/.aerie/config.toml: ", "fix or remove it"},
		},
		{
			name: "a symlink inside the workspace is followed",
			files: map[string]string{
				"ws/shared/config.toml": "[tool_results]\nmax_lines = 8\n",
				"ws/a/.aerie":           "->../shared",
			},
			want:    func(c *Config) { c.ToolResults.MaxLines = 8 },
			project: "ws/a/.aerie/config.toml",
		},
		{
			name:      "a working directory outside the workspace is an error",
			files:     map[string]string{"other/": ""},
			workspace: "other",
			wantErr:   []string{"is outside the workspace"},
		},
		{
			name:    "project search can be skipped",
			files:   map[string]string{"ws/a/b/.aerie/config.toml": "database_url = \"x\"\n"},
			workDir: "-",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			testenv.WriteTree(t, dir, map[string]string{"ws/a/b/": ""})
			testenv.WriteTree(t, dir, tt.files)
			home := filepath.Join(dir, "home")
			opts := Options{Home: home, Workspace: filepath.Join(dir, "ws"), WorkDir: filepath.Join(dir, "ws/a/b")}
			switch tt.workspace {
			case "":
			case "-":
				opts.Workspace = ""
			default:
				opts.Workspace = filepath.Join(dir, tt.workspace)
			}
			if tt.workDir == "-" {
				opts.WorkDir = ""
			}

			got, err := Load(opts)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Load() succeeded, want error containing %q", tt.wantErr)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("Load() error = %q, want it to contain %q", err, s)
					}
				}
				if _, ok := errors.AsType[*FileError](err); !ok && !strings.Contains(err.Error(), "outside") {
					t.Errorf("Load() error is %T, want *FileError", err)
				}
				if tt.errIs != nil && !errors.Is(err, tt.errIs) {
					t.Errorf("Load() error = %v, want errors.Is %v", err, tt.errIs)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load(): %v", err)
			}
			want := Defaults(home)
			if tt.want != nil {
				tt.want(&want)
			}
			if diff := cmp.Diff(want, got.Config); diff != "" {
				t.Errorf("Load().Config (-want +got):\n%s", diff)
			}
			if got.GlobalFile != filepath.Join(home, "config.toml") {
				t.Errorf("GlobalFile = %q", got.GlobalFile)
			}
			wantProject := ""
			if tt.project != "" {
				wantProject = filepath.Join(dir, tt.project)
			}
			if got.ProjectFile != wantProject {
				t.Errorf("ProjectFile = %q, want %q", got.ProjectFile, wantProject)
			}
			if len(got.Warnings) != len(tt.warnings) {
				t.Fatalf("Warnings = %q, want %d matching %q", got.Warnings, len(tt.warnings), tt.warnings)
			}
			for i, w := range got.Warnings {
				if !strings.Contains(w.Error(), tt.warnings[i]) {
					t.Errorf("Warnings[%d] = %q, want it to contain %q", i, w, tt.warnings[i])
				}
			}
		})
	}
}
