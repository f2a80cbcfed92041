package faults

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// maxModelRSS bounds the peak memory of a run whose model misbehaves
// (about 40 MB measured; 180 MB with 10 MB of tool arguments; 155 to 165
// MB for a 100 MB answer, cut at the 32 MiB cap on an answer's size,
// where it peaked near 1.4 GB without the cap).
const maxModelRSS = 512 << 20

// idleConfig is the project config of the runs whose streams stall: a
// stream idle timeout of a second instead of minutes.
const idleConfig = "[model]\nstream_idle_timeout_secs = 1\n"

func done() testenv.Turn {
	return testenv.Turn{Text: "done", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}}
}

func faultsOf(status, n int, h http.Header) []testenv.Fault {
	fs := make([]testenv.Fault, n)
	for i := range fs {
		fs[i] = testenv.Fault{Status: status, Header: h}
	}
	return fs
}

// TestModelFaults runs sessions against a model server that misbehaves:
// bursts of 5xx within and past the retries, 429 with retry-after, a
// stream that ends in an error event, breaks off mid-event, turns
// malformed or stalls (before the answer began, retried; in the middle of
// it, failed; while a signal ends the run), a 100 MB answer (past the cap
// on an answer's size) and a tool call with 10 MB of arguments (within
// it). Each run must end as documented (completed after the retries, else
// exit 3 with the cause), in bounded memory, and its session resume to
// completion.
func TestModelFaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	big := strings.Repeat("x", 10<<20)
	bigArgs, _ := json.Marshal(map[string]any{"path": "big.txt", "content": big})
	for _, tc := range []struct {
		name string
		turn testenv.Turn
		// code is the first run's exit status; failed runs are resumed.
		code int
		// requests is the first run's model requests, 0 for any.
		requests int
		// stderr is in the first run's standard error.
		stderr string
		// signal, when set, is sent after the first request (the stall).
		signal syscall.Signal
		// config, when set, is the session's project config.toml.
		config string
	}{
		{name: "5xx burst", turn: testenv.Turn{Text: "ok", Faults: append(faultsOf(500, 2, nil), faultsOf(529, 1, nil)...)}, requests: 4},
		{name: "429 retry-after", turn: testenv.Turn{Text: "ok", Faults: faultsOf(429, 1, http.Header{"Retry-After": {"1"}})}, requests: 2},
		{name: "5xx past the retries", turn: testenv.Turn{Text: "ok", Faults: faultsOf(503, 5, nil)}, code: runconfig.ExitModel, requests: 5, stderr: "503"},
		{name: "stream error event", turn: testenv.Turn{Text: "partial", StreamError: "overloaded right now"}, code: runconfig.ExitModel, stderr: "overloaded right now"},
		{name: "disconnect mid-event", turn: testenv.Turn{Text: "partial answer", Break: &testenv.StreamBreak{After: 4}}, code: runconfig.ExitModel},
		{name: "malformed SSE", turn: testenv.Turn{Text: "partial answer", Break: &testenv.StreamBreak{After: 3, Raw: "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \n\n"}}, code: runconfig.ExitModel},
		{name: "malformed JSON tool arguments", turn: testenv.Turn{ToolCalls: []testenv.ToolCall{{Name: "write_file", Arguments: `{"path": "a.txt", "content": `}}}},
		{name: "stall before the answer", turn: testenv.Turn{Text: "never sent", Break: &testenv.StreamBreak{After: 0, Stall: true}}, requests: 2, config: idleConfig},
		{name: "stall mid-answer", turn: testenv.Turn{Text: "partial answer", Break: &testenv.StreamBreak{After: 5, Stall: true}}, code: runconfig.ExitModel, requests: 1, stderr: "nothing received for 1s (the stream idle timeout", config: idleConfig},
		{name: "signal during a stall", turn: testenv.Turn{Text: "partial answer", Break: &testenv.StreamBreak{After: 3, Stall: true}}, code: runconfig.ExitTerminated, signal: syscall.SIGTERM},
		{name: "100 MB answer", turn: testenv.Turn{Text: strings.Repeat("y", 100<<20)}, code: runconfig.ExitModel, requests: 1, stderr: "the answer passed 33554432 bytes, the cap on one answer"},
		{name: "10 MB tool arguments", turn: testenv.Turn{ToolCalls: []testenv.ToolCall{{Name: "write_file", Arguments: string(bigArgs)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			label := strings.ReplaceAll(tc.name, " ", "-")
			s := e.scripted(t, label, tc.turn, done(), done())
			if tc.config != "" {
				s.projectConfig(tc.config)
			}
			counts.faults.Add(1)
			var out outcome
			if tc.signal != 0 {
				out = s.signalled(tc.signal, 3*time.Second)
			} else {
				out = s.run(5 * time.Minute)
			}
			t.Logf("exit %d in %v, peak RSS %d MB: %s", out.code, out.took.Round(time.Millisecond), out.maxRSS>>20, lastLine(out.stderr))
			if out.code != tc.code {
				violation(t, "%s: exit %d, want %d; stderr:\n%s", tc.name, out.code, tc.code, tail(out.stderr))
			}
			if !strings.Contains(out.stderr, tc.stderr) {
				violation(t, "%s: stderr does not say %q:\n%s", tc.name, tc.stderr, tail(out.stderr))
			}
			if n := s.requests(); tc.requests > 0 && n != tc.requests {
				violation(t, "%s: %d model requests, want %d", tc.name, n, tc.requests)
			}
			if out.maxRSS > maxModelRSS {
				violation(t, "%s: peak RSS %d MB, over %d MB", tc.name, out.maxRSS>>20, maxModelRSS>>20)
			}
			if out.code != 0 {
				if out := s.run(2 * time.Minute); out.code != 0 {
					violation(t, "%s: the resume exited %d; stderr:\n%s", tc.name, out.code, tail(out.stderr))
				}
			}
			s.checkStored()
			s.checkAnswered()
			counts.entries.Add(int64(len(s.seen)))
		})
	}
}

// projectConfig writes the session's project config.toml, in its
// workspace's .aerie directory.
func (s *sess) projectConfig(toml string) {
	s.t.Helper()
	dir := filepath.Join(s.ws, ".aerie")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(toml), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// signalled runs aerie for the session and sends it sig after its first
// model request and delay: it must end within a few seconds.
func (s *sess) signalled(sig syscall.Signal, delay time.Duration) outcome {
	s.t.Helper()
	cmd := s.command(s.t.Context())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for s.requests() == 0 && time.Since(start) < 30*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(delay)
	_ = cmd.Process.Signal(sig)
	select {
	case err := <-exited:
		return withCode(outcome{stderr: stderr.String(), took: time.Since(start)}, err, s.t)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		if err := <-exited; err == nil {
			s.t.Logf("session %s: aerie exited 0 as it was killed", s.label)
		}
		violation(s.t, "session %s: aerie still running 30 s after %v", s.label, sig)
		return outcome{code: -1, stderr: stderr.String()}
	}
}
