package main

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/config"
)

func TestSetupPostgres(t *testing.T) {
	t.Parallel()
	pg := testenv.StartPostgres(t)

	// withPassword puts a password in a test database's URL, to prove it is
	// never printed. (The test server may not check it; aerie must still
	// hide it.)
	const password = "pgSecret123"
	withPassword := func(t *testing.T, dsn string) string {
		t.Helper()
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), password)
		return u.String()
	}

	tests := []struct {
		name      string
		args      func(dsn string) []string
		terminal  bool
		stdin     func(dsn string) string
		wantSaved bool
		wantOut   string
	}{
		{
			name:      "flags",
			args:      func(dsn string) []string { return []string{"--postgres", dsn, "--yes"} },
			wantSaved: true,
			wantOut:   " ... ok\n",
		},
		{
			name:      "interactive, saving by default after a passing test",
			terminal:  true,
			stdin:     func(dsn string) string { return "pg\n" + dsn + "\n\n" },
			wantSaved: true,
			wantOut:   "? [Y/n]: Saved database_url",
		},
		{
			name:    "--dry-run only tests",
			args:    func(dsn string) []string { return []string{"--database-url", dsn, "--dry-run"} },
			wantOut: " ... ok\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dsn := withPassword(t, pg.NewDatabase(t))
			home := filepath.Join(t.TempDir(), "home")
			writeConfig(t, home, existingConfig)
			h := harness{home: home, terminal: tt.terminal}
			if tt.stdin != nil {
				h.stdin = strings.NewReader(tt.stdin(dsn))
			}
			args := []string{"setup"}
			if tt.args != nil {
				args = append(args, tt.args(dsn)...)
			}

			r := h.aerie(t, args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %v\nstdout:\n%s\nstderr:\n%s", r.code, r.err, r.stdout, r.stderr)
			}
			assertNoPassword(t, r, password)
			if !strings.Contains(r.stdout, tt.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantOut, r.stdout)
			}
			want := existingConfig
			if tt.wantSaved {
				want = withSavedURL(dsn)
			}
			if diff := cmpLines(want, readFile(t, config.GlobalFile(home))); diff != "" {
				t.Errorf("config.toml (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		dsn := withPassword(t, pg.NewDatabase(t))
		home := t.TempDir()
		r := harness{home: home}.aerie(t, "setup", "--postgres", dsn, "--yes", "--json")
		if r.code != 0 {
			t.Fatalf("exit %d: %v\n%s", r.code, r.err, r.stderr)
		}
		assertNoPassword(t, r, password)
		var rep setupReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
		}
		want := setupReport{
			Home: home, ConfigFile: config.GlobalFile(home), Backend: "postgres",
			DatabaseURL: config.RedactDatabaseURL(dsn), Test: testReport{OK: true}, Saved: true,
		}
		if rep != want {
			t.Errorf("report = %+v, want %+v", rep, want)
		}
	})
}
