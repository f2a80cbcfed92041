package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/store"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"
)

func TestSetTopLevelString(t *testing.T) {
	t.Parallel()
	const v = "postgres://db/new"
	const kv = `database_url = "postgres://db/new"`
	tests := []struct {
		name    string
		doc     string
		want    string
		wantErr string
	}{
		{name: "empty file", doc: "", want: kv + "\n"},
		{name: "comments only: after them", doc: "# aerie\n# global\n", want: "# aerie\n# global\n" + kv + "\n"},
		{name: "comment without final newline", doc: "# aerie", want: "# aerie\n" + kv + "\n"},
		{
			name: "replace keeps the trailing comment and neighbours",
			doc:  "# top\ndatabase_url = \"sqlite:///old.db\"   # was sqlite\nx = 1\n",
			want: "# top\ndatabase_url = \"postgres://db/new\"   # was sqlite\nx = 1\n",
		},
		{name: "replace keeps odd spacing", doc: "database_url='old'\n", want: "database_url=\"postgres://db/new\"\n"},
		{name: "replace a tabbed value", doc: "database_url\t=\t\"old\"\n", want: "database_url\t=\t\"postgres://db/new\"\n"},
		{name: "replace a quoted key", doc: "\"database_url\" = \"old\"\n", want: "\"database_url\" = \"postgres://db/new\"\n"},
		{
			name: "replace a multi-line string",
			doc:  "database_url = \"\"\"\nold\n\"\"\"\nnext = true\n",
			want: kv + "\nnext = true\n",
		},
		{
			name: "replace a value of the wrong type",
			doc:  "database_url = [\n  1, # one\n  2,\n]\n",
			want: kv + "\n",
		},
		{
			name: "insert after the last top-level key, not in a table",
			doc:  "a = 1\n# between\nb = 2 # note\n\n# about t\n[t]\ndatabase_url = \"in a table\"\n",
			want: "a = 1\n# between\nb = 2 # note\n" + kv + "\n\n# about t\n[t]\ndatabase_url = \"in a table\"\n",
		},
		{
			name: "insert after a last key without a final newline",
			doc:  "a = 1",
			want: "a = 1\n" + kv + "\n",
		},
		{
			name: "insert after a multi-line array",
			doc:  "a = [\n  1,\n  # c\n]\n[t]\n",
			want: "a = [\n  1,\n  # c\n]\n" + kv + "\n[t]\n",
		},
		{
			name: "insert before a table, after the file's leading comments",
			doc:  "# aerie config\n\n# tool results\n[tool_results]\nmax_lines = 1\n",
			want: "# aerie config\n\n" + kv + "\n\n# tool results\n[tool_results]\nmax_lines = 1\n",
		},
		{name: "insert before a first table", doc: "[t]\nx = 1\n", want: kv + "\n\n[t]\nx = 1\n"},
		{name: "insert before an indented array of tables", doc: "  [[t]]\n", want: kv + "\n\n  [[t]]\n"},
		{
			name: "CRLF files get CRLF lines",
			doc:  "a = 1\r\n[t]\r\nb = 2\r\n",
			want: "a = 1\r\n" + kv + "\r\n[t]\r\nb = 2\r\n",
		},
		{name: "malformed file is refused", doc: "a = 1\n[t\n", wantErr: "config.toml:2:"},
		{name: "database_url table is refused", doc: "x = 1\n[database_url]\nhost = \"db\"\n", wantErr: "config.toml:2:2: database_url: is a table, not a string"},
		{name: "dotted database_url is refused", doc: "database_url.host = \"db\"\n", wantErr: "config.toml:1:1: database_url: is a table"},
		{name: "array of database_url tables is refused", doc: "[[database_url]]\n", wantErr: "database_url: is a table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := setTopLevelString("config.toml", []byte(tt.doc), "database_url", v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("setTopLevelString() error = %v, want it to contain %q", err, tt.wantErr)
				}
				if _, ok := errors.AsType[*FileError](err); !ok {
					t.Errorf("error is %T, want *FileError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("setTopLevelString(): %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("setTopLevelString() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain", `"plain"`},
		{`sqlite:///C:\aerie\s.db`, `"sqlite:///C:\\aerie\\s.db"`},
		{`postgres://u:p"q#r@db/x`, `"postgres://u:p\"q#r@db/x"`},
		{"a\tb\nc\rd\be\ff", `"a\tb\nc\rd\be\ff"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001F\u007F"`},
		{"ünïcødé ✓ 'single'", `"ünïcødé ✓ 'single'"`},
		{`"""`, `"\"\"\""`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got := quote(tt.in)
			if got != tt.want {
				t.Errorf("quote(%q) = %s, want %s", tt.in, got, tt.want)
			}
			var m map[string]string
			if err := toml.Unmarshal([]byte("k = "+got), &m); err != nil || m["k"] != tt.in {
				t.Errorf("quote(%q) does not round-trip: %q, %v", tt.in, m["k"], err)
			}
		})
	}
}

func TestSaveDatabaseURL(t *testing.T) {
	t.Parallel()
	const url = "postgres://u:p@db/aerie"
	tests := []struct {
		name     string
		existing string // "" for no file
		mode     os.FileMode
		symlink  bool // config.toml is a link to ../dotfiles/aerie.toml
		url      string
		want     string
		wantMode os.FileMode
		wantErr  string
	}{
		{
			name:     "new home and file are private",
			want:     `database_url = "postgres://u:p@db/aerie"` + "\n",
			wantMode: 0o600,
		},
		{
			name:     "an existing file keeps its mode, comments and unknown keys",
			existing: "# mine\nfuture = { a = 1 }\n\n[tool_results]\ncompress_context = true # on\n",
			mode:     0o640,
			want:     "# mine\nfuture = { a = 1 }\ndatabase_url = \"postgres://u:p@db/aerie\"\n\n[tool_results]\ncompress_context = true # on\n",
			wantMode: 0o640,
		},
		{
			name:     "a symlinked file is edited where it points",
			existing: "database_url = \"sqlite:///old.db\"\n",
			mode:     0o644,
			symlink:  true,
			want:     `database_url = "postgres://u:p@db/aerie"` + "\n",
			wantMode: 0o644,
		},
		{
			name:     "an unusable URL is refused before touching the file",
			existing: "# keep\n",
			mode:     0o644,
			url:      "mysql://db/x",
			want:     "# keep\n",
			wantMode: 0o644,
			wantErr:  "save database_url: want postgres://",
		},
		{
			name:     "a malformed file is left alone",
			existing: "[broken\n",
			mode:     0o644,
			want:     "[broken\n",
			wantMode: 0o644,
			wantErr:  "config.toml:1:",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			home := filepath.Join(dir, "home", ".aerie")
			file := filepath.Join(home, "config.toml")
			target := file
			if tt.existing != "" {
				if tt.symlink {
					target = filepath.Join(dir, "dotfiles", "aerie.toml")
				}
				for _, d := range []string{home, filepath.Dir(target)} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(target, []byte(tt.existing), tt.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(target, tt.mode); err != nil { // past the umask
					t.Fatal(err)
				}
				if tt.symlink {
					if err := os.Symlink("../../dotfiles/aerie.toml", file); err != nil {
						t.Fatal(err)
					}
				}
			}
			u := tt.url
			if u == "" {
				u = url
			}

			gotFile, err := SaveDatabaseURL(home, u)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("SaveDatabaseURL() error = %v, want it to contain %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("SaveDatabaseURL(): %v", err)
			}
			if gotFile != file {
				t.Errorf("SaveDatabaseURL() file = %q, want %q", gotFile, file)
			}

			got, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("file content (-want +got):\n%s", diff)
			}
			fi, err := os.Stat(target)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tt.wantMode {
				t.Errorf("file mode = %v, want %v", fi.Mode().Perm(), tt.wantMode)
			}
			if tt.symlink {
				if li, err := os.Lstat(file); err != nil || li.Mode()&os.ModeSymlink == 0 {
					t.Errorf("config.toml is no longer a symlink: %v, %v", li, err)
				}
			}
			if tt.existing == "" {
				hi, err := os.Stat(home)
				if err != nil {
					t.Fatal(err)
				}
				if hi.Mode().Perm() != 0o700 {
					t.Errorf("home mode = %v, want 0700", hi.Mode().Perm())
				}
			}
			entries, err := os.ReadDir(filepath.Dir(target))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temp file left behind: %s", e.Name())
				}
			}
		})
	}
}

func TestSaveThenLoad(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	url := store.SQLiteURL(filepath.Join(home, "odd \"name\" #1.db"))
	if _, err := SaveDatabaseURL(home, url); err != nil {
		t.Fatal(err)
	}
	got, err := Load(Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Warnings) != 0 || got.Config.DatabaseURL != url {
		t.Errorf("Load() after save = %q, warnings %v; want %q", got.Config.DatabaseURL, got.Warnings, url)
	}
}
