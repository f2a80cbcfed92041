package console_test

import (
	"bufio"
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/console"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// serve starts a console over st showing tenant.
func serve(t *testing.T, st store.Store, o console.Options) *httptest.Server {
	t.Helper()
	o.Store = st
	if o.Tenants == nil {
		o.Tenants = []string{tenant}
	}
	if o.Poll == 0 {
		o.Poll = 20 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	h, err := console.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// get fetches path and returns its status and body.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestConsole(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			f := seed(t, st, 300)
			srv := serve(t, st, console.Options{})
			t.Run("sessions", func(t *testing.T) { testSessionsPage(t, srv) })
			t.Run("session", func(t *testing.T) { testSessionPage(t, srv, f) })
			t.Run("scoping", func(t *testing.T) { testScoping(t, srv, f) })
			t.Run("tree", func(t *testing.T) { testTree(t, srv, f) })
			t.Run("overview", func(t *testing.T) { testOverview(t, srv) })
			t.Run("export", func(t *testing.T) { testExport(t, srv, f) })
			t.Run("approve", func(t *testing.T) { testApprove(t, st, srv, f) })
			t.Run("live", func(t *testing.T) { testLive(t, st, srv) })
		})
	}
}

// sessionLinks are the labels of the sessions a list page links, in order.
var sessionLink = regexp.MustCompile(`class="session-link" href="[^"]*">([^<]*?) ?<code>`)

func linked(body string) []string {
	var out []string
	for _, m := range sessionLink.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func testSessionsPage(t *testing.T, srv *httptest.Server) {
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"default: most recently updated first, no subagents", "/", []string{"forked", "pending", "big"}},
		{"phase", "/?phase=idle", []string{"forked", "pending"}},
		{"label", "/?label=BI", []string{"big"}},
		{"model", "/?model=gpt", []string{"pending"}},
		{"age", "/?age=1h", []string{"forked", "pending", "big"}},
		{"sorted by label ascending", "/?sort=label&dir=asc", []string{"big", "forked", "pending"}},
		{"sorted by entries", "/?sort=entries", []string{"big", "forked", "pending"}},
		{"sorted by outcome", "/?sort=outcome&dir=asc", []string{"forked", "pending", "big"}},
		{"subagents too", "/?all=1&sort=label&dir=asc", []string{"", "big", "forked", "pending"}},
		{"all namespaces shown", "/?ns=*&sort=label&dir=asc", []string{"big", "forked", "pending"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv, tc.query)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d\n%s", tc.query, code, body)
			}
			if diff := cmp.Diff(tc.want, linked(body)); diff != "" {
				t.Errorf("GET %s: sessions (-want +got):\n%s", tc.query, diff)
			}
		})
	}
	// By cost: only big has one; the other two tie, and go by id.
	for _, q := range []string{"/?sort=cost", "/?ns=*&sort=cost", "/?sort=cost&dir=asc"} {
		_, body := get(t, srv, q)
		got := linked(body)
		want := 0
		if strings.HasSuffix(q, "asc") {
			want = len(got) - 1
		}
		if len(got) != 3 || got[want] != "big" {
			t.Errorf("GET %s: sessions %q, want big at %d", q, got, want)
		}
	}
	_, body := get(t, srv, "/")
	for _, want := range []string{"$0.0421", "1200 in / 340 out", "completed", "claude-test", `aria-sort="descending"`} {
		if !strings.Contains(body, want) {
			t.Errorf("sessions page lacks %q", want)
		}
	}
}

// TestSessionsByNamespace: the sessions of every namespace shown, sorted
// by namespace either way, a page at a time from the store.
func TestSessionsByNamespace(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			seed(t, st, 10)
			srv := serve(t, st, console.Options{Tenants: []string{tenant, other}})
			for _, tc := range []struct {
				query, first, last string
			}{
				{"/?ns=*&sort=ns&dir=asc", "", "foreign"},
				{"/?ns=*&sort=ns", "foreign", ""},
			} {
				code, body := get(t, srv, tc.query)
				got := linked(body)
				if code != http.StatusOK || len(got) != 4 {
					t.Fatalf("GET %s: %d, sessions %q\n%s", tc.query, code, got, body)
				}
				if tc.first != "" && got[0] != tc.first || tc.last != "" && got[len(got)-1] != tc.last {
					t.Errorf("GET %s: sessions %q, want %q first or %q last", tc.query, got, tc.first, tc.last)
				}
			}
			if code, _ := get(t, srv, "/?sort=ns"); code != http.StatusOK {
				t.Errorf("GET /?sort=ns of one namespace: %d", code)
			}
		})
	}
}

