// Command startfloor is the least a Go program does to reach its first
// model request the way aerie run does: it opens a SQLite session store
// and stores a row in the background while it posts one streaming Anthropic
// Messages request, reads the answer, waits for the store and exits.
//
//	startfloor run ... --base-url URL ... PROMPT
//
// It takes aerie run's arguments so that the same benchmark runs both, and
// reads only --base-url; the database is $AERIE_HOME/floor.db.
//
// Built with -tags startfloor_deps it also links every package from other
// modules that aerie's own packages import (deps.go), and so pays what
// linking them costs at each start: a larger binary to map and the
// initialisation of every package they bring. BenchmarkRunFirstRequestFloor
// reports both beside aerie's own figure: what aerie's dependencies cost
// before it does anything, and what is left that is aerie's.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "startfloor: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var base string
	for i, a := range args {
		if a == "--base-url" && i+1 < len(args) {
			base = args[i+1]
		}
	}
	if base == "" {
		return errors.New("no --base-url")
	}
	stored := make(chan error, 1)
	go func() { stored <- store(filepath.Join(os.Getenv("AERIE_HOME"), "floor.db")) }()

	body := `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hello"}]}`
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost,
		strings.TrimSuffix(base, "/")+"/v1/messages", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"))
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the model answered %s", resp.Status)
	}
	return <-stored
}

// store opens the database as aerie's store does (write-ahead log, a busy
// timeout) and writes a row.
func store(path string) (err error) {
	db, err := sql.Open("sqlite", "file:"+path+
		"?_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	const schema = "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL)"
	if _, err := db.Exec(schema); err != nil {
		return err
	}
	_, err = db.Exec("INSERT INTO sessions (id, created_at) VALUES (hex(randomblob(16)), unixepoch())")
	return err
}
