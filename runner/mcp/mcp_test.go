package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aerie-run/aerie/runner/tools"
)

// memServers connects every server to a fresh newTestServer over the
// SDK's in-memory transports; the server sessions are recorded so that a
// test can cut them.
type memServers struct {
	t        testing.TB
	mu       sync.Mutex
	sessions map[string][]*sdk.ServerSession
	dials    map[string]int
}

func newMemServers(t testing.TB) *memServers {
	m := &memServers{t: t, sessions: map[string][]*sdk.ServerSession{}, dials: map[string]int{}}
	t.Cleanup(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, ss := range m.sessions {
			for _, s := range ss {
				_ = s.Close() // the sessions cut are closed already
			}
		}
	})
	return m
}

func (m *memServers) dial(srv Server) sdk.Transport {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dials[srv.ID]++
	if strings.HasPrefix(srv.ID, "silent") {
		return silentTransport{}
	}
	ct, st := sdk.NewInMemoryTransports()
	ss, err := newTestServer(srv.ID).Connect(context.Background(), st, nil)
	if err != nil {
		m.t.Errorf("connect the test server: %v", err)
	}
	m.sessions[srv.ID] = append(m.sessions[srv.ID], ss)
	return ct
}

// cut closes the server side of srv's latest session.
func (m *memServers) cut(id string) {
	m.mu.Lock()
	ss := m.sessions[id]
	m.mu.Unlock()
	if err := ss[len(ss)-1].Close(); err != nil {
		m.t.Errorf("cut %s: %v", id, err)
	}
}

// silentTransport connects to a server that never answers.
type silentTransport struct{}

func (silentTransport) Connect(context.Context) (sdk.Connection, error) {
	return &silentConn{closed: make(chan struct{})}, nil
}

type silentConn struct {
	once   sync.Once
	closed chan struct{}
}

func (c *silentConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-c.closed:
		return nil, sdk.ErrConnectionClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (c *silentConn) Write(context.Context, jsonrpc.Message) error { return nil }
func (c *silentConn) Close() error                                 { c.once.Do(func() { close(c.closed) }); return nil }
func (c *silentConn) SessionID() string                            { return "" }

func srv(id string, mods ...func(*Server)) Server {
	s := Server{ID: id, Type: TypeStdio, Command: "unused", StartupTimeout: 5 * time.Second, ToolTimeout: 5 * time.Second, File: "/l/mcp_servers/" + id + ".yaml"}
	for _, m := range mods {
		m(&s)
	}
	return s
}

func startMem(t *testing.T, servers ...Server) (*Manager, *memServers, error) {
	t.Helper()
	mem := newMemServers(t)
	m := New(servers, Options{dial: mem.dial})
	err := m.Start(t.Context())
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m, mem, err
}

func toolNames(ts []tools.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name())
	}
	return out
}

func lookup(t *testing.T, m *Manager, name string) tools.Tool {
	t.Helper()
	for _, tool := range m.Tools() {
		if tool.Name() == name {
			return tool
		}
	}
	t.Fatalf("no tool %s in %v", name, toolNames(m.Tools()))
	return nil
}

func sortedNames(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return out
}

func TestManagerTools(t *testing.T) {
	t.Parallel()
	m, _, err := startMem(t, srv("t"), srv("disabled", func(s *Server) { s.Disabled = true }))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sortedNames(testToolNames), sortedNames(toolNames(m.Tools()))); diff != "" {
		t.Errorf("tools (-want +got)\n%s", diff)
	}
	st := m.Status()
	if len(st) != 1 || st[0].State != StateConnected || st[0].Server != "t 1.0.0" || len(st[0].Warnings) != 1 ||
		!strings.Contains(st[0].Warnings[0], `tool "dotted.name" is not offered: mcp__t__dotted.name is not a name model APIs accept`) {
		t.Errorf("status %+v", st)
	}
	echo := lookup(t, m, "mcp__t__echo")
	if echo.Description() != "Echo the text." {
		t.Errorf("description %q", echo.Description())
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(echo.Schema(), &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil {
		t.Errorf("schema %s: %v", echo.Schema(), err)
	}
	tests := []struct {
		tool, args string
		want       tools.Result
	}{
		{"echo", `{"text":"hi"}`, tools.Result{Content: "hi"}},
		{"fail", ``, tools.Result{Content: "it broke", IsError: true}},
		{"fail", `null`, tools.Result{Content: "it broke", IsError: true}},
		{"mixed", `{}`, tools.Result{Content: "a chart:\n[image: image/png, 8 bytes, not shown]\n[audio: audio/wav, 4 bytes, not shown]\n" +
			"[resource: file:///r.txt (r.txt): the report]\n[resource: file:///a.md]\n# A\n[resource: file:///b.bin, application/octet-stream, 3 bytes, not shown]"}},
		{"structured", `{}`, tools.Result{Content: `{"count":3}`}},
		{"empty", `{}`, tools.Result{Content: "(the tool returned no content)"}},
	}
	for _, tt := range tests {
		got := lookup(t, m, "mcp__t__"+tt.tool).Run(t.Context(), json.RawMessage(tt.args))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s %s (-want +got)\n%s", tt.tool, tt.args, diff)
		}
	}
	// Arguments the server's schema refuses are an error for the model.
	if r := echo.Run(t.Context(), json.RawMessage(`{"text":5}`)); !r.IsError || !strings.Contains(r.Content, `validating /properties/text: type: 5 has type "integer", want "string"`) {
		t.Errorf("bad arguments: %+v", r)
	}
}

