package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/store"
)

type setupFlags struct {
	sqlite, postgres, databaseURL string
	yes, noSave, dryRun, asJSON   bool
	timeout                       time.Duration
}

// setupReport is setup's --json output, one object on stdout.
type setupReport struct {
	Home       string `json:"home"`
	ConfigFile string `json:"config_file"`
	Backend    string `json:"backend"`
	// DatabaseURL has any password replaced by xxxxx.
	DatabaseURL string     `json:"database_url"`
	Test        testReport `json:"test"`
	Saved       bool       `json:"saved"`
}

type testReport struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

func newSetupCmd(a *app) *cobra.Command {
	var f setupFlags
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Choose the session database, test it, and save it in the global config",
		Long: `Setup chooses where sessions are stored — a SQLite file (the default is
$AERIE_HOME/sessions.db) or a PostgreSQL server — tests the connection, and
saves the choice as database_url in $AERIE_HOME/config.toml. Comments, other
keys and formatting in that file are kept.

On a terminal setup asks for what the flags do not say. A failed connection
test is reported before the question to save, and does not prevent saving
(the database may not be up yet). Passwords are never printed.

Exit status: 0 when the test passed and the choice was saved (or, with
--no-save, when the test passed); 130 when you cancel at a prompt (decline to
save, Ctrl-D, Ctrl-C); 1 otherwise — including a failed connection test, even
when the configuration was saved anyway, so that scripts notice.`,
		Example: `  aerie setup
  aerie setup --sqlite ~/.aerie/sessions.db --yes
  aerie setup --postgres 'postgres://aerie:PASSWORD@db:5432/aerie' --yes --json
  aerie setup --postgres "$DATABASE_URL" --no-save    # only test`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSetup(cmd.Context(), a, cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.sqlite, "sqlite", "", "use the SQLite database file `PATH`")
	fl.StringVar(&f.postgres, "postgres", "", "use the PostgreSQL server at `URL` (postgres://...)")
	fl.StringVar(&f.databaseURL, "database-url", "",
		"use any database_url: postgres://..., sqlite://PATH or an absolute path")
	fl.BoolVarP(&f.yes, "yes", "y", false, "save without asking, even when the connection test fails")
	fl.BoolVar(&f.noSave, "no-save", false, "only test the connection; never save")
	fl.BoolVar(&f.dryRun, "dry-run", false, "same as --no-save")
	fl.BoolVar(&f.asJSON, "json", false, "print the outcome as JSON on stdout (prompts go to stderr)")
	fl.DurationVar(&f.timeout, "timeout", 15*time.Second, "give up on the connection test after this long")
	cmd.MarkFlagsMutuallyExclusive("sqlite", "postgres", "database-url")
	cmd.MarkFlagsMutuallyExclusive("yes", "no-save")
	cmd.MarkFlagsMutuallyExclusive("yes", "dry-run")
	return cmd
}

func runSetup(ctx context.Context, a *app, cmd *cobra.Command, f setupFlags) error {
	// Progress and questions go to stdout for people, or to stderr under
	// --json so that stdout carries exactly one JSON document.
	say := cli.NewWriter(cmd.OutOrStdout())
	if f.asJSON {
		say = cli.NewWriter(cmd.ErrOrStderr())
	}
	rep, err := setup(ctx, a, cmd, say, f)
	err = cmp.Or(err, say.Err())
	// The report goes out whenever a database was chosen, canceled and
	// failed runs included, so a script sees what was tested and saved.
	if f.asJSON && rep.DatabaseURL != "" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		err = errors.Join(err, enc.Encode(rep))
	}
	return err
}

