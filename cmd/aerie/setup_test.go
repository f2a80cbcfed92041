package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/store"

	"github.com/aerie-run/aerie/runner/config"
)

// A PostgreSQL URL nothing listens on: port 1 on loopback refuses at once.
const (
	unreachablePassword = "s3cretPW"
	unreachableURL      = "postgres://aerie:" + unreachablePassword + "@127.0.0.1:1/aerie?sslmode=disable&connect_timeout=5"
)

// existingConfig is a global config a person wrote by hand.
const existingConfig = `# my aerie settings
# (keep this comment)

[tool_results]
compress_context = true   # I like it small
future_knob = "unknown to this version"

[[future.tables]]
name = "x"
`

// withSavedURL is existingConfig after setup saved url.
func withSavedURL(url string) string {
	return "# my aerie settings\n# (keep this comment)\n\ndatabase_url = \"" + url + "\"\n\n" +
		strings.TrimPrefix(existingConfig, "# my aerie settings\n# (keep this comment)\n\n")
}

func writeConfig(t *testing.T, home, content string) {
	t.Helper()
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config.GlobalFile(home), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func assertNoPassword(t *testing.T, r result, password string) {
	t.Helper()
	for name, s := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
		if strings.Contains(s, password) {
			t.Errorf("%s shows the password:\n%s", name, s)
		}
	}
	if r.err != nil && strings.Contains(r.err.Error(), password) {
		t.Errorf("error shows the password: %v", r.err)
	}
}

func TestSetupSQLite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     func(dir string) []string
		terminal bool
		stdin    string
		dbPath   func(dir, home string) string
	}{
		{
			name: "flags create the file and its directories",
			args: func(dir string) []string {
				return []string{"setup", "--sqlite", filepath.Join(dir, "data", "deep", "s.db"), "--yes"}
			},
			dbPath: func(dir, _ string) string { return filepath.Join(dir, "data", "deep", "s.db") },
		},
		{
			name: "--database-url with a sqlite: path",
			args: func(dir string) []string {
				return []string{"setup", "--database-url", "sqlite:" + filepath.Join(dir, "u.db"), "-y"}
			},
			dbPath: func(dir, _ string) string { return filepath.Join(dir, "u.db") },
		},
		{
			name:     "interactive defaults: sqlite at $AERIE_HOME/sessions.db, save",
			args:     func(string) []string { return []string{"setup"} },
			terminal: true,
			stdin:    "\n\n\n",
			dbPath:   func(_, home string) string { return filepath.Join(home, "sessions.db") },
		},
		{
			name:     "interactive ~/ path is expanded",
			args:     func(string) []string { return []string{"setup"} },
			terminal: true,
			stdin:    "sqlite\n~/db/x.db\ny\n",
			dbPath:   func(dir, _ string) string { return filepath.Join(dir, "user", "db", "x.db") },
		},
		{
			name:     "interactive answers can be corrected",
			args:     func(string) []string { return []string{"setup"} },
			terminal: true,
			stdin:    "mysql\ns\n" + "\n" + "maybe\nyes\n",
			dbPath:   func(_, home string) string { return filepath.Join(home, "sessions.db") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			writeConfig(t, home, existingConfig)
			h := harness{home: home, userHome: filepath.Join(dir, "user"), terminal: tt.terminal, stdin: strings.NewReader(tt.stdin)}

			r := h.aerie(t, tt.args(dir)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %v\nstdout:\n%s\nstderr:\n%s", r.code, r.err, r.stdout, r.stderr)
			}
			db := tt.dbPath(dir, home)
			if fi, err := os.Stat(db); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Errorf("database file %s not created private: %v, %v", db, fi, err)
			}
			if diff := cmpLines(withSavedURL(store.SQLiteURL(db)), readFile(t, config.GlobalFile(home))); diff != "" {
				t.Errorf("config.toml (-want +got):\n%s", diff)
			}
			if !strings.Contains(r.stdout, " ... ok\n") || !strings.Contains(r.stdout, "Saved database_url to "+config.GlobalFile(home)) {
				t.Errorf("stdout does not report the test and the save:\n%s", r.stdout)
			}
		})
	}
}

