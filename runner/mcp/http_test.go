package mcp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// recorder keeps the headers of the requests a server received.
type recorder struct {
	mu      sync.Mutex
	headers []http.Header
}

// methodKey carries the request's method in a recorded header.
const methodKey = "X-Test-Method"

func (r *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		hdr := req.Header.Clone()
		hdr.Set(methodKey, req.Method)
		r.headers = append(r.headers, hdr)
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
}

func (r *recorder) all() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

func TestHTTPServers(t *testing.T) {
	t.Parallel()
	server := newTestServer("http-test")
	getServer := func(*http.Request) *sdk.Server { return server }
	var streamRec, sseRec recorder
	streamable := httptest.NewServer(streamRec.wrap(sdk.NewStreamableHTTPHandler(getServer, nil)))
	t.Cleanup(streamable.Close)
	sse := httptest.NewServer(sseRec.wrap(sdk.NewSSEHandler(getServer, nil)))
	t.Cleanup(sse.Close)
	headers := map[string]string{"Authorization": "Bearer ${TOKEN}", "X-Team": "infra", "Accept": "text/plain"}
	servers := []Server{
		{ID: "h", Type: TypeHTTP, URL: streamable.URL + "/mcp", Headers: headers, StartupTimeout: 10 * time.Second, ToolTimeout: 10 * time.Second},
		{ID: "s", Type: TypeSSE, URL: sse.URL, Headers: headers, StartupTimeout: 10 * time.Second, ToolTimeout: 10 * time.Second},
	}
	m := New(servers, Options{HTTPClient: streamable.Client()})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, id := range []string{"h", "s"} {
		r := lookup(t, m, "mcp__"+id+"__echo").Run(t.Context(), json.RawMessage(`{"text":"over `+id+`"}`))
		if r.IsError || r.Content != "over "+id {
			t.Errorf("%s: %+v", id, r)
		}
		if r := lookup(t, m, "mcp__"+id+"__fail").Run(t.Context(), nil); !r.IsError || r.Content != "it broke" {
			t.Errorf("%s: %+v", id, r)
		}
	}
	for name, rec := range map[string]*recorder{"streamable": &streamRec, "sse": &sseRec} {
		all := rec.all()
		if len(all) == 0 {
			t.Fatalf("%s: no requests", name)
		}
		for _, h := range all {
			// Values as written; the protocol's own headers stay the SDK's:
			// the streamable transport sets Accept on every request, the SSE
			// transport on its stream.
			sdkAccept := name == "streamable" || h.Get(methodKey) == http.MethodGet
			if h.Get("Authorization") != "Bearer ${TOKEN}" || h.Get("X-Team") != "infra" || (h.Get("Accept") == "text/plain") == sdkAccept {
				t.Errorf("%s: request headers %v", name, h)
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestHTTPServerUnreachable(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	url := down.URL + "/mcp"
	down.Close()
	notMCP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no MCP here", http.StatusNotFound)
	}))
	t.Cleanup(notMCP.Close)
	m := New([]Server{
		{ID: "down", Type: TypeHTTP, URL: url, Required: true, StartupTimeout: 5 * time.Second, File: "down.yaml"},
		{ID: "notmcp", Type: TypeHTTP, URL: notMCP.URL, StartupTimeout: 5 * time.Second, File: "notmcp.yaml"},
	}, Options{})
	err := m.Start(t.Context())
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "required MCP server down (down.yaml): connect: ") || strings.Contains(err.Error(), "notmcp") {
		t.Fatalf("error %v", err)
	}
	for _, st := range m.Status() {
		if st.State != StateFailed || st.Error == "" {
			t.Errorf("%+v", st)
		}
	}
	if len(m.Tools()) != 0 {
		t.Errorf("tools %v", toolNames(m.Tools()))
	}
}
