package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// TestSessionPostgres runs the session commands against PostgreSQL selected
// by database_url in the global config. The subtests share one database, as
// the directories of one machine share a server; each is its own tenant.
func TestSessionPostgres(t *testing.T) {
	t.Parallel()
	dsn := testenv.StartPostgres(t).NewDatabase(t)
	testSessionCommands(t, func(t *testing.T) string {
		home := t.TempDir()
		writeConfig(t, home, fmt.Sprintf("database_url = %q\n", dsn))
		t.Cleanup(func() {
			// The config, not the default, chose the database.
			if _, err := os.Stat(filepath.Join(home, "sessions.db")); !os.IsNotExist(err) {
				t.Errorf("a SQLite database was created beside a PostgreSQL database_url: %v", err)
			}
		})
		return home
	})
}