// setup chooses, tests and saves the database, printing its progress, and
// returns what it did. The error decides the exit status (see the command's
// Long text); a write to say that failed is say's to report.
func setup(ctx context.Context, a *app, cmd *cobra.Command, say *cli.Writer, f setupFlags) (setupReport, error) {
	f.noSave = f.noSave || f.dryRun
	interactive := a.isTerminal != nil && a.isTerminal()
	chosen := f.sqlite != "" || f.postgres != "" || f.databaseURL != ""
	if !interactive && (!chosen || !f.yes && !f.noSave) {
		// Refuse before any work: a script must say everything up front,
		// and setup never waits for an answer nobody can give.
		return setupReport{}, errors.New("setup: stdin is not a terminal, so setup cannot ask; " +
			"pass --sqlite PATH or --postgres URL, and --yes to save or --no-save to only test")
	}

	p := &prompter{in: bufio.NewReader(cmd.InOrStdin()), out: say}

	home := config.Home(a.env)
	// Without a working directory Load reads only the global file, and
	// its problems are warnings, never an error.
	loaded, _ := config.Load(config.Options{Home: home})
	for _, w := range loaded.Warnings {
		warn(cmd, "%v", w)
	}

	dbURL, err := chooseDatabase(ctx, a, p, f, home, loaded.Config.DatabaseURL)
	if err != nil {
		return setupReport{}, err
	}
	db, err := store.ParseURL(dbURL)
	if err != nil {
		return setupReport{}, fmt.Errorf("setup: %w", err) // unreachable: chooseDatabase validated it
	}
	rep := setupReport{
		Home:        home,
		ConfigFile:  loaded.GlobalFile,
		Backend:     string(db.Database),
		DatabaseURL: store.RedactURL(dbURL),
	}

	fmt.Fprintf(say, "Testing %s ... ", rep.DatabaseURL)
	tctx, cancel := context.WithTimeout(ctx, f.timeout)
	testErr := a.checkDB(tctx, dbURL)
	cancel()
	switch {
	case ctx.Err() != nil: // Ctrl-C during the test
		fmt.Fprintln(say)
		return rep, errCanceled
	case testErr == nil:
		rep.Test.OK = true
		fmt.Fprintln(say, "ok")
	default:
		rep.Test.Error = redactIn(testErr.Error(), dbURL)
		// Drivers put one failed attempt per line; indent them all under
		// the "failed" they explain.
		fmt.Fprintf(say, "failed\n  %s\n",
			strings.ReplaceAll(strings.ReplaceAll(rep.Test.Error, "\t", "  "), "\n", "\n  "))
	}

	// The spec's order: the failure is on screen before the question, and
	// the question is asked (with "no" as the default) even after one.
	save := !f.noSave
	if save && !f.yes {
		q := "Save database_url to " + rep.ConfigFile + "?"
		if !rep.Test.OK {
			q = "The connection test failed. Save database_url to " + rep.ConfigFile + " anyway?"
		}
		if save, err = p.confirm(ctx, q, rep.Test.OK); err != nil {
			return rep, err
		}
		if !save {
			fmt.Fprintln(say, "Not saved.")
			return rep, errCanceled
		}
	}
	if save {
		if _, err := config.SaveDatabaseURL(home, dbURL); err != nil {
			return rep, fmt.Errorf("setup: %w", err)
		}
		rep.Saved = true
		fmt.Fprintf(say, "Saved database_url to %s\n", rep.ConfigFile)
	}

	switch {
	case rep.Test.OK:
		return rep, nil
	case rep.Saved:
		return rep, errors.New("setup: the connection test failed; database_url was saved anyway")
	default:
		return rep, errors.New("setup: the connection test failed")
	}
}

