package store

import (
	"context"
	"fmt"
)

// Transaction is what WithTx drives: a pgx.Tx, a Backend's Tx, or the SQLite
// backend's *sql.Tx behind an adapter.
type Transaction interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// WithTx runs fn in a transaction from begin and commits it if fn succeeds.
// The deferred rollback runs on every path, panics included (after a
// commit it does nothing), and under context.WithoutCancel: a cancelled
// caller must still release the transaction.
func WithTx[T Transaction](ctx context.Context, begin func(context.Context) (T, error), fn func(T) error) error {
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
