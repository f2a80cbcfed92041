package store

import (
	"context"
	"database/sql"
	"testing"
)

// SQLitePragmasForTest reads the settings of a connection of one of the
// store's pools ("write" or "read").
func SQLitePragmasForTest(t testing.TB, s *SQLite, pool string) map[string]string {
	t.Helper()
	db := map[string]*sql.DB{"write": s.write, "read": s.read}[pool]
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := map[string]string{}
	for _, name := range []string{"foreign_keys", "journal_mode", "busy_timeout", "synchronous", "wal_autocheckpoint"} {
		var v string
		if err := conn.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&v); err != nil {
			t.Fatalf("PRAGMA %s: %v", name, err)
		}
		got[name] = v
	}
	return got
}