// chooseDatabase returns the database_url to test and save: from the flags,
// or asked on the terminal with the current setting as the default.
func chooseDatabase(ctx context.Context, a *app, p *prompter, f setupFlags, home, current string) (string, error) {
	switch {
	case f.sqlite != "":
		return sqliteURL(a, f.sqlite)
	case f.postgres != "":
		return postgresURL(f.postgres)
	case f.databaseURL != "":
		db, err := store.ParseURL(f.databaseURL)
		if err != nil {
			return "", fmt.Errorf("setup: --database-url %s: %w", store.RedactURL(f.databaseURL), err)
		}
		if db.Database == store.SQLite {
			return sqliteURL(a, db.Path)
		}
		return db.Raw, nil
	}

	cur, err := store.ParseURL(current)
	if err != nil {
		cur = store.URL{Database: store.SQLite, Path: filepath.Join(home, "sessions.db")}
	}
	backend := cur.Database
	for {
		ans, err := p.ask(ctx, "Database (sqlite or postgres)", string(cur.Database))
		if err != nil {
			return "", err
		}
		switch strings.ToLower(ans) {
		case "":
		case "sqlite", "sqlite3", "s":
			backend = store.SQLite
		case "postgres", "postgresql", "pg", "p":
			backend = store.Postgres
		default:
			fmt.Fprintln(p.out, "Please answer sqlite or postgres.")
			continue
		}
		break
	}

	if backend == store.SQLite {
		def := filepath.Join(home, "sessions.db")
		if cur.Database == store.SQLite {
			def = cur.Path
		}
		for {
			ans, err := p.ask(ctx, "SQLite database file", def)
			if err != nil {
				return "", err
			}
			if ans == "" {
				ans = def
			}
			u, err := sqliteURL(a, ans)
			if err == nil {
				return u, nil
			}
			fmt.Fprintln(p.out, err)
		}
	}

	var def, shown string
	if cur.Database == store.Postgres {
		def, shown = cur.Raw, store.RedactURL(cur.Raw)
	}
	for {
		ans, err := p.ask(ctx, "PostgreSQL URL (postgres://USER:PASSWORD@HOST:5432/DB)", shown)
		if err != nil {
			return "", err
		}
		if ans == "" {
			if def == "" {
				fmt.Fprintln(p.out, "A URL is required.")
				continue
			}
			ans = def
		}
		u, err := postgresURL(ans)
		if err == nil {
			return u, nil
		}
		fmt.Fprintln(p.out, err)
	}
}

// sqliteURL returns the database_url for a SQLite file named on the command
// line or at a prompt. The path is made absolute, because the global config
// is read from any working directory; a leading ~/ is expanded because a
// prompt, unlike a shell, does not.
func sqliteURL(a *app, path string) (string, error) {
	if rest, ok := strings.CutPrefix(path, "~/"); ok && a.env.UserHomeDir != nil {
		if dir, err := a.env.UserHomeDir(); err == nil && dir != "" {
			path = filepath.Join(dir, rest)
		}
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		_, err = store.ParseURL(store.SQLiteURL(abs))
	}
	if err != nil {
		return "", fmt.Errorf("setup: sqlite path %s: %w", path, err)
	}
	return store.SQLiteURL(abs), nil
}

func postgresURL(s string) (string, error) {
	db, err := store.ParseURL(s)
	if err == nil && db.Database != store.Postgres {
		err = errors.New("not a PostgreSQL URL")
	}
	if err != nil {
		return "", fmt.Errorf("setup: postgres URL %s: want postgres://USER:PASSWORD@HOST:PORT/DB: %w",
			store.RedactURL(s), err)
	}
	return db.Raw, nil
}

// redactIn removes the URL's password from a message (a driver error), in
// case a driver ever quotes it. Passwords shorter than four characters are
// left alone: scrubbing every "a" from a message would garble it, and the
// drivers used here do not print passwords anyway.
func redactIn(msg, databaseURL string) string {
	msg = strings.ReplaceAll(msg, databaseURL, store.RedactURL(databaseURL))
	u, err := url.Parse(databaseURL)
	if err != nil {
		return msg
	}
	pw, ok := u.User.Password()
	if !ok || len(pw) < 4 {
		return msg
	}
	msg = strings.ReplaceAll(msg, pw, "xxxxx")
	return strings.ReplaceAll(msg, url.QueryEscape(pw), "xxxxx")
}
