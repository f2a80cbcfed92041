package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/console"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/transcript"
)

// benchStore is a SQLite store of the benchmark's.
func benchStore(b *testing.B) store.Store {
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "sessions.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// reportP50 reports the median of durations in milliseconds.
func reportP50(b *testing.B, durations []time.Duration, unit string) {
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2])/float64(time.Millisecond), unit)
}

// BenchmarkSessionsPage measures the server time of the sessions page with
// 100,000 sessions in the store. Target: p50 ≤ 100 ms.
func BenchmarkSessionsPage(b *testing.B) {
	const sessions = 100_000
	st := benchStore(b)
	ctx := context.Background()
	usage := transcript.Entry{Seq: 2, Payload: transcript.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.01}}
	for i := range sessions {
		now := time.Now()
		usage.CreatedAt = now
		_, err := st.Create(ctx, tenant, store.NewSession{Label: fmt.Sprintf("s%06d", i), State: store.StateCompleted,
			Settings: transcript.Settings{Model: []string{"claude-test", "gpt-test"}[i%2]},
			Entries: []transcript.Entry{
				{Seq: 1, Payload: transcript.UserMessage{Content: text("task")}, CreatedAt: now}, usage}})
		if err != nil {
			b.Fatal(err)
		}
	}
	h, err := console.New(console.Options{Store: st, Tenants: []string{tenant}})
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{"/", "/?model=gpt&sort=label&page=7", "/?model=gpt&sort=cost&page=7"} {
		b.Run(q, func(b *testing.B) {
			var durations []time.Duration
			for b.Loop() {
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, q, nil))
				durations = append(durations, time.Since(start))
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "100000 sessions") &&
					!strings.Contains(rec.Body.String(), "50000 sessions") {
					b.Fatalf("GET %s: %d", q, rec.Code)
				}
			}
			reportP50(b, durations, "ms-p50")
		})
	}
}

// BenchmarkSessionFirstScreen measures how soon a 10,000-entry session's
// page streams its first screen (the header and the transcript's first
// 30 items) over HTTP, and the whole page. Target: first screen ≤ 300 ms.
func BenchmarkSessionFirstScreen(b *testing.B) {
	st := benchStore(b)
	f := seed(b, st, 10_000)
	h, err := console.New(console.Options{Store: st, Tenants: []string{tenant}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + "/sessions/" + f.big.ID.String()
	var first, whole []time.Duration
	for b.Loop() {
		start := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		var page strings.Builder
		buf := make([]byte, 32<<10)
		seen := false
		for {
			n, err := resp.Body.Read(buf)
			page.Write(buf[:n])
			if !seen && strings.Count(page.String(), "</article>") >= 30 {
				first, seen = append(first, time.Since(start)), true
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		_ = resp.Body.Close()
		whole = append(whole, time.Since(start))
		if !seen {
			b.Fatal("the page has fewer than 30 items")
		}
	}
	reportP50(b, first, "ms-first-screen-p50")
	reportP50(b, whole, "ms-page-p50")
}

// BenchmarkViewers measures the console's memory under 50 concurrent
// viewers: each opens the 300-entry session's page and follows a live
// session's events while it gets 100 entries. Target: ≤ 100 MiB.
func BenchmarkViewers(b *testing.B) {
	const viewers = 50
	st := benchStore(b)
	f := seed(b, st, 300)
	h, err := console.New(console.Options{Store: st, Tenants: []string{tenant}, Poll: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	var peak uint64
	for b.Loop() {
		ctx := context.Background()
		live, err := st.Create(ctx, tenant, store.NewSession{State: store.StateActive})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for range viewers {
			wg.Go(func() {
				for _, path := range []string{"/sessions/" + f.big.ID.String(), "/sessions/" + live.ID.String() + "/events"} {
					resp, err := http.Get(srv.URL + path)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			})
		}
		done := make(chan struct{})
		go func() {
			var ms runtime.MemStats
			for {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse+ms.StackInuse)
			}
		}()
		for i := int64(1); i <= 100; i++ {
			e := transcript.Entry{Seq: i, Payload: transcript.AssistantMessage{Content: text(strings.Repeat("step ", 40))},
				CreatedAt: time.Now()}
			if err := st.Append(ctx, tenant, live.ID, []transcript.Entry{e}); err != nil {
				b.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := st.SetState(ctx, tenant, live.ID, store.StateCompleted); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		close(done)
	}
	b.ReportMetric(float64(peak)/(1<<20), "MiB-peak-heap")
}

// BenchmarkOverview measures the server time of the overview page (and of
// the JSON its charts read) over 10,000 sessions created in its 14 days,
// each with its usage.
func BenchmarkOverview(b *testing.B) {
	const sessions = 10_000
	st := benchStore(b)
	ctx := context.Background()
	for i := range sessions {
		at := time.Now().Add(-time.Duration(i%14) * 24 * time.Hour)
		_, err := st.Create(ctx, tenant, store.NewSession{Label: fmt.Sprintf("s%05d", i), State: store.StateCompleted,
			Settings: transcript.Settings{Model: []string{"claude-test", "gpt-test"}[i%2]},
			Entries: []transcript.Entry{
				{Seq: 1, Payload: transcript.UserMessage{Content: text("task")}, CreatedAt: at},
				{Seq: 2, Payload: transcript.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.01}, CreatedAt: at}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	h, err := console.New(console.Options{Store: st, Tenants: []string{tenant}})
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{"/overview", "/overview.json"} {
		b.Run(q, func(b *testing.B) {
			var durations []time.Duration
			for b.Loop() {
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, q, nil))
				durations = append(durations, time.Since(start))
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "claude-test") {
					b.Fatalf("GET %s: %d", q, rec.Code)
				}
			}
			reportP50(b, durations, "ms-p50")
		})
	}
}
