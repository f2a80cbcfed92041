package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// Line is one line of the JSON Lines export: one stored entry. Its shape is
// stable: every field is always present, and payload is the entry's
// payload exactly as the store keeps it (the JSON of the transcript type
// its kind names).
type Line struct {
	// Session is the session's id, so that the lines of several sessions
	// can be concatenated.
	Session uuid.UUID `json:"session"`
	// Seq is the entry's sequence number in its session.
	Seq int64 `json:"seq"`
	// Kind is the entry kind: user_message, assistant_message,
	// tool_result, tool_call, tool_completion, usage, compaction, ...
	Kind transcript.EntryKind `json:"kind"`
	// CreatedAt is when the entry was produced, RFC 3339 with nanoseconds.
	CreatedAt time.Time `json:"created_at"`
	// CompactedBy is the sequence number of the compaction checkpoint that
	// replaced the entry in the model's context; null while it is active.
	CompactedBy *int64 `json:"compacted_by"`
	// Payload is the entry's content.
	Payload json.RawMessage `json:"payload"`
}

func writeJSONL(w io.Writer, in Input) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // tool output is full of < and >
	if err := encodeLines(enc, in); err != nil {
		return err
	}
	return bw.Flush()
}

// encodeLines encodes the session's entries, then its children's, depth
// first: a child's lines follow its parent's whole stream.
func encodeLines(enc *json.Encoder, in Input) error {
	for _, e := range in.Entries {
		payload, err := transcript.EncodePayload(e.Payload)
		if err != nil {
			return fmt.Errorf("export entry %d of %s: %w", e.Seq, in.Session.ID, err)
		}
		l := Line{Session: in.Session.ID, Seq: e.Seq, Kind: e.Kind(), CreatedAt: e.CreatedAt.UTC(), Payload: payload}
		if e.CompactedBy != 0 {
			l.CompactedBy = &e.CompactedBy
		}
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("export entry %d: %w", e.Seq, err)
		}
	}
	for _, c := range in.Children {
		if err := encodeLines(enc, c); err != nil {
			return fmt.Errorf("subagent session %s: %w", c.Session.ID, err)
		}
	}
	return nil
}
