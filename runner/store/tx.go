package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// txn is a transaction of either backend: pgx.Tx, or *sql.Tx behind sqlTx.
type txn interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// withTx runs fn in a transaction from begin and commits it if fn succeeds.
// The deferred rollback runs on every path, panics included (after a
// commit it does nothing), and under context.WithoutCancel: a cancelled
// caller must still release the transaction.
func withTx[T txn](ctx context.Context, begin func(context.Context) (T, error), fn func(T) error) error {
	tx, err := begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// sqlTx adapts *sql.Tx to txn.
type sqlTx struct{ *sql.Tx }

func (t sqlTx) Commit(context.Context) error { return t.Tx.Commit() }

func (t sqlTx) Rollback(context.Context) error {
	if err := t.Tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// transientError marks an error worth retrying; it matches ErrTransient and
// unwraps to the driver's error.
type transientError struct{ err error }

func (e transientError) Error() string        { return e.err.Error() }
func (e transientError) Unwrap() error        { return e.err }
func (e transientError) Is(target error) bool { return target == ErrTransient }