func TestSessionsPagination(t *testing.T) {
	t.Parallel()
	st := backends()[0].open(t)
	ctx := context.Background()
	for i := range 120 {
		_, err := st.Create(ctx, tenant, store.NewSession{Label: "s" + string(rune('a'+i/26)) + string(rune('a'+i%26)),
			State: store.StateIdle})
		if err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, st, console.Options{})
	for _, tc := range []struct {
		query       string
		first, last string
		n           int
		prev, next  bool
	}{
		{"/?sort=label&dir=asc", "saa", "sbx", 50, false, true},
		{"/?sort=label&dir=asc&page=2", "sby", "sdv", 50, true, true},
		{"/?sort=label&dir=asc&page=3", "sdw", "sep", 20, true, false},
		{"/?sort=label&dir=asc&page=99", "sdw", "sep", 20, true, false},
	} {
		_, body := get(t, srv, tc.query)
		got := linked(body)
		if len(got) != tc.n || got[0] != tc.first || got[len(got)-1] != tc.last {
			t.Errorf("GET %s: %d sessions %s…%s, want %d %s…%s", tc.query, len(got), got[0], got[len(got)-1], tc.n, tc.first, tc.last)
		}
		if strings.Contains(body, `rel="prev"`) != tc.prev || strings.Contains(body, `rel="next"`) != tc.next {
			t.Errorf("GET %s: prev/next links %v/%v, want %v/%v", tc.query,
				strings.Contains(body, `rel="prev"`), strings.Contains(body, `rel="next"`), tc.prev, tc.next)
		}
	}
	_, body := get(t, srv, "/?sort=label&dir=asc&page=2")
	if !strings.Contains(body, `href="?dir=asc&amp;page=3&amp;sort=label"`) {
		t.Errorf("page 2 does not link page 3 with its filters:\n%s", body)
	}
	// Every namespace together: the pages of the merged list.
	for _, label := range []string{"saa2", "zz"} {
		if _, err := st.Create(ctx, "b", store.NewSession{Label: label, State: store.StateIdle}); err != nil {
			t.Fatal(err)
		}
	}
	both := serve(t, st, console.Options{Tenants: []string{tenant, "b"}})
	_, body = get(t, both, "/?ns=*&sort=label&dir=asc")
	if got := linked(body); len(got) != 50 || got[0] != "saa" || got[1] != "saa2" || !strings.Contains(body, "122 sessions") {
		t.Errorf("all namespaces, page 1: %d sessions from %v", len(got), got[:2])
	}
	_, body = get(t, both, "/?ns=*&sort=label&dir=asc&page=3")
	if got := linked(body); len(got) != 22 || got[len(got)-1] != "zz" {
		t.Errorf("all namespaces, page 3: %d sessions ending %v, want 22 ending zz", len(got), got[len(got)-1])
	}
}

func testSessionPage(t *testing.T, srv *httptest.Server, f fixture) {
	code, body := get(t, srv, "/sessions/"+f.big.ID.String())
	if code != http.StatusOK {
		t.Fatalf("GET session: %d\n%s", code, body)
	}
	if strings.Contains(body, xss) || strings.Contains(body, "<b>not bold</b>") {
		t.Errorf("the page holds an entry's markup unescaped")
	}
	if strings.Contains(body, secret) {
		t.Errorf("the page shows the secret %s", secret)
	}
	for _, want := range []string{
		html.EscapeString(xss),               // the text, as text
		"token=[redacted]",                   // the secret, masked as in the report
		"completed", "$0.0421", "1200 input", // header: outcome, cost, usage
		"sha256:0123abcd",                     // the layers' digests
		"<dt>Attempts</dt><dd>1</dd>",         // one Layers entry: one attempt
		`<details class="tool"><summary>bash`, // a tool call, folded
		"Compaction (auto)",                   // the compaction, marked
		"compacted by #",                      // and the entries it replaced
		"Subagent thread (",                   // the subagent, nested
		"child answer",                        // with its transcript
		"Subagent ended: <strong>completed",   // and its outcome
		"format=atif", "format=jsonl", "format=markdown",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("session page lacks %q", want)
		}
	}
	if n := strings.Count(body, `<details class="tool">`); n < 70 {
		t.Errorf("session page has %d tool calls, want the 74 of its stream", n)
	}
	_, body = get(t, srv, "/sessions/"+f.forked.ID.String())
	if !strings.Contains(body, "Forked from "+f.big.ID.String()+" at entry 6") ||
		!strings.Contains(body, `href="/sessions/`+f.big.ID.String()+`?ns=agents#e6"`) {
		t.Errorf("the fork's page does not mark the fork with a link to its source:\n%s", body)
	}
}

