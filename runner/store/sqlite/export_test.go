package sqlite

import (
	"context"
	"database/sql"
	"testing"
)

// PragmasForTest opens the database at path as Open does and reads the
// settings of a connection of each of its pools, by pool ("write" or
// "read").
func PragmasForTest(t testing.TB, path string) map[string]map[string]string {
	t.Helper()
	b, err := open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := map[string]map[string]string{}
	for pool, db := range map[string]*sql.DB{"write": b.write, "read": b.read} {
		got[pool] = pragmas(t, db)
	}
	return got
}

func pragmas(t testing.TB, db *sql.DB) map[string]string {
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