func TestSetupNewHome(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// No $AERIE_HOME: the home is ~/.aerie, which does not exist yet.
	h := harness{userHome: dir}
	r := h.aerie(t, "setup", "--sqlite", filepath.Join(dir, "s.db"), "--yes", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %v\n%s", r.code, r.err, r.stderr)
	}
	home := filepath.Join(dir, ".aerie")
	for path, want := range map[string]os.FileMode{home: 0o700, config.GlobalFile(home): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	var rep setupReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
	}
	want := setupReport{
		Home: home, ConfigFile: config.GlobalFile(home), Backend: "sqlite",
		DatabaseURL: store.SQLiteURL(filepath.Join(dir, "s.db")), Test: testReport{OK: true}, Saved: true,
	}
	if rep != want {
		t.Errorf("report = %+v, want %+v", rep, want)
	}
}

func TestSetupUnreachablePostgres(t *testing.T) {
	t.Parallel()
	redacted := store.RedactURL(unreachableURL)
	tests := []struct {
		name      string
		args      []string
		terminal  bool
		stdin     string
		wantCode  int
		wantSaved bool
		// wantOut are substrings of the human output, in this order.
		wantOut []string
	}{
		{
			name:      "--yes saves anyway and exits 1",
			args:      []string{"--postgres", unreachableURL, "--yes"},
			wantCode:  1,
			wantSaved: true,
			wantOut:   []string{"Testing " + redacted + " ... failed\n", "Saved database_url"},
		},
		{
			name:     "--no-save only tests",
			args:     []string{"--postgres", unreachableURL, "--no-save"},
			wantCode: 1,
			wantOut:  []string{"failed\n"},
		},
		{
			name:     "the failure is reported before the question; declining cancels",
			args:     []string{"--postgres", unreachableURL},
			terminal: true,
			stdin:    "\n", // the default after a failure is no
			wantCode: 130,
			wantOut:  []string{"failed\n", "The connection test failed. Save database_url to ", "anyway? [y/N]: ", "Not saved."},
		},
		{
			name:      "saving anyway at the prompt exits 1",
			args:      []string{"--postgres", unreachableURL},
			terminal:  true,
			stdin:     "y\n",
			wantCode:  1,
			wantSaved: true,
			wantOut:   []string{"failed\n", "anyway? [y/N]: ", "Saved database_url"},
		},
		{
			name:      "interactive choice of postgres",
			terminal:  true,
			stdin:     "postgres\n" + unreachableURL + "\nyes\n",
			wantCode:  1,
			wantSaved: true,
			wantOut:   []string{"Database (sqlite or postgres) [sqlite]: ", "PostgreSQL URL", "failed\n", "Saved"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := filepath.Join(t.TempDir(), "home")
			writeConfig(t, home, existingConfig)
			h := harness{home: home, terminal: tt.terminal, stdin: strings.NewReader(tt.stdin)}

			r := h.aerie(t, append([]string{"setup"}, tt.args...)...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d (%v), want %d\nstdout:\n%s", r.code, r.err, tt.wantCode, r.stdout)
			}
			assertNoPassword(t, r, unreachablePassword)
			rest := r.stdout
			for _, s := range tt.wantOut {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Fatalf("stdout lacks %q (in this order):\n%s", s, r.stdout)
				}
				rest = rest[i+len(s):]
			}

			want := existingConfig
			if tt.wantSaved {
				want = withSavedURL(unreachableURL)
			}
			if diff := cmpLines(want, readFile(t, config.GlobalFile(home))); diff != "" {
				t.Errorf("config.toml (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetupJSONFailure(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	r := harness{home: home}.aerie(t, "setup", "--postgres", unreachableURL, "--yes", "--json")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	assertNoPassword(t, r, unreachablePassword)
	var rep setupReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
	}
	if rep.Test.OK || rep.Test.Error == "" || !rep.Saved || rep.Backend != "postgres" ||
		rep.DatabaseURL != store.RedactURL(unreachableURL) {
		t.Errorf("report = %+v", rep)
	}
	if !strings.Contains(r.stderr, "failed") {
		t.Errorf("progress should go to stderr under --json; stderr:\n%s", r.stderr)
	}
}

func TestSetupCancel(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	blocked, w := io.Pipe()             // a terminal nobody types on
	t.Cleanup(func() { _ = w.Close() }) // an io.PipeWriter's Close returns nil

	tests := []struct {
		name  string
		args  []string
		stdin io.Reader
		ctx   context.Context
	}{
		{name: "end of input at the first question", args: []string{"setup"}, stdin: strings.NewReader("")},
		{name: "end of input at the save question", args: []string{"setup", "--sqlite", "DIR/s.db"}, stdin: strings.NewReader("")},
		{name: "declined save after a passing test", args: []string{"setup", "--sqlite", "DIR/s.db"}, stdin: strings.NewReader("no\n")},
		{name: "Ctrl-C at a question", args: []string{"setup"}, stdin: blocked, ctx: canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			writeConfig(t, home, existingConfig)
			for i, a := range tt.args {
				tt.args[i] = strings.ReplaceAll(a, "DIR", dir)
			}
			r := harness{home: home, terminal: true, stdin: tt.stdin, ctx: tt.ctx}.aerie(t, tt.args...)
			if r.code != 130 {
				t.Errorf("exit %d (%v), want 130", r.code, r.err)
			}
			if got := readFile(t, config.GlobalFile(home)); got != existingConfig {
				t.Errorf("config.toml changed:\n%s", got)
			}
		})
	}
}

func TestSetupRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		terminal bool
		wantErr  string
	}{
		{name: "no terminal and no database", args: []string{"setup"}, wantErr: "stdin is not a terminal"},
		{name: "no terminal and no --yes or --no-save", args: []string{"setup", "--sqlite", "/x.db"}, wantErr: "--yes to save"},
		{name: "two databases", args: []string{"setup", "--sqlite", "/x.db", "--postgres", "postgres://h/d", "-y"}, wantErr: "none of the others can be"},
		{name: "--yes with --no-save", args: []string{"setup", "--sqlite", "/x.db", "--yes", "--no-save"}, wantErr: "none of the others can be"},
		{name: "--postgres with a non-postgres URL", args: []string{"setup", "--postgres", "mysql://u:" + unreachablePassword + "@h/d", "-y"}, wantErr: "want postgres://"},
		{name: "--postgres with a sqlite URL", args: []string{"setup", "--postgres", "sqlite:///x.db", "-y"}, wantErr: "not a PostgreSQL URL"},
		{name: "--database-url with a bad URL", args: []string{"setup", "--database-url", "host=h password=" + unreachablePassword, "-y"}, wantErr: "password=xxxxx"},
		{name: "--sqlite path with a '?'", args: []string{"setup", "--sqlite", "/x?.db", "-y"}, wantErr: "sqlite path /x?.db: "},
		{name: "arguments", args: []string{"setup", "extra"}, wantErr: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := filepath.Join(t.TempDir(), "home")
			r := harness{home: home, terminal: tt.terminal}.aerie(t, tt.args...)
			if r.code != 1 || r.err == nil || !strings.Contains(r.err.Error(), tt.wantErr) {
				t.Errorf("exit %d, error %v; want 1 and %q", r.code, r.err, tt.wantErr)
			}
			assertNoPassword(t, r, unreachablePassword)
			if _, err := os.Stat(home); !os.IsNotExist(err) {
				t.Errorf("refused setup touched the home directory: %v", err)
			}
		})
	}
}

func TestSetupShowsCurrentSettingRedacted(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeConfig(t, home, "database_url = \""+unreachableURL+"\"\n")
	// Enter twice: keep postgres, keep the current URL; then decline.
	r := harness{home: home, terminal: true, stdin: strings.NewReader("\n\nn\n")}.aerie(t, "setup")
	if r.code != 130 {
		t.Errorf("exit %d (%v), want 130", r.code, r.err)
	}
	assertNoPassword(t, r, unreachablePassword)
	for _, s := range []string{"[postgres]: ", "[" + store.RedactURL(unreachableURL) + "]: ", "failed"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
}

func TestSetupWarnsAboutMalformedGlobalConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	writeConfig(t, home, "[broken\n")
	r := harness{home: home}.aerie(t, "setup", "--sqlite", filepath.Join(dir, "s.db"), "--yes")
	if r.code != 1 || !strings.Contains(r.stderr, "warning: "+config.GlobalFile(home)+":1:") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "the file was not changed") {
		t.Errorf("error = %v, want it to say the file was kept", r.err)
	}
	if got := readFile(t, config.GlobalFile(home)); got != "[broken\n" {
		t.Errorf("malformed config was rewritten:\n%s", got)
	}
}
