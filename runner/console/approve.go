package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/clusterapproval"
	"github.com/aerie-run/aerie/runner/decide"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// decidedBy is who a console decision records, followed by the user an
// authenticating proxy named.
const decidedBy = "aerie console"

// csrfToken is the approval form's token for a session of tenant: a MAC,
// under the server's key, that only a page this console served holds.
func (s *Server) csrfToken(tenant string, id uuid.UUID) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("approve\x00" + tenant + "\x00" + id.String()))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// user is the user an authenticating proxy in front of the console names.
func user(r *http.Request) string {
	if u := r.Header.Get("X-Forwarded-User"); u != "" {
		return u
	}
	return r.Header.Get("X-Forwarded-Email")
}

// mayDecide says whether the reader may decide approvals, and why not.
func (s *Server) mayDecide(r *http.Request) (bool, string) {
	switch {
	case s.o.ReadOnly:
		return false, "This console is read-only (--read-only)."
	case len(s.o.Approvers) > 0 && !slices.Contains(s.o.Approvers, user(r)):
		return false, "You are not one of this console's approvers (--approver)."
	case s.o.Cluster != nil && user(r) == "":
		return false, "No user is named: an authenticating proxy in front of the console must name you to decide."
	}
	return true, ""
}

// approve records the decision the approval form posted: the same
// decision aerie approve records, by "aerie console".
func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	if ok, why := s.mayDecide(r); !ok {
		s.fail(w, r, http.StatusForbidden, why, nil)
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		s.fail(w, r, http.StatusForbidden, "The decision did not come from this console's page.", nil)
		return
	}
	tenant, sess, ok := s.session(w, r)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "The form could not be read.", nil)
		return
	}
	want := s.csrfToken(tenant, sess.ID)
	if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(want)) {
		s.fail(w, r, http.StatusForbidden,
			"The form's token is missing or stale: reload the session's page and decide again.", nil)
		return
	}
	var allowed bool
	switch r.PostForm.Get("decision") {
	case "approve":
		allowed = true
	case "deny":
	default:
		s.fail(w, r, http.StatusBadRequest, "decision: choose approve or deny.", nil)
		return
	}
	call, reason := r.PostForm.Get("call"), r.PostForm.Get("reason")
	if s.o.Cluster != nil {
		if call == "" {
			s.fail(w, r, http.StatusBadRequest, "call: missing: reload the session's page and decide again.", nil)
			return
		}
		d := clusterapproval.Decision{CallID: call, Decision: clusterapproval.Deny, Reason: reason}
		if allowed {
			d.Decision = clusterapproval.Allow
		}
		if !s.decideInCluster(w, r, tenant, sess, d) {
			return
		}
	} else if !s.record(w, r, tenant, sess, transcript.ApprovalDecision{CallID: call, Allowed: allowed, Reason: reason}) {
		return
	}
	verb := "denied"
	if allowed {
		verb = "approved"
	}
	q := url.Values{"ns": {tenant}, "decided": {verb}}
	http.Redirect(w, r, "/sessions/"+sess.ID.String()+"?"+q.Encode(), http.StatusSeeOther)
}

// record journals d in the session, as aerie approve does, by "aerie
// console" and the user a proxy names. It writes the response itself when
// it fails, and then returns false.
func (s *Server) record(
	w http.ResponseWriter, r *http.Request, tenant string, sess store.Session, d transcript.ApprovalDecision,
) bool {
	d.By = decidedBy
	if u := user(r); u != "" {
		d.By += " (" + u + ")"
	}
	_, err := decide.Record(r.Context(), s.o.Store, tenant, sess.ID.String(), d)
	switch {
	case errors.Is(err, decide.ErrNothingPending), errors.Is(err, store.ErrNotFound):
		s.fail(w, r, http.StatusConflict, "Nothing awaits approval in this session any more.", nil)
		return false
	case err != nil:
		s.fail(w, r, http.StatusConflict, "The decision was not recorded: "+err.Error(), nil)
		return false
	}
	return true
}
