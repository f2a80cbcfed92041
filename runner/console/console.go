// Package console serves the web console of a session store: the pages a
// person reads sessions in (the sessions list, a session's transcript, the
// tree of forks and subagents, an overview of usage and cost), a running
// session's transcript followed live, and the approval of a tool call a
// session paused on. The pages are rendered on the server with
// html/template, so every value is escaped and everything reads without
// JavaScript; the small script the pages load only follows live sessions
// and draws the overview's charts.
package console

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Store is what the console needs of runner/store. It writes nothing but
// approval decisions (Append).
type Store interface {
	List(ctx context.Context, tenant string, opts store.ListOptions) ([]store.Session, error)
	Page(ctx context.Context, tenant string, opts store.PageOptions) ([]store.Session, int, error)
	Session(ctx context.Context, tenant string, id uuid.UUID) (store.Session, error)
	Resolve(ctx context.Context, tenant, ref string) (store.Session, error)
	Load(ctx context.Context, tenant string, session uuid.UUID) (store.Session, transcript.Snapshot, error)
	Entries(ctx context.Context, tenant string, session uuid.UUID) ([]transcript.Entry, error)
	Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error
}

// Options configure a Server.
type Options struct {
	// Store holds the sessions.
	Store Store
	// Tenants are the tenants the console shows (namespaces in a cluster,
	// working directories locally); the first is the default. A session of
	// any other tenant is not found.
	Tenants []string
	// ReadOnly turns approvals off: the console then writes nothing.
	ReadOnly bool
	// Approvers, when not empty, are the only users who may decide an
	// approval, as an authenticating proxy in front names them in the
	// X-Forwarded-User or X-Forwarded-Email header.
	Approvers []string
	// Cluster, when set, decides the calls of the sessions (all of them
	// an AgentSession's: the root's label names it) in their AgentSession's
	// spec.approvals instead of the journal, for a user the proxy names
	// (X-Forwarded-User, X-Forwarded-Groups) who may patch it.
	Cluster Cluster
	// Poll is how often a live transcript looks for new entries (default
	// 500ms). Over a Store that is a Listener (PostgreSQL) a viewer wakes
	// on the store's notification instead, and Poll only bounds how late
	// it is when the listening connection is lost.
	Poll time.Duration
	// Version is aerie's version, named in the exports (default "dev").
	Version string
	// Log receives the errors of requests (default: discarded).
	Log *slog.Logger
}

// Server is the console's http.Handler.
type Server struct {
	o     Options
	mux   *http.ServeMux
	pages map[string]*template.Template
	key   []byte // signs the approval forms' CSRF tokens
	now   func() time.Time
	hub   *hub // nil: the store tells no changes, live transcripts poll
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns a console over o.Store, or an error naming the option that
// is unusable.
func New(o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("console: Options.Store is nil")
	}
	if len(o.Tenants) == 0 || slices.Contains(o.Tenants, "") {
		return nil, errors.New("console: Options.Tenants: give at least one tenant, none empty")
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, mux: http.NewServeMux(), key: make([]byte, 32), now: time.Now}
	if l, ok := o.Store.(Listener); ok {
		s.hub = newHub(l, o.Log)
	}
	if _, err := rand.Read(s.key); err != nil {
		return nil, fmt.Errorf("console: make the CSRF key: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s.pages = pages
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.sessionsPage)
	s.mux.HandleFunc("GET /tree", s.treePage)
	s.mux.HandleFunc("GET /overview", s.overviewPage)
	s.mux.HandleFunc("GET /overview.json", s.overviewData)
	s.mux.HandleFunc("GET /sessions/{id}", s.sessionPage)
	s.mux.HandleFunc("GET /sessions/{id}/export", s.exportSession)
	s.mux.HandleFunc("GET /sessions/{id}/events", s.events)
	s.mux.HandleFunc("POST /sessions/{id}/approve", s.approve)
	return s, nil
}

// Close stops the console's listening for changed sessions, if it
// started; the handler must serve no more requests then.
func (s *Server) Close() {
	if s.hub != nil {
		s.hub.close()
	}
}

// ServeHTTP serves the console, with the security headers on every
// response: no script but the console's own files, no framing, no
// sniffing.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(w, r)
}

// pageNames are the pages, each a template file of its name.
var pageNames = []string{"sessions", "session", "tree", "overview", "error"}

func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/items.html")
	if err != nil {
		return nil, fmt.Errorf("console: parse the layout: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes page with data; an error after the first byte can only be
// logged.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages[page].ExecuteTemplate(w, "layout", data); err != nil {
		s.o.Log.Error("render page", "page", page, "path", r.URL.Path, "error", err)
	}
}

// errorPage is the data of the error page.
type errorPage struct {
	Title   string
	Message string
}

// fail renders the error page with status and msg (a sentence for the
// reader; details of internal errors are logged, not shown).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	if err != nil {
		s.o.Log.Error("console request", "path", r.URL.Path, "error", err)
	}
	s.render(w, r, status, "error", errorPage{Title: http.StatusText(status), Message: msg})
}

// tenant is the tenant a request names (?ns=), the default when it names
// none; ok is false for a tenant the console does not show.
func (s *Server) tenant(r *http.Request) (string, bool) {
	ns := r.URL.Query().Get("ns")
	if ns == "" {
		return s.o.Tenants[0], true
	}
	return ns, slices.Contains(s.o.Tenants, ns)
}

// session is the session a request names by its path's id, in its tenant.
func (s *Server) session(w http.ResponseWriter, r *http.Request) (string, store.Session, bool) {
	tenant, ok := s.tenant(r)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "This console does not show that namespace.", nil)
		return "", store.Session{}, false
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "No such session: the address must hold a full session id.", nil)
		return "", store.Session{}, false
	}
	sess, err := s.o.Store.Session(r.Context(), tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "No such session in this namespace.", nil)
		return "", store.Session{}, false
	case err != nil:
		s.fail(w, r, http.StatusInternalServerError, "The session store could not be read.", err)
		return "", store.Session{}, false
	}
	return tenant, sess, true
}
