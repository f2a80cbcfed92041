package console

import (
	"bytes"
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// pageSize is the number of sessions of a page of the sessions list.
const pageSize = 50

// allTenants is the ?ns= value of the sessions list that lists every tenant
// the console shows.
const allTenants = "*"

// listQuery is what the sessions list is asked for: its filters, order and
// page, from the request's query.
type listQuery struct {
	NS, Phase, Label, Model, Age, Sort string
	Desc, All                          bool
	Page                               int
}

// ages are the choices of the age filter: sessions updated within it.
var ages = []age{
	{"1h", "last hour", time.Hour},
	{"24h", "last 24 hours", 24 * time.Hour},
	{"7d", "last 7 days", 7 * 24 * time.Hour},
	{"30d", "last 30 days", 30 * 24 * time.Hour},
}

// age is a choice of the age filter.
type age struct {
	Value, Text string
	D           time.Duration
}

// defaultSort is the column the list is sorted by unless asked.
const defaultSort = "updated"

// sortKeys are the columns the list sorts by, each ascending.
var sortKeys = map[string]func(a, b store.Session) int{
	defaultSort: func(a, b store.Session) int { return a.UpdatedAt.Compare(b.UpdatedAt) },
	"created":   func(a, b store.Session) int { return a.CreatedAt.Compare(b.CreatedAt) },
	"entries":   func(a, b store.Session) int { return cmp.Compare(a.EntryCount, b.EntryCount) },
	"label":     func(a, b store.Session) int { return strings.Compare(a.Label, b.Label) },
	"phase":     func(a, b store.Session) int { return strings.Compare(string(a.State), string(b.State)) },
	"model":     func(a, b store.Session) int { return strings.Compare(a.Settings.Model, b.Settings.Model) },
	"ns":        func(a, b store.Session) int { return strings.Compare(a.Tenant, b.Tenant) },
}

// rowSortKeys are the orders of what a row reads from the session's
// entries (the store keeps them in its row too, and sorts a tenant's pages
// by them itself): what merges the pages of several namespaces.
var rowSortKeys = map[string]func(a, b row) int{
	"outcome": func(a, b row) int { return strings.Compare(string(a.Outcome), string(b.Outcome)) },
	"cost":    func(a, b row) int { return cmp.Compare(usdOf(a.Usage), usdOf(b.Usage)) },
}

// usdOf is a usage's cost, 0 for none.
func usdOf(u *transcript.Usage) float64 {
	if u == nil {
		return 0
	}
	return u.CostUSD
}

func parseListQuery(q url.Values) listQuery {
	lq := listQuery{
		NS: q.Get("ns"), Phase: q.Get("phase"), Label: strings.TrimSpace(q.Get("label")),
		Model: strings.TrimSpace(q.Get("model")), Age: q.Get("age"), Sort: q.Get("sort"),
		Desc: q.Get("dir") != "asc", All: q.Get("all") == "1",
	}
	_, ok := sortKeys[lq.Sort]
	if _, byRow := rowSortKeys[lq.Sort]; !ok && !byRow {
		lq.Sort = defaultSort
	}
	lq.Page, _ = strconv.Atoi(q.Get("page"))
	lq.Page = max(lq.Page, 1)
	return lq
}

// values is the query of lq, with changes applied (a key set to "" is
// left out).
func (lq listQuery) values(changes ...string) string {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("ns", lq.NS)
	set("phase", lq.Phase)
	set("label", lq.Label)
	set("model", lq.Model)
	set("age", lq.Age)
	if lq.Sort != defaultSort {
		set("sort", lq.Sort)
	}
	if !lq.Desc {
		set("dir", "asc")
	}
	if lq.All {
		set("all", "1")
	}
	if lq.Page > 1 {
		set("page", strconv.Itoa(lq.Page))
	}
	for i := 0; i+1 < len(changes); i += 2 {
		v.Del(changes[i])
		set(changes[i], changes[i+1])
	}
	return "?" + v.Encode()
}

// SortLink is the address that sorts the list by key: descending first,
// then the other way when it is sorted by key already.
func (lq listQuery) SortLink(key string) string {
	dir := ""
	if lq.Sort == key && lq.Desc {
		dir = "asc"
	}
	return lq.values("sort", key, "dir", dir, "page", "")
}

// sortState is how a column shows the list's order: its aria-sort
// value and its arrow.
type sortState struct{ Aria, Mark string }

// Sorted is the sortState of the column key.
func (lq listQuery) Sorted(key string) sortState {
	switch {
	case lq.Sort != key:
		return sortState{"none", ""}
	case lq.Desc:
		return sortState{"descending", "▼"}
	}
	return sortState{"ascending", "▲"}
}

// row is one session of the list, with what its stream says of it.
type row struct {
	store.Session
	Outcome transcript.Outcome
	Usage   *transcript.Usage
}

// sessionsData is the data of the sessions page.
type sessionsData struct {
	Title      string
	Q          listQuery
	Tenants    []string
	Phases     []store.State
	Ages       []age
	Rows       []row
	Total      int
	First      int
	Pages      int
	Prev, Next string
	Now        time.Time
}

func (s *Server) sessionsPage(w http.ResponseWriter, r *http.Request) {
	lq := parseListQuery(r.URL.Query())
	tenants := s.o.Tenants[:1]
	switch {
	case lq.NS == allTenants:
		tenants = s.o.Tenants
	case lq.NS != "" && !slices.Contains(s.o.Tenants, lq.NS):
		s.fail(w, r, http.StatusNotFound, "This console does not show that namespace.", nil)
		return
	case lq.NS != "":
		tenants = []string{lq.NS}
	}
	now := s.now()
	list, total, err := s.page(r, tenants, lq, now)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "The session store could not be read.", err)
		return
	}
	d := sessionsData{Title: "Sessions", Q: lq, Tenants: s.o.Tenants, Phases: phases, Ages: ages,
		Total: total, Now: now}
	d.Pages = max(1, (total+pageSize-1)/pageSize)
	if lq.Page > d.Pages { // past the end: the last page
		lq.Page = d.Pages
		if list, total, err = s.page(r, tenants, lq, now); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "The session store could not be read.", err)
			return
		}
		d.Q, d.Total = lq, total
	}
	d.First = (lq.Page - 1) * pageSize
	for _, sess := range list {
		d.Rows = append(d.Rows, s.rowOf(r, sess))
	}
	if lq.Page > 1 {
		d.Prev = lq.values("page", strconv.Itoa(lq.Page-1))
	}
	if lq.Page < d.Pages {
		d.Next = lq.values("page", strconv.Itoa(lq.Page+1))
	}
	s.render(w, r, http.StatusOK, "sessions", d)
}

