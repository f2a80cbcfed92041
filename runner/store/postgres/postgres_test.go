package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/postgres"
	"github.com/aerie-run/aerie/runner/store/storetest"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestPostgres runs everything that needs PostgreSQL against one server;
// every case gets a database of its own.
func TestPostgres(t *testing.T) {
	pg := testenv.StartPostgres(t)

	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) string { return pg.NewDatabase(t) })
	})

	t.Run("Listen", func(t *testing.T) {
		t.Parallel()
		testListen(t, openPostgres(t, pg.NewDatabase(t)))
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
		storetest.CorruptEntry(t, st, func(session uuid.UUID, seq int64, kind, payload string) error {
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
		if st, err := postgres.Open(t.Context(), dsn); err == nil {
			_ = st.Close() // the test fails on the Open that succeeded, whatever Close says
			t.Fatal("Open succeeded over a conflicting schema")
		} else {
			t.Logf("error, as expected: %v", err)
		}
	})
}

func TestConnectionFailureIsAnError(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback: nothing listens there.
	_, err := postgres.Open(t.Context(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")
	if err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
	t.Logf("error, as expected: %v", err)
}

func openPostgres(t *testing.T, dsn string) *store.DB {
	t.Helper()
	st, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
	return st
}

// TestServerDownIsTransient: with the server gone, every operation fails
// with an error worth retrying, whether it fails on a statement or on
// beginning the transaction of a multi-statement one.
func TestServerDownIsTransient(t *testing.T) {
	pg := testenv.StartPostgres(t) // its own server: stopping it would disturb other tests
	st := openPostgres(t, pg.NewDatabase(t))
	s, err := st.Create(t.Context(), "tenant", store.NewSession{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	msg := transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "hi"}}}
	if err := st.Append(t.Context(), "tenant", s.ID, []transcript.Entry{{Seq: 1, Payload: msg}}); err != nil {
		t.Fatal(err)
	}
	pg.Stop(t)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	errs := map[string]error{}
	_, errs["Create"] = st.Create(ctx, "tenant", store.NewSession{Dir: "/"})
	_, errs["Session"] = st.Session(ctx, "tenant", s.ID)
	_, errs["Resolve"] = st.Resolve(ctx, "tenant", s.ID.String())
	_, _, errs["Load"] = st.Load(ctx, "tenant", s.ID)
	_, errs["Entries"] = st.Entries(ctx, "tenant", s.ID)
	_, errs["Fork"] = st.Fork(ctx, "tenant", s.ID, store.ForkOptions{})
	_, errs["Traces"] = st.Traces(ctx, "tenant", s.ID)
	errs["SetState"] = st.SetState(ctx, "tenant", s.ID, store.StateIdle)
	errs["Append"] = st.Append(ctx, "tenant", s.ID, []transcript.Entry{{Seq: 2, Payload: msg}})
	for op, err := range errs {
		if !errors.Is(err, store.ErrTransient) {
			t.Errorf("%s with the server down: %v, want an error matching ErrTransient", op, err)
		}
	}
}

// testListen: Listen tells that it listens (uuid.Nil), then the id of each
// session whose row a committed write changed: created, appended to, its
// state set.
func testListen(t *testing.T, st *store.DB) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang fails; nothing is timed
	defer cancel()
	got := make(chan uuid.UUID, 16)
	done := make(chan error, 1)
	go func() { done <- st.Listen(ctx, func(id uuid.UUID) { got <- id }) }()
	next := func(what string) uuid.UUID {
		t.Helper()
		select {
		case id := <-got:
			return id
		case err := <-done:
			t.Fatalf("%s: Listen returned %v", what, err)
		case <-ctx.Done():
			t.Fatalf("%s: no notification", what)
		}
		return uuid.Nil
	}
	if id := next("listening"); id != uuid.Nil {
		t.Fatalf("first call %s, want uuid.Nil (listening)", id)
	}
	s, err := st.Create(ctx, "tenant", store.NewSession{})
	if err != nil {
		t.Fatal(err)
	}
	if id := next("create"); id != s.ID {
		t.Errorf("create told %s, want %s", id, s.ID)
	}
	e := transcript.Entry{Seq: 1, Payload: transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "hi"}}},
		CreatedAt: time.Now()}
	if err := st.Append(ctx, "tenant", s.ID, []transcript.Entry{e}); err != nil {
		t.Fatal(err)
	}
	if id := next("append"); id != s.ID {
		t.Errorf("append told %s, want %s", id, s.ID)
	}
	if err := st.SetState(ctx, "tenant", s.ID, store.StateCompleted); err != nil {
		t.Fatal(err)
	}
	if id := next("set state"); id != s.ID {
		t.Errorf("set state told %s, want %s", id, s.ID)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Listen after its context ended: %v, want context.Canceled", err)
	}
}
