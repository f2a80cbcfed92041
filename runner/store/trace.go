package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// prepareTrace fills a trace's id and time and encodes its calls.
func prepareTrace(tr Trace) (Trace, []byte, error) {
	if tr.Session == uuid.Nil {
		return Trace{}, nil, errors.New("trace without session")
	}
	if tr.ID == uuid.Nil {
		// Version 7 ids grow with time, so listing by id keeps the order
		// traces were added in, even within one clock tick.
		id, err := uuid.NewV7()
		if err != nil {
			return Trace{}, nil, fmt.Errorf("trace id: %w", err)
		}
		tr.ID = id
	}
	if tr.CreatedAt.IsZero() {
		tr.CreatedAt = now()
	}
	tr.CreatedAt = tr.CreatedAt.UTC().Truncate(time.Microsecond)
	data, err := json.Marshal(traceData{CallID: tr.CallID, Proposals: tr.Proposals, Aggregate: tr.Aggregate})
	if err != nil {
		return Trace{}, nil, fmt.Errorf("encode trace: %w", err)
	}
	return tr, data, nil
}

func decodeTrace(tr *Trace, data []byte) error {
	var d traceData
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("session %s: trace %s: %w: %w", tr.Session, tr.ID, transcript.ErrCorruptEntry, err)
	}
	tr.CallID, tr.Proposals, tr.Aggregate = d.CallID, d.Proposals, d.Aggregate
	return nil
}
