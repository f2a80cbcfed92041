package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Appends are committed in groups. SQLite has one writer, and a
// transaction's fixed cost (BEGIN IMMEDIATE, the commit, the WAL frames of
// the session rows' pages) dominates a turn's few entries: the journals of
// sixteen subagents appending at once would each wait for the others' whole
// transactions. So one caller at a time leads: it commits, in one
// transaction, its batch and every batch queued behind the commit before
// it, then hands the lead to the first caller queued behind its own commit.
// Each caller returns once the transaction holding its batch has committed
// (or failed): durability and each session's order are as with one
// transaction per batch. A group whose transaction fails is retried one
// batch per transaction, so that each caller gets its own batch's error.

// group is the queue of batches waiting for a commit.
type group struct {
	mu      sync.Mutex
	queue   []*appendReq
	leading bool
}

// appendReq is one caller's batch.
type appendReq struct {
	tenant  string
	session uuid.UUID
	rows    []store.EntryRow
	at      time.Time
	err     error
	// wake says the batch's commit is over (false) or that the caller
	// leads the next (true).
	wake chan bool
}

func (b *backend) Append(
	ctx context.Context, tenant string, session uuid.UUID, rows []store.EntryRow, at time.Time,
) error {
	stmts, err := b.appendStatements(ctx)
	if err != nil {
		return fmt.Errorf("prepare: %w", sqliteError(err))
	}
	req := &appendReq{tenant: tenant, session: session, rows: rows, at: at, wake: make(chan bool, 1)}
	g := &b.group
	g.mu.Lock()
	g.queue = append(g.queue, req)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if !lead && !<-req.wake {
		return req.err
	}
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()
	// The others' batches ride on this caller's transaction: its cancel
	// must not fail them.
	b.commitGroup(context.WithoutCancel(ctx), stmts, batch)
	for _, r := range batch {
		if r != req {
			r.wake <- false
		}
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].wake <- true
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return req.err
}

// commitGroup appends the batches in one transaction, setting each one's
// error; when the transaction fails, each batch of several is tried again
// in its own.
func (b *backend) commitGroup(ctx context.Context, stmts *appendStmts, batch []*appendReq) {
	err := store.WithTx(ctx, b.beginWrite, func(t tx) error {
		for _, r := range batch {
			r.err = appendRows(ctx, t, stmts, r)
			if r.err != nil && !errors.Is(r.err, store.ErrNotFound) {
				return r.err // nothing else of the group is written
			}
		}
		return nil
	})
	if err == nil {
		return
	}
	if len(batch) == 1 {
		batch[0].err = sqliteError(err)
		return
	}
	for _, r := range batch {
		r.err = sqliteError(store.WithTx(ctx, b.beginWrite, func(t tx) error {
			return appendRows(ctx, t, stmts, r)
		}))
	}
}

// appendRows writes r's batch in transaction t: its entries, the session's
// counts, and the compaction marks of its compaction entries. A session not
// live in the tenant is store.ErrNotFound, before anything is written.
func appendRows(ctx context.Context, t tx, stmts *appendStmts, r *appendReq) error {
	id := r.session.String()
	var one int
	switch err := t.tx.StmtContext(ctx, stmts.live).QueryRowContext(ctx, id, r.tenant).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return err
	}
	insert := t.tx.StmtContext(ctx, stmts.insert)
	var inserted, lastSeq int64
	for _, row := range r.rows {
		res, err := insert.ExecContext(ctx, id, r.tenant, row.Seq, string(row.Kind), string(row.Payload),
			row.CreatedAt.UnixMicro())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			inserted += n
			lastSeq = row.Seq
		}
	}
	count := t.tx.StmtContext(ctx, stmts.count)
	if _, err := count.ExecContext(ctx, inserted, lastSeq, r.at.UnixMicro(), id, r.tenant); err != nil {
		return err
	}
	for _, row := range r.rows {
		if row.Kind != transcript.KindCompaction {
			continue
		}
		if _, err := t.tx.ExecContext(ctx, `UPDATE entries SET compacted_by = ?
			WHERE session_id = ? AND tenant = ? AND seq < ? AND compacted_by IS NULL`,
			row.Seq, id, r.tenant, row.FirstKept); err != nil {
			return err
		}
	}
	return nil
}
