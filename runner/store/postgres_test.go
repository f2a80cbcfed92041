package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/storetest"
)

// TestPostgres runs everything that needs PostgreSQL against one server;
// every case gets a database of its own.
func TestPostgres(t *testing.T) {
	pg := testenv.StartPostgres(t)

	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) string { return pg.NewDatabase(t) })
	})

	t.Run("CorruptEntry", func(t *testing.T) {
		t.Parallel()
		dsn := pg.NewDatabase(t)
		st := openPostgres(t, dsn)
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		testCorruptEntry(t, st, func(session uuid.UUID, seq int64, kind, payload string) error {
			_, err := conn.Exec(t.Context(), `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
				VALUES ($1, 'tenant', $2, $3, $4, now())`, session, seq, kind, payload)
			return err
		}, func(session uuid.UUID) int {
			var n int
			if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM entries WHERE session_id = $1", session).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		})
	})

	t.Run("MigrationFailureIsAnError", func(t *testing.T) {
		t.Parallel()
		dsn := pg.NewDatabase(t)
		// A table in the way of the first migration.
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), "CREATE TABLE sessions (x int)"); err != nil {
			t.Fatal(err)
		}
		if st, err := store.Open(t.Context(), dsn); err == nil {
			st.Close()
			t.Fatal("Open succeeded over a conflicting schema")
		} else {
			t.Logf("error, as expected: %v", err)
		}
	})
}

func TestPostgresConnectionFailureIsAnError(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback: nothing listens there.
	_, err := store.Open(t.Context(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")
	if err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
	t.Logf("error, as expected: %v", err)
}

func openPostgres(t *testing.T, dsn string) *store.Postgres {
	t.Helper()
	st, err := store.OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