func testScoping(t *testing.T, srv *httptest.Server, f fixture) {
	for _, path := range []string{
		"/sessions/" + f.foreign.ID.String(),
		"/sessions/" + f.foreign.ID.String() + "?ns=" + other,
		"/sessions/" + f.foreign.ID.String() + "/export?format=jsonl",
		"/sessions/not-an-id",
		"/?ns=" + other,
		"/tree?ns=" + other,
	} {
		code, body := get(t, srv, path)
		if code != http.StatusNotFound || strings.Contains(body, "not yours") {
			t.Errorf("GET %s: %d, want 404 without the other tenant's session", path, code)
		}
	}
	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy %q, want scripts from the console only", csp)
	}
	for _, page := range []string{"/", "/sessions/" + f.big.ID.String(), "/tree", "/overview"} {
		_, body := get(t, srv, page)
		if regexp.MustCompile(`<script>|<script [^>]*>[^<]`).MatchString(strings.ReplaceAll(body, html.EscapeString(xss), "")) {
			t.Errorf("%s has an inline script", page)
		}
	}
}

func testTree(t *testing.T, srv *httptest.Server, f fixture) {
	_, body := get(t, srv, "/tree")
	for _, want := range []string{f.big.ID.String()[:8], f.child.ID.String()[:8], f.forked.ID.String()[:8],
		"explorer", "ended completed", "10 in / 5 out", "$0.0010", `role="tree"`} {
		if !strings.Contains(body, want) {
			t.Errorf("tree lacks %q", want)
		}
	}
	// The subagent and the fork are under big.
	bigAt, childAt := strings.Index(body, f.big.ID.String()[:8]), strings.Index(body, f.child.ID.String()[:8])
	if nested := body[bigAt:childAt]; !strings.Contains(nested, `<ul role="group">`) {
		t.Errorf("the subagent is not nested under its parent")
	}
}

func testOverview(t *testing.T, srv *httptest.Server) {
	code, body := get(t, srv, "/overview")
	if code != http.StatusOK || !strings.Contains(body, "Sessions by namespace") || !strings.Contains(body, "claude-test") {
		t.Errorf("overview: %d\n%s", code, body)
	}
	_, data := get(t, srv, "/overview.json")
	for _, want := range []string{`"name":"agents","values":[`, `"name":"claude-test","values":[`, `"id":"cost-by-model"`, `0.0421]`, `1540]`} {
		if !strings.Contains(data, want) {
			t.Errorf("overview.json lacks %s:\n%s", want, data)
		}
	}
}

