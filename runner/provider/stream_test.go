package provider_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/provider"
)

// idleServer serves a body of the chunks, each flushed; then, when stall
// is set, it holds the connection open until the client goes away.
func idleServer(t *testing.T, stall bool, chunks ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, c := range chunks {
			_, _ = io.WriteString(w, c)
			f.Flush()
		}
		if stall {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// get sends a GET through the idle timeout middleware.
func get(t *testing.T, url string, timeout time.Duration) *http.Response {
	t.Helper()
	// Bounds the test should the timeout not fire: no timing is asserted.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := provider.IdleTimeout(timeout)(req, http.DefaultClient.Do)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func TestIdleTimeoutFailsAStalledBody(t *testing.T) {
	t.Parallel()
	res := get(t, idleServer(t, true, "data: one\n\n"), 100*time.Millisecond)
	b, err := io.ReadAll(res.Body)
	if string(b) != "data: one\n\n" {
		t.Errorf("read %q before the stall, want the first event", b)
	}
	if !errors.Is(err, provider.ErrStreamIdle) {
		t.Fatalf("error %v, want ErrStreamIdle", err)
	}
	if !strings.Contains(err.Error(), "nothing received for 100ms") {
		t.Errorf("error %q does not name the timeout", err)
	}
	// Later reads fail the same way, and Close still works.
	if _, err := res.Body.Read(make([]byte, 1)); !errors.Is(err, provider.ErrStreamIdle) {
		t.Errorf("read after the timeout: %v, want ErrStreamIdle", err)
	}
	if err := res.Body.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestIdleTimeoutCountsOnlyWaitingReads checks that a reader that is slow
// to come back for more (the time is the caller's, not the server's) is
// not taken for a stalled server.
func TestIdleTimeoutCountsOnlyWaitingReads(t *testing.T) {
	t.Parallel()
	chunks := []string{"data: one\n\n", "data: two\n\n", "data: three\n\n"}
	res := get(t, idleServer(t, false, chunks...), 50*time.Millisecond)
	var got strings.Builder
	buf := make([]byte, 4)
	for {
		n, err := res.Body.Read(buf)
		got.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read after %q: %v", got.String(), err)
		}
		time.Sleep(75 * time.Millisecond) // past the timeout, between reads
	}
	if want := strings.Join(chunks, ""); got.String() != want {
		t.Errorf("read %q, want %q", got.String(), want)
	}
}

func TestIdleTimeoutZeroDoesNothing(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "whole")
	}))
	t.Cleanup(srv.Close)
	res := get(t, srv.URL, 0)
	b, err := io.ReadAll(res.Body)
	if err != nil || string(b) != "whole" {
		t.Errorf("read %q, %v; want the body", b, err)
	}
}
