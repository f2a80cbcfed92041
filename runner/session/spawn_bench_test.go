package session

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/transcript"
)

// BenchmarkSpawn measures what spawning a child costs: from the parent's
// spawn_agent call starting to the child's first request reaching the
// model server — the child's session record in a SQLite file, its hooks,
// tools, journal and loop — as the p50 and p90 of that latency
// (spawn-ms-p50, spawn-ms-p90). Each iteration runs a root session that
// spawns one child; the fake model server answers at once.
//
//	go test -run '^$' -bench Spawn -benchtime 50x ./runner/session/
func BenchmarkSpawn(b *testing.B) {
	st, err := dburl.Open(b.Context(), "sqlite:"+filepath.Join(b.TempDir(), "sessions.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	ws := b.TempDir()
	exe, err := executor.NewLocal(ws, executor.Options{Reaper: reaper})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = exe.Close(context.Background()) })
	model := testenv.StartModelServer(b)
	var (
		mu      sync.Mutex
		called  = map[string]time.Time{}
		samples []time.Duration
	)
	opts := Options{
		Session:    Spec{Tenant: "bench"},
		Extensions: LoadOptions{Dir: ws, System: "be brief"},
		Model: Model{
			Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
			New: func(s transcript.Settings) (agent.Model, error) {
				return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
			},
		},
		Executor: exe,
		Observe: func(e events.Event) {
			if e.Type == events.ToolCall && e.Tool == subagent.Name {
				mu.Lock()
				called[e.CallID] = time.Now()
				mu.Unlock()
			}
		},
	}
	report := testenv.ReportCPU(b)
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("s%d", i)
		model.Add(testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: id, Name: subagent.Name,
			Arguments: fmt.Sprintf(`{"task": "child-%d: answer"}`, i)}}}, testenv.Turn{Text: "root done"})
		model.Conversation(fmt.Sprintf("child-%d:", i), testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			now := time.Now()
			mu.Lock()
			samples = append(samples, now.Sub(called[id]))
			mu.Unlock()
			return testenv.Turn{Text: "child done"}
		}})
		opts.Prompt = "spawn one"
		rep, err := Run(b.Context(), st, opts)
		if err != nil {
			b.Fatal(err)
		}
		if rep.ExitCode != 0 || rep.Subagents != 1 {
			b.Fatalf("exit %d, %d subagents: %s", rep.ExitCode, rep.Subagents, rep.Result.Reason)
		}
	}
	report()
	slices.Sort(samples)
	if len(samples) == 0 {
		b.Fatal("no child reached the model")
	}
	ms := func(q float64) float64 {
		return float64(samples[int(q*float64(len(samples)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.5), "spawn-ms-p50")
	b.ReportMetric(ms(0.9), "spawn-ms-p90")
}
