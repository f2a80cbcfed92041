// Package dburl opens the session store a database URL names, with the
// backend it names: PostgreSQL (store/postgres) or a SQLite file
// (store/sqlite). It is the one place that links both drivers; a program
// that knows its backend opens it directly.
package dburl

import (
	"context"
	"fmt"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/postgres"
	"github.com/aerie-run/aerie/runner/store/sqlite"
)

// Open opens the store a database URL names (see store.ParseURL for its
// forms) and brings its schema up to date: PostgreSQL with the URL handed
// to pgx as is, or the SQLite file at the URL's path.
//
// A connection or migration failure is an error, and nothing stays open.
func Open(ctx context.Context, url string) (*store.DB, error) {
	u, err := store.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if u.Database == store.Postgres {
		return postgres.Open(ctx, u.Raw)
	}
	return sqlite.Open(ctx, u.Path)
}