func testExport(t *testing.T, srv *httptest.Server, f fixture) {
	for _, tc := range []struct{ format, want string }{
		{"jsonl", `"kind":"compaction"`},
		{"markdown", "child answer"},
		{"atif", `"schema_version"`},
	} {
		code, body := get(t, srv, "/sessions/"+f.big.ID.String()+"/export?format="+tc.format)
		if code != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("export %s: %d, want %q in:\n%.500s", tc.format, code, tc.want, body)
		}
	}
	if code, _ := get(t, srv, "/sessions/"+f.big.ID.String()+"/export?format=pdf"); code != http.StatusBadRequest {
		t.Errorf("export pdf: %d, want 400", code)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func testApprove(t *testing.T, st store.Store, srv *httptest.Server, f fixture) {
	page := "/sessions/" + f.pending.ID.String()
	_, body := get(t, srv, page)
	if !strings.Contains(body, "Awaiting approval: bash") || !strings.Contains(body, "pushes need a person") {
		t.Fatalf("the paused session shows no pending call:\n%s", body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("the approval form has no CSRF token")
	}
	post := func(form url.Values, header http.Header) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+page+"/approve?ns="+tenant, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header[k] = v
		}
		c := *srv.Client()
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		header http.Header
		want   int
	}{
		{"no token", url.Values{"decision": {"approve"}, "call": {"call-p"}}, nil, http.StatusForbidden},
		{"a wrong token", url.Values{"decision": {"approve"}, "csrf": {"x" + m[1]}}, nil, http.StatusForbidden},
		{"another site", url.Values{"decision": {"approve"}, "csrf": {m[1]}},
			http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"no decision", url.Values{"csrf": {m[1]}}, nil, http.StatusBadRequest},
		{"another call", url.Values{"decision": {"approve"}, "csrf": {m[1]}, "call": {"call-x"}}, nil, http.StatusConflict},
		{"approved", url.Values{"decision": {"approve"}, "csrf": {m[1]}, "call": {"call-p"}, "reason": {"ok to push"}},
			http.Header{"Sec-Fetch-Site": {"same-origin"}}, http.StatusSeeOther},
	} {
		if got := post(tc.form, tc.header); got != tc.want {
			t.Errorf("%s: POST approve: %d, want %d", tc.name, got, tc.want)
		}
	}
	entries, err := st.Entries(context.Background(), tenant, f.pending.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := transcript.ApprovalDecision{CallID: "call-p", Allowed: true, Reason: "ok to push", By: "aerie console"}
	var got []transcript.ApprovalDecision
	for _, e := range entries {
		if d, ok := e.Payload.(transcript.ApprovalDecision); ok {
			got = append(got, d)
		}
	}
	if diff := cmp.Diff([]transcript.ApprovalDecision{want}, got); diff != "" {
		t.Errorf("decisions stored (-want +got):\n%s", diff)
	}
	_, body = get(t, srv, page)
	if !strings.Contains(body, "Decided already: approved by aerie console") {
		t.Errorf("the page does not show the decision")
	}
	ro := serve(t, st, console.Options{ReadOnly: true})
	_, body = get(t, ro, page)
	if strings.Contains(body, `name="csrf"`) || !strings.Contains(body, "read-only") {
		t.Errorf("a read-only console offers the approval form")
	}
	gated := serve(t, st, console.Options{Approvers: []string{"ada@example.com"}})
	req, _ := http.NewRequest(http.MethodGet, gated.URL+page, nil)
	req.Header.Set("X-Forwarded-Email", "bob@example.com")
	resp, err := gated.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if strings.Contains(string(b), `name="csrf"`) || !strings.Contains(string(b), "not one of this console") {
		t.Errorf("an approver list lets another user decide")
	}
}

// TestConsoleLiveNotify: over PostgreSQL a live transcript wakes on the
// store's notification: with the poll interval an hour, a viewer still
// gets each new entry and the end.
func TestConsoleLiveNotify(t *testing.T) {
	t.Parallel()
	st := backends()[1].open(t)
	srv := serve(t, st, console.Options{Poll: time.Hour})
	testLive(t, st, srv)
}

func testLive(t *testing.T, st store.Store, srv *httptest.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang fails, it is timed nowhere
	defer cancel()
	sess, err := st.Create(ctx, tenant, store.NewSession{Label: "live", State: store.StateActive,
		Entries: []transcript.Entry{{Seq: 1, Payload: transcript.UserMessage{Content: text("start")}, CreatedAt: time.Now()}}})
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, srv, "/sessions/"+sess.ID.String())
	if !strings.Contains(body, `data-live="/sessions/`+sess.ID.String()+`/events?ns=agents&amp;after=1"`) {
		t.Fatalf("an active session's page does not offer its events:\n%s", body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/sessions/"+sess.ID.String()+"/events?after=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events: Content-Type %q", ct)
	}
	// The writer is waited for: with notifications, the stream can end
	// before SetState has returned, and a context cancelled then would
	// fail a write that was made.
	written := make(chan struct{})
	defer func() { <-written }()
	go func() {
		defer close(written)
		for i := int64(2); i <= 4; i++ {
			time.Sleep(30 * time.Millisecond)
			e := transcript.Entry{Seq: i, Payload: transcript.AssistantMessage{Content: text("step " + xss)}, CreatedAt: time.Now()}
			if err := st.Append(ctx, tenant, sess.ID, []transcript.Entry{e}); err != nil {
				t.Error(err)
			}
		}
		if err := st.SetState(ctx, tenant, sess.ID, store.StateCompleted); err != nil {
			t.Error(err)
		}
	}()
	var events []string
	var data strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			events = append(events, strings.TrimPrefix(line, "event: "))
		case strings.HasPrefix(line, "data: "):
			data.WriteString(strings.TrimPrefix(line, "data: ") + "\n")
		}
	}
	if len(events) < 2 || events[len(events)-1] != "end" {
		t.Fatalf("events %v, want entries then end", events)
	}
	got := data.String()
	if strings.Count(got, `class="entry entry-assistant`) != 3 || strings.Contains(got, xss) ||
		!strings.Contains(got, html.EscapeString(xss)) || !strings.HasSuffix(got, "completed\n") {
		t.Errorf("events' data: want the 3 new entries escaped, then the state:\n%s", got)
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	st := backends()[0].open(t)
	for _, tc := range []struct {
		name string
		o    console.Options
		want string
	}{
		{"no store", console.Options{Tenants: []string{"a"}}, "Options.Store"},
		{"no tenant", console.Options{Store: st}, "Options.Tenants"},
		{"an empty tenant", console.Options{Store: st, Tenants: []string{""}}, "Options.Tenants"},
	} {
		if _, err := console.New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}

// testWriter writes the console's log to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
