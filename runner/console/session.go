package console

import (
	"bytes"
	"net/http"
	"net/url"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/atif"
	"github.com/aerie-run/aerie/runner/decide"
	"github.com/aerie-run/aerie/runner/export"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// sessionData is the data of a session's page.
type sessionData struct {
	Title    string
	Tenant   string
	NS       string // the ?ns= query of the session's links
	S        store.Session
	Settings transcript.Settings
	Outcome  transcript.Outcome
	Result   string
	Usage    *transcript.Usage
	Attempts int
	Layers   []transcript.Layer
	Diff     *transcript.WorkspaceDiff
	Pending  *pendingView
	Items    []item
	Live     bool
	Flash    string
}

// pendingView is a tool call awaiting approval, with the form that decides
// it.
type pendingView struct {
	Session           uuid.UUID
	CallID, Tool      string
	Preview, Reason   string
	Input             string
	Hooks             []string
	Decision          *transcript.ApprovalDecision
	Token             string
	CanDecide         bool
	Why               string // why the reader cannot decide
	SessionIsSubagent bool
}

func (s *Server) sessionPage(w http.ResponseWriter, r *http.Request) {
	tenant, sess, ok := s.session(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	_, snap, err := s.o.Store.Load(ctx, tenant, sess.ID)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "The session could not be read.", err)
		return
	}
	entries, err := s.o.Store.Entries(ctx, tenant, sess.ID)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "The session could not be read.", err)
		return
	}
	d := sessionData{Title: "Session " + sessionName(sess), Tenant: tenant, NS: nsQuery(tenant), S: sess,
		Settings: snap.Settings, Usage: snap.Usage, Items: items(entries),
		Live: sess.State == store.StateActive, Flash: r.URL.Query().Get("decided")}
	if snap.Checkpoint != nil {
		d.Outcome, d.Result = snap.Checkpoint.Outcome, redact(snap.Checkpoint.Result)
	}
	for _, e := range entries {
		switch p := e.Payload.(type) {
		case transcript.Layers:
			d.Attempts++
			d.Layers = p.Layers
		case transcript.WorkspaceDiff:
			diff := p
			diff.Stat, diff.Patch, diff.Error = redact(p.Stat), redact(p.Patch), redact(p.Error)
			d.Diff = &diff
		}
	}
	if err := nest(ctx, s.o.Store, tenant, sess.ID, d.Items, 0); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "A subagent of the session could not be read.", err)
		return
	}
	if d.Pending, err = s.pending(r, tenant, sess); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "The session's pending approval could not be read.", err)
		return
	}
	s.render(w, r, http.StatusOK, "session", d)
}

// pending is the call the session's tree awaits a decision on, nil if
// none.
func (s *Server) pending(r *http.Request, tenant string, sess store.Session) (*pendingView, error) {
	if sess.State == store.StateActive {
		return nil, nil // a run is using it: nothing awaits a person
	}
	owner, _, p, ok, err := decide.Find(r.Context(), s.o.Store, tenant, sess)
	if err != nil || !ok {
		return nil, err
	}
	v := &pendingView{Session: owner.ID, CallID: p.Call.CallID, Tool: p.Request.Tool,
		Preview: redact(p.Request.Preview), Reason: redact(p.Request.Reason), Input: prettyJSON(p.Call.Input),
		Hooks: p.Request.Hooks, Decision: p.Decision, Token: s.csrfToken(tenant, sess.ID),
		SessionIsSubagent: owner.ID != sess.ID}
	v.CanDecide, v.Why = s.mayDecide(r)
	return v, nil
}

func sessionName(s store.Session) string {
	if s.Label != "" {
		return s.Label
	}
	return s.ID.String()[:8]
}

// nsQuery is the ?ns= query naming tenant.
func nsQuery(tenant string) string { return "?" + url.Values{"ns": {tenant}}.Encode() }

// exportSession serves the session's export in ?format= (atif, jsonl,
// markdown), rendered whole before the first byte is sent.
func (s *Server) exportSession(w http.ResponseWriter, r *http.Request) {
	tenant, sess, ok := s.session(w, r)
	if !ok {
		return
	}
	f, err := export.ParseFormat(r.URL.Query().Get("format"))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "format: "+err.Error(), nil)
		return
	}
	var b bytes.Buffer
	err = export.WriteStored(r.Context(), &b, s.o.Store, tenant, sess, f, r.URL.Query().Get("tree") == "1",
		atif.AgentInfo{Version: s.o.Version}, nil)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "The session could not be exported.", err)
		return
	}
	file := exportFiles[f]
	w.Header().Set("Content-Type", file.ctype)
	w.Header().Set("Content-Disposition", `attachment; filename="session-`+sess.ID.String()+"."+file.ext+`"`)
	_, _ = w.Write(b.Bytes())
}

// exportFiles are the file name extension and content type of each
// export format.
var exportFiles = map[export.Format]struct{ ext, ctype string }{
	export.ATIF:     {"json", "application/json"},
	export.JSONL:    {"jsonl", "application/jsonl"},
	export.Markdown: {"md", "text/markdown; charset=utf-8"},
}
