package store

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// encodedEntry is an entry ready to be written.
type encodedEntry struct {
	seq       int64
	kind      EntryKind
	payload   []byte
	createdAt time.Time
	// firstKept is set for compaction checkpoints: entries before it become
	// compacted by this one.
	firstKept int64
}

// encodeEntries checks a batch for Append and encodes its payloads.
func encodeEntries(entries []Entry) ([]encodedEntry, error) {
	out := make([]encodedEntry, len(entries))
	for i, e := range entries {
		if e.Seq < 1 {
			return nil, fmt.Errorf("entry sequence number %d, want at least 1: %w", e.Seq, ErrInvalid)
		}
		if i > 0 && e.Seq <= entries[i-1].Seq {
			return nil, fmt.Errorf("entry sequence numbers %d, %d do not increase: %w", entries[i-1].Seq, e.Seq, ErrInvalid)
		}
		payload, err := EncodePayload(e.Payload)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w: %w", e.Seq, ErrInvalid, err)
		}
		ee := encodedEntry{seq: e.Seq, kind: e.Kind(), payload: payload, createdAt: e.CreatedAt}
		if c, ok := e.Payload.(Compaction); ok {
			if c.FirstKept > e.Seq {
				return nil, fmt.Errorf("compaction %d keeps from %d, after itself: %w", e.Seq, c.FirstKept, ErrInvalid)
			}
			ee.firstKept = c.FirstKept
		}
		if ee.createdAt.IsZero() {
			ee.createdAt = now()
		}
		ee.createdAt = ee.createdAt.UTC().Truncate(time.Microsecond)
		out[i] = ee
	}
	return out, nil
}

// rowBatch collects the entry rows of one session as they are read, to be
// decoded together: decoding JSON is most of the cost of reading a long
// session, and decode spreads it over the available cores.
type rowBatch struct {
	session uuid.UUID
	rows    []row
}

type row struct {
	seq, compactedBy int64
	createdAt        time.Time
	kind             EntryKind
	// payload is the row's own copy: decoded strings may share its memory.
	payload string
}

func newRowBatch(session uuid.UUID, capacity int64) *rowBatch {
	return &rowBatch{session: session, rows: make([]row, 0, min(capacity, 1<<20))}
}

// add records a row. kind may be reused by the caller afterwards; payload
// is the batch's from then on.
func (b *rowBatch) add(seq int64, kind []byte, payload string, createdAt time.Time, compactedBy int64) {
	b.rows = append(b.rows, row{
		seq: seq, compactedBy: compactedBy, createdAt: createdAt,
		kind: internKind(kind), payload: payload,
	})
}

// parallelDecodeMin is the number of rows from which decode uses several
// goroutines: below it, starting them costs more than it saves.
const parallelDecodeMin = 256

// decode decodes every row into entries in sequence order, whatever the
// order the rows were read in. If rows are corrupt, the error is that of the
// one with the lowest sequence number, whatever the scheduling.
func (b *rowBatch) decode() ([]Entry, error) {
	b.sort()
	entries := make([]Entry, len(b.rows))
	workers := min(runtime.GOMAXPROCS(0), len(b.rows)/parallelDecodeMin+1)
	chunk := (len(b.rows) + workers - 1) / max(workers, 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, len(b.rows))
		decodeRange := func() {
			for i := lo; i < hi; i++ {
				r := b.rows[i]
				p, err := decodeEntry(b.session, r.seq, r.kind, r.payload)
				if err != nil {
					errs[w] = err
					return
				}
				entries[i] = Entry{Seq: r.seq, Payload: p, CreatedAt: r.createdAt, CompactedBy: r.compactedBy}
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
func (b *rowBatch) sort() {
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

// internKind returns the EntryKind for a stored kind without allocating for
// the known ones.
func internKind(b []byte) EntryKind {
	switch EntryKind(b) {
	case KindUserMessage:
		return KindUserMessage
	case KindAssistantMessage:
		return KindAssistantMessage
	case KindToolResult:
		return KindToolResult
	case KindToolCall:
		return KindToolCall
	case KindToolCompletion:
		return KindToolCompletion
	case KindProviderChange:
		return KindProviderChange
	case KindModelChange:
		return KindModelChange
	case KindPersonaChange:
		return KindPersonaChange
	case KindReasoningChange:
		return KindReasoningChange
	case KindUsage:
		return KindUsage
	case KindCheckpoint:
		return KindCheckpoint
	case KindCompaction:
		return KindCompaction
	case KindFork:
		return KindFork
	case KindSubagentOutcome:
		return KindSubagentOutcome
	case KindLayers:
		return KindLayers
	case KindHookVerdict:
		return KindHookVerdict
	}
	return EntryKind(b)
}
