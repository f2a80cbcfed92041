package events

import (
	"encoding/json"
	"io"
	"sync"
)

// JSONL writes events as JSON Lines: one object per event, in order. Text
// deltas are left out unless Deltas is set: the assistant_message event
// carries the whole text, and a log of one line per token helps nobody
// reading `kubectl logs`.
type JSONL struct {
	mu     sync.Mutex
	enc    *json.Encoder
	deltas bool
	err    error
}

// NewJSONL returns a JSONL writer to w; deltas includes text and reasoning
// deltas.
func NewJSONL(w io.Writer, deltas bool) *JSONL {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &JSONL{enc: enc, deltas: deltas}
}

// Observe writes e. A write error is kept (see Err) and later events are
// dropped: a closed pipe must not stop the agent.
func (j *JSONL) Observe(e Event) {
	if !j.deltas && (e.Type == TextDelta || e.Type == ReasoningDelta) {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	j.err = j.enc.Encode(e)
}

// Err returns the first write error.
func (j *JSONL) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}
