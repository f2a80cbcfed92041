package console

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// itemsData is the data of the items template: a transcript's items and
// the ?ns= query of their links.
type itemsData struct {
	Items []item
	NS    string
}

// events follows a session as server-sent events: an "entries" event with
// the rendered items of the entries stored after ?after= (or the
// Last-Event-ID a reconnecting browser sends), its id the last sequence
// number sent, and an "end" event, with the session's state, once the
// session is no longer active. It reads the session again when the
// store's notification (PostgreSQL's LISTEN/NOTIFY, through the console's
// one listening connection) tells it changed, and every Options.Poll.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	tenant, sess, ok := s.session(w, r)
	if !ok {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, http.StatusInternalServerError, "This server cannot stream events.", nil)
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if id, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil {
		after = id
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	var changed <-chan struct{} // nil: never, the store is polled
	if s.hub != nil {
		var stop func()
		changed, stop = s.hub.subscribe(sess.ID)
		defer stop()
	}
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	ctx := r.Context()
	for {
		cur, err := s.o.Store.Session(ctx, tenant, sess.ID)
		if err != nil {
			s.o.Log.Warn("follow a session", "session", sess.ID, "error", err)
			return
		}
		if cur.LastSeq > after {
			if after, err = s.sendEntries(w, r, tenant, cur, after); err != nil {
				s.o.Log.Warn("follow a session", "session", sess.ID, "error", err)
				return
			}
		}
		if cur.State != store.StateActive {
			_, _ = fmt.Fprintf(w, "event: end\ndata: %s\n\n", cur.State)
			flusher.Flush()
			return
		}
		flusher.Flush()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-changed:
		}
	}
}

// sendEntries sends the entries of sess after seq as one event, and
// returns the last sequence number sent.
func (s *Server) sendEntries(
	w io.Writer, r *http.Request, tenant string, sess store.Session, seq int64,
) (int64, error) {
	entries, err := s.o.Store.Entries(r.Context(), tenant, sess.ID)
	if err != nil {
		return seq, fmt.Errorf("read the entries: %w", err)
	}
	var fresh []transcript.Entry
	for _, e := range entries {
		if e.Seq > seq {
			fresh = append(fresh, e)
			seq = e.Seq
		}
	}
	its := items(fresh)
	if err := nest(r.Context(), s.o.Store, tenant, sess.ID, its, 0); err != nil {
		return seq, err
	}
	var b bytes.Buffer
	if err := s.pages["session"].ExecuteTemplate(&b, "items", itemsData{Items: its, NS: nsQuery(tenant)}); err != nil {
		return seq, fmt.Errorf("render the entries: %w", err)
	}
	var ev strings.Builder
	fmt.Fprintf(&ev, "id: %d\nevent: entries\n", seq)
	for _, line := range strings.Split(b.String(), "\n") {
		ev.WriteString("data: " + strings.TrimSuffix(line, "\r") + "\n")
	}
	ev.WriteString("\n")
	_, err = io.WriteString(w, ev.String())
	return seq, err
}
