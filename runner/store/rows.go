package store

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// EntryRow is an entry as a Backend writes it: checked, and its payload
// encoded.
type EntryRow struct {
	Seq     int64
	Kind    transcript.EntryKind
	Payload []byte
	// CreatedAt is in UTC, at the microsecond precision both backends keep.
	CreatedAt time.Time
	// FirstKept is set for compaction checkpoints: the entries before it
	// become compacted by this one.
	FirstKept int64
}

// encodeEntries checks a batch for Append and encodes its payloads.
func encodeEntries(entries []transcript.Entry) ([]EntryRow, error) {
	out := make([]EntryRow, len(entries))
	for i, e := range entries {
		if e.Seq < 1 {
			return nil, fmt.Errorf("entry sequence number %d, want at least 1: %w", e.Seq, ErrInvalid)
		}
		if i > 0 && e.Seq <= entries[i-1].Seq {
			return nil, fmt.Errorf("entry sequence numbers %d, %d do not increase: %w", entries[i-1].Seq, e.Seq, ErrInvalid)
		}
		payload, err := transcript.EncodePayload(e.Payload)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w: %w", e.Seq, ErrInvalid, err)
		}
		r := EntryRow{Seq: e.Seq, Kind: e.Kind(), Payload: payload, CreatedAt: e.CreatedAt}
		if c, ok := e.Payload.(transcript.Compaction); ok {
			if c.FirstKept > e.Seq {
				return nil, fmt.Errorf("compaction %d keeps from %d, after itself: %w", e.Seq, c.FirstKept, ErrInvalid)
			}
			r.FirstKept = c.FirstKept
		}
		if r.CreatedAt.IsZero() {
			r.CreatedAt = now()
		}
		r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Microsecond)
		out[i] = r
	}
	return out, nil
}

// encodeFirst checks and encodes a new session's first entries for
// Create: Append's rules, and no compaction, which would have nothing to
// compact.
func encodeFirst(entries []transcript.Entry) ([]EntryRow, error) {
	for _, e := range entries {
		if _, ok := e.Payload.(transcript.Compaction); ok {
			return nil, fmt.Errorf("entry %d: a new session's first entries cannot compact: %w", e.Seq, ErrInvalid)
		}
	}
	return encodeEntries(entries)
}

// EntryRows collects the entry rows of one session as a Backend reads them,
// to be decoded together: decoding JSON is most of the cost of reading a
// long session, and decode spreads it over the available cores.
type EntryRows struct {
	session uuid.UUID
	rows    []row
}

type row struct {
	seq, compactedBy int64
	createdAt        time.Time
	kind             transcript.EntryKind
	// payload is the row's own copy: decoded strings may share its memory.
	payload string
}

// newEntryRows returns the rows of a read of session; capacity is a hint
// of how many to expect.
func newEntryRows(session uuid.UUID, capacity int64) *EntryRows {
	return &EntryRows{session: session, rows: make([]row, 0, min(capacity, 1<<20))}
}

// Add records a row. kind may be reused by the caller afterwards; payload
// is the batch's from then on, and its decoded strings may share its
// memory. createdAt is in UTC; compactedBy is 0 for an active entry.
func (b *EntryRows) Add(seq int64, kind []byte, payload string, createdAt time.Time, compactedBy int64) {
	b.rows = append(b.rows, row{
		seq: seq, compactedBy: compactedBy, createdAt: createdAt,
		kind: transcript.KindOf(kind), payload: payload,
	})
}

// parallelDecodeMin is the number of rows from which decode uses several
// goroutines: below it, starting them costs more than it saves.
const parallelDecodeMin = 256

// decode decodes every row into entries in sequence order, whatever the
// order the rows were read in. If rows are corrupt, the error is that of the
// one with the lowest sequence number, whatever the scheduling.
func (b *EntryRows) decode() ([]transcript.Entry, error) {
	b.sort()
	entries := make([]transcript.Entry, len(b.rows))
	workers := min(runtime.GOMAXPROCS(0), len(b.rows)/parallelDecodeMin+1)
	chunk := (len(b.rows) + workers - 1) / max(workers, 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, len(b.rows))
		decodeRange := func() {
			for i := lo; i < hi; i++ {
				r := b.rows[i]
				p, err := transcript.DecodeEntry(b.session, r.seq, r.kind, r.payload)
				if err != nil {
					errs[w] = err
					return
				}
				entries[i] = transcript.Entry{Seq: r.seq, Payload: p, CreatedAt: r.createdAt, CompactedBy: r.compactedBy}
			}
		}
		if w == workers-1 {
			decodeRange() // the caller's goroutine takes the last share
		} else {
			wg.Go(decodeRange)
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// sort puts the rows in sequence order. They mostly come in order, and
// then this only checks them.
func (b *EntryRows) sort() {
	bySeq := func(x, y row) int { return cmp.Compare(x.seq, y.seq) }
	if slices.IsSortedFunc(b.rows, bySeq) {
		return
	}
	// The sequence numbers of a session are unique and have few gaps:
	// placing each row in a slot of its number sorts them in linear time.
	lo, hi := b.rows[0].seq, b.rows[0].seq
	for _, r := range b.rows {
		lo, hi = min(lo, r.seq), max(hi, r.seq)
	}
	// (hi-lo is negative if the numbers are too far apart for an int64.)
	if span := hi - lo; span >= 0 && span < 4*int64(len(b.rows)) {
		slots := make([]int32, span+1) // index+1 of the row of each number
		for i, r := range b.rows {
			slots[r.seq-lo] = int32(i + 1)
		}
		sorted := make([]row, 0, len(b.rows))
		for _, i := range slots {
			if i != 0 {
				sorted = append(sorted, b.rows[i-1])
			}
		}
		if len(sorted) == len(b.rows) { // else numbers repeat: sort below
			b.rows = sorted
			return
		}
	}
	slices.SortFunc(b.rows, bySeq)
}
