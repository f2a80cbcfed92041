package main

import (
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/store"
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

	t.Run("a role that may connect but not create aerie's tables fails the test", func(t *testing.T) {
		t.Parallel()
		dsn := pg.NewDatabase(t)
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(t.Context()))
		// PUBLIC may connect to a database, but since PostgreSQL 15 not
		// create tables in its public schema.
		const role = "setup_cannot_create"
		if _, err := conn.Exec(t.Context(), "CREATE ROLE "+role+" LOGIN"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := conn.Exec(context.WithoutCancel(t.Context()), "DROP ROLE "+role); err != nil {
				t.Errorf("drop role: %v", err)
			}
		}()
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(role)
		r := harness{home: t.TempDir()}.aerie(t, "setup", "--postgres", u.String(), "--no-save")
		if r.code != 1 || !strings.Contains(r.stdout, "... failed\n") || !strings.Contains(r.stdout, "permission denied") {
			t.Errorf("exit %d; want 1 and the failed migration\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})

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
			DatabaseURL: store.RedactURL(dsn), Test: testReport{OK: true}, Saved: true,
		}
		if rep != want {
			t.Errorf("report = %+v, want %+v", rep, want)
		}
	})
}