// page reads the page lq asks for of the sessions of tenants, and how many
// pass its filters: from the store's Page for one tenant; for several, the
// first sessions of each through the page, merged.
func (s *Server) page(r *http.Request, tenants []string, lq listQuery, now time.Time) ([]store.Session, int, error) {
	o := store.PageOptions{State: store.State(lq.Phase), Label: lq.Label, Model: lq.Model, Subagents: lq.All,
		Order: store.PageOrder(lq.Sort), Desc: lq.Desc, Offset: (lq.Page - 1) * pageSize, Limit: pageSize}
	if !slices.Contains(phases, o.State) {
		o.State = ""
	}
	for _, a := range ages {
		if a.Value == lq.Age {
			o.UpdatedSince = now.Add(-a.D)
		}
	}
	if len(tenants) == 1 {
		return s.o.Store.Page(r.Context(), tenants[0], o)
	}
	first := o.Offset
	o.Offset, o.Limit = 0, first+pageSize
	var list []store.Session
	total := 0
	for _, t := range tenants {
		l, n, err := s.o.Store.Page(r.Context(), t, o)
		if err != nil {
			return nil, 0, err
		}
		list, total = append(list, l...), total+n
	}
	less := sortKeys[lq.Sort]
	if byRow, ok := rowSortKeys[lq.Sort]; ok {
		rows := map[store.Session]row{}
		for _, sess := range list {
			rows[sess] = s.rowOf(r, sess)
		}
		less = func(a, b store.Session) int { return byRow(rows[a], rows[b]) }
	}
	slices.SortFunc(list, func(a, b store.Session) int {
		if lq.Desc {
			a, b = b, a
		}
		if c := less(a, b); c != 0 {
			return c
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	return list[min(first, len(list)):min(first+pageSize, len(list))], total, nil
}

// phases are the choices of the phase filter.
var phases = []store.State{
	store.StateActive, store.StateIdle, store.StateCompleted, store.StateFailed, store.StateCancelled,
}

// rowOf is the list's row of sess: its outcome and usage from its
// snapshot, none when it cannot be read.
func (s *Server) rowOf(r *http.Request, sess store.Session) row {
	rw := row{Session: sess}
	_, snap, err := s.o.Store.Load(r.Context(), sess.Tenant, sess.ID)
	if err != nil {
		s.o.Log.Warn("read a session's usage", "session", sess.ID, "error", err)
		return rw
	}
	rw.Usage = snap.Usage
	if snap.Checkpoint != nil {
		rw.Outcome = snap.Checkpoint.Outcome
	}
	return rw
}