func TestManagerToolsFilter(t *testing.T) {
	t.Parallel()
	m, _, err := startMem(t, srv("t", func(s *Server) { s.Tools = []string{"echo", "nope", "dotted.name"} }), srv("none", func(s *Server) { s.Tools = []string{} }))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"mcp__t__echo"}, toolNames(m.Tools())); diff != "" {
		t.Errorf("tools (-want +got)\n%s", diff)
	}
	var warnings []string
	for _, st := range m.Status() {
		warnings = append(warnings, st.Warnings...)
	}
	want := []string{
		`tool "dotted.name" is not offered: mcp__t__dotted.name is not a name model APIs accept (letters, digits, _ and -, at most 128)`,
		`tools lists "nope", which the server does not have`,
	}
	if diff := cmp.Diff(want, warnings); diff != "" {
		t.Errorf("warnings (-want +got)\n%s", diff)
	}
}

func TestManagerToolTimeout(t *testing.T) {
	t.Parallel()
	m, _, err := startMem(t, srv("t", func(s *Server) { s.ToolTimeout = 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	sleep := lookup(t, m, "mcp__t__sleep")
	r := sleep.Run(t.Context(), json.RawMessage(`{"ms":10000}`))
	if want := "mcp__t__sleep: no result within the tool timeout of 100ms; the call was cancelled"; !r.IsError || r.Content != want {
		t.Errorf("%+v", r)
	}
	// The connection is still good.
	if r := sleep.Run(t.Context(), json.RawMessage(`{"ms":1}`)); r.IsError || r.Content != "slept" {
		t.Errorf("%+v", r)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if r := sleep.Run(ctx, json.RawMessage(`{"ms":10000}`)); !r.IsError || r.Content != "mcp__t__sleep: cancelled" {
		t.Errorf("%+v", r)
	}
}

func TestManagerReconnect(t *testing.T) {
	t.Parallel()
	m, mem, err := startMem(t, srv("t", func(s *Server) { s.Required = true }))
	if err != nil {
		t.Fatal(err)
	}
	echo := lookup(t, m, "mcp__t__echo")
	mem.cut("t")
	deadline := time.Now().Add(10 * time.Second)
	for m.Status()[0].State != StateFailed {
		if time.Now().After(deadline) {
			t.Fatal("the lost connection was not noticed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := echo.Run(t.Context(), json.RawMessage(`{"text":"x"}`))
	if !r.IsError || r.Content != "mcp__t__echo: MCP server t is not connected: the connection was lost" {
		t.Errorf("%+v", r)
	}
	if err := m.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := echo.Run(t.Context(), json.RawMessage(`{"text":"back"}`)); r.IsError || r.Content != "back" {
		t.Errorf("%+v", r)
	}
	if mem.dials["t"] != 2 {
		t.Errorf("%d dials", mem.dials["t"])
	}
	// Ensure leaves connected servers alone.
	if err := m.Ensure(t.Context()); err != nil || mem.dials["t"] != 2 {
		t.Errorf("%v, %d dials", err, mem.dials["t"])
	}
}

func TestManagerStartupFailure(t *testing.T) {
	t.Parallel()
	short := func(s *Server) { s.StartupTimeout = 200 * time.Millisecond }
	required := func(s *Server) { s.Required = true }
	m, mem, err := startMem(t, srv("t"), srv("silent-optional", short), srv("silent-required", short, required))
	want := "required MCP server silent-required (/l/mcp_servers/silent-required.yaml): connect: no answer within the startup timeout of 200ms"
	if err == nil || err.Error() != want || !errors.Is(err, ErrRequired) {
		t.Fatalf("error %v, want %q", err, want)
	}
	// The others are still there.
	if r := lookup(t, m, "mcp__t__echo").Run(t.Context(), json.RawMessage(`{"text":"ok"}`)); r.Content != "ok" {
		t.Errorf("%+v", r)
	}
	states := map[string]State{}
	for _, st := range m.Status() {
		states[st.ID] = st.State
		if st.ID != "t" && (len(st.Tools) != 0 || !strings.Contains(st.Error, "startup timeout")) {
			t.Errorf("status %+v", st)
		}
	}
	if diff := cmp.Diff(map[string]State{"t": StateConnected, "silent-optional": StateFailed, "silent-required": StateFailed}, states); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// Before each turn: the required one is tried again and still fails
	// the turn.
	if err := m.Ensure(t.Context()); err == nil || !strings.Contains(err.Error(), "silent-required") || strings.Contains(err.Error(), "silent-optional") {
		t.Errorf("Ensure: %v", err)
	}
	if mem.dials["silent-required"] != 2 || mem.dials["silent-optional"] != 1 || mem.dials["t"] != 1 {
		t.Errorf("dials %v", mem.dials)
	}
	if err := m.Start(t.Context()); err == nil {
		t.Error("a second Start was accepted")
	}
}

func TestManagerConcurrentCalls(t *testing.T) {
	t.Parallel()
	m, _, err := startMem(t, srv("t"), srv("u"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		tool := lookup(t, m, []string{"mcp__t__echo", "mcp__u__echo"}[i%2])
		wg.Go(func() {
			text := strings.Repeat("x", i)
			if r := tool.Run(t.Context(), json.RawMessage(`{"text":"`+text+`"}`)); r.IsError || r.Content != text {
				errs <- errors.New(r.Content)
			}
		})
	}
	wg.Go(func() { m.Status() })
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if r := lookup(t, m, "mcp__t__echo").Run(t.Context(), json.RawMessage(`{"text":"x"}`)); !r.IsError || !strings.Contains(r.Content, "not connected: closed") {
		t.Errorf("after Close: %+v", r)
	}
}
