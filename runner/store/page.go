package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// PageOptions choose and order the sessions Page returns. The filters
// combine: a session is on a page when it passes every one given.
type PageOptions struct {
	// State keeps the sessions in this state; "" keeps every state.
	State State
	// Label and Model keep the sessions whose label, or model setting,
	// contains them, ignoring ASCII case; "" keeps every one.
	Label, Model string
	// UpdatedSince keeps the sessions updated at or after it; zero keeps
	// every one.
	UpdatedSince time.Time
	// Subagents keeps the subagent sessions too.
	Subagents bool
	// Order is the column the sessions are sorted by (OrderUpdated when
	// empty), descending with Desc, and then by id.
	Order PageOrder
	Desc  bool
	// Offset sessions are skipped; then at most Limit are returned (Limit
	// 0: all).
	Offset, Limit int
}

// PageOrder is a column Page sorts by.
type PageOrder string

// The columns Page sorts by.
const (
	OrderUpdated PageOrder = "updated"
	OrderCreated PageOrder = "created"
	OrderEntries PageOrder = "entries"
	OrderLabel   PageOrder = "label"
	OrderState   PageOrder = "phase"
	OrderModel   PageOrder = "model"
	// OrderTenant sorts by tenant (the namespace): what orders the pages
	// of several tenants merged.
	OrderTenant PageOrder = "ns"
	// OrderOutcome and OrderCost sort by the outcome of the session's
	// latest checkpoint and the cost of its latest usage entry ("" and 0
	// before it has one).
	OrderOutcome PageOrder = "outcome"
	OrderCost    PageOrder = "cost"
)

// Column is the sessions table's column of the order; ok is false for an
// order that is none of the above.
func (o PageOrder) Column() (column string, ok bool) {
	column, ok = map[PageOrder]string{
		"": "updated_at", OrderUpdated: "updated_at", OrderCreated: "created_at", OrderEntries: "entry_count",
		OrderLabel: "label", OrderState: "state", OrderModel: "model", OrderTenant: "tenant",
		OrderOutcome: "outcome", OrderCost: "cost_usd",
	}[o]
	return column, ok
}

// OrderBy is the ORDER BY clause of o's order: its column, then the id,
// both descending with Desc.
func (o PageOptions) OrderBy() string {
	column, _ := o.Order.Column()
	dir := " ASC"
	if o.Desc {
		dir = " DESC"
	}
	return column + dir + ", id" + dir
}

// ContainsPattern is the LIKE pattern (with \ as its escape character)
// that matches the strings containing s.
func ContainsPattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// Page returns a page of the tenant's live sessions that pass opts'
// filters, in its order, and how many pass them in all: what a list shown
// a page at a time needs, without reading the others.
func (db *DB) Page(ctx context.Context, tenant string, opts PageOptions) ([]Session, int, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, 0, fmt.Errorf("page sessions: %w", err)
	}
	if _, ok := opts.Order.Column(); !ok {
		return nil, 0, fmt.Errorf(
			"page sessions: order %q: %w (use updated, created, entries, label, phase, model, ns, outcome or cost)",
			opts.Order, ErrInvalid)
	}
	if opts.State != "" && !opts.State.valid() {
		return nil, 0, fmt.Errorf("page sessions: state %q: %w", opts.State, ErrInvalid)
	}
	if opts.Offset < 0 || opts.Limit < 0 {
		return nil, 0, fmt.Errorf("page sessions: offset %d, limit %d: %w (neither may be negative)",
			opts.Offset, opts.Limit, ErrInvalid)
	}
	ss, total, err := db.b.SessionPage(ctx, tenant, opts)
	if err != nil {
		return nil, 0, fmt.Errorf("page sessions: %w", err)
	}
	return ss, total, nil
}
