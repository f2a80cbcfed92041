package main

import (
	"context"

	"github.com/aerie-run/aerie/runner/store/dburl"
)

// dbCheckFunc opens the database a database_url names and proves that it
// answers.
type dbCheckFunc func(ctx context.Context, databaseURL string) error

// checkDatabase is the dbCheckFunc in use: it opens the store as every
// session does and closes it again. What passes here opens there because it
// is the same code: SQLite's directory and private file created, WAL set
// (which writes, so a read-only location fails here), and the schema
// brought up to date, so that a PostgreSQL role that may connect but not
// create aerie's tables fails at setup rather than at the first session.
func checkDatabase(ctx context.Context, databaseURL string) error {
	st, err := dburl.Open(ctx, databaseURL)
	if err != nil {
		return err
	}
	return st.Close()
}
