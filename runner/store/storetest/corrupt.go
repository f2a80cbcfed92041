package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// CorruptEntry writes undecodable rows behind the store's back, through
// insert, which writes a raw entry row of tenant "tenant", and count, which
// counts a session's stored rows. Reading the affected session fails with
// an error naming it and the sequence number; other sessions read fine and
// nothing is lost.
func CorruptEntry(t *testing.T, st store.Store, insert func(session uuid.UUID, seq int64, kind, payload string) error, count func(uuid.UUID) int) {
	ctx := t.Context()
	good, err := st.Create(ctx, "tenant", store.NewSession{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	msg := transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "fine"}}}
	var goodSeq int64
	for _, tc := range []struct {
		name, kind, payload string
	}{
		{"unknown kind", "telepathy", `{"thought":"x"}`},
		{"truncated JSON", "user_message", `{"content":[{"type":"te`},
		{"wrong type", "tool_call", `{"call_id":7,"name":"bash"}`},
		{"missing field", "tool_call", `{"call_id":"c1"}`},
		{"not an object", "usage", `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, err := st.Create(ctx, "tenant", store.NewSession{Dir: "/"})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Append(ctx, "tenant", bad.ID, []transcript.Entry{{Seq: 1, Payload: msg}}); err != nil {
				t.Fatal(err)
			}
			if err := insert(bad.ID, 2, tc.kind, tc.payload); err != nil {
				// PostgreSQL's json type refuses malformed JSON outright,
				// so this corruption cannot happen there.
				t.Logf("the database refuses to store it: %v", err)
				return
			}
			if err := st.Append(ctx, "tenant", bad.ID, []transcript.Entry{{Seq: 3, Payload: msg}}); err != nil {
				t.Fatalf("appending after a corrupt entry: %v", err)
			}
			goodSeq++
			if err := st.Append(ctx, "tenant", good.ID, []transcript.Entry{{Seq: goodSeq, Payload: msg}}); err != nil {
				t.Fatal(err)
			}

			for op, read := range map[string]func() error{
				"Load":    func() error { _, _, err := st.Load(ctx, "tenant", bad.ID); return err },
				"Entries": func() error { _, err := st.Entries(ctx, "tenant", bad.ID); return err },
			} {
				err := read()
				var entryErr *transcript.EntryError
				if !errors.Is(err, transcript.ErrCorruptEntry) || !errors.As(err, &entryErr) {
					t.Fatalf("%s: error %v, want a corrupt entry error", op, err)
				}
				if entryErr.Session != bad.ID || entryErr.Seq != 2 {
					t.Errorf("%s: error names session %s entry %d, want %s entry 2", op, entryErr.Session, entryErr.Seq, bad.ID)
				}
				if msg := err.Error(); !strings.Contains(msg, bad.ID.String()) || !strings.Contains(msg, "entry 2") {
					t.Errorf("%s: message %q does not name the session and entry", op, msg)
				}
			}
			// Other sessions are unaffected.
			if _, _, err := st.Load(ctx, "tenant", good.ID); err != nil {
				t.Errorf("Load of another session: %v", err)
			}
			// Nothing stored was lost.
			if n := count(bad.ID); n != 3 {
				t.Errorf("%d rows stored for the corrupt session, want 3", n)
			}
		})
	}
}
