package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// cacheShareSteps is how many tool steps the session of the cache-share
// figure runs, and cacheShareWindow its context window in tokens: small
// enough that the session compacts several times.
const (
	cacheShareSteps  = 200
	cacheShareWindow = 16_000
)

// summaryPrompt is how a compaction's summary request starts its
// instructions.
const summaryPrompt = "You summarize the first part of a conversation"

// stepsBuild is a model that runs steps bash steps one after the other,
// each printing lines lines, then ends; it answers the summary requests
// with a summary. It has a turn for each step and room for the summaries.
func stepsBuild(steps, lines int) []testenv.Turn {
	var mu sync.Mutex
	step := 0
	respond := func(req testenv.ModelRequest) testenv.Turn {
		if strings.Contains(string(req.Body), summaryPrompt) {
			return testenv.Turn{Text: "Task: run the build steps in order. State: the steps above are built."}
		}
		mu.Lock()
		defer mu.Unlock()
		step++
		if step > steps {
			return testenv.Turn{Text: "All steps built."}
		}
		cmd := fmt.Sprintf("echo step %d >> steps.log && yes 'compiling unit %d' | head -n %d", step, step, lines)
		return testenv.Turn{ToolCalls: []testenv.ToolCall{call(fmt.Sprintf("step%d", step), "bash", map[string]any{"command": cmd})}}
	}
	turns := make([]testenv.Turn, 2*steps+1)
	for i := range turns {
		turns[i].Respond = respond
	}
	return turns
}

// cacheShareWire is a wire format the cache-share figure is measured on:
// the flags that select it.
type cacheShareWire struct {
	name string
	args func(e *e2e) []string
}

var cacheShareWires = []cacheShareWire{
	{"anthropic", func(e *e2e) []string {
		return []string{"--provider", "anthropic", "--model", "claude-sonnet-4-5", "--base-url", e.model.URL()}
	}},
	{"openai responses", func(e *e2e) []string {
		return []string{"--provider", "openai", "--model", "gpt-5", "--base-url", e.model.OpenAIURL()}
	}},
	{"openai chat completions", func(e *e2e) []string {
		return []string{"--provider", "openai", "--api", "chat-completions", "--model", "gpt-5", "--base-url", e.model.OpenAIURL()}
	}},
}

// cacheShares runs the cache-share session over w and returns each
// request's share of bytes that repeat the previous request's prefix, and
// whether the request is exempt: a compaction's summary request, or the
// first request after one.
func cacheShares(t *testing.T, w cacheShareWire) (shares []float64, exempt []bool) {
	t.Helper()
	e := newE2E(t, stepsBuild(cacheShareSteps, 8)...)
	e.env = append(e.env, "OPENAI_API_KEY=sk-openai-test")
	e.model.SetContextWindow(testenv.ContextWindow{Tokens: cacheShareWindow})
	args := append([]string{"run"}, w.args(e)...)
	args = append(args, "--events-jsonl", "--max-turns", "0", "--context-window", fmt.Sprint(cacheShareWindow), "Build every step.")
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir, cmd.Env = e.ws, e.env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	out := e.output(cmd.Run(), stdout.String(), stderr.String())
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	if end := out.end(t); end.Text != "All steps built." {
		t.Fatalf("session end %s %q: %s", end.Outcome, end.Text, end.Reason)
	}
	summary := false
	var head string
	for i, req := range e.model.Requests() {
		isSummary := strings.Contains(string(req.Body), summaryPrompt)
		if !isSummary {
			// The tools and the system prompt stay byte for byte the same
			// for the whole session: what changes enters as messages.
			h := stableHead(t, req.Body)
			if head == "" {
				head = h
			} else if h != head {
				t.Errorf("request %d changes the tools or the system prompt:\n%s\nfirst:\n%s", i+1, h, head)
			}
		}
		shares = append(shares, req.PromptShare())

		exempt = append(exempt, i == 0 || isSummary || summary)
		summary = isSummary
	}
	return shares, exempt
}

// stableHead is what of a request body must stay the same for a whole
// session: its tools and its system prompt (Anthropic's system, the
// Responses API's instructions, Chat Completions' first message).
func stableHead(t *testing.T, body []byte) string {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatalf("a request body that is not a JSON object: %v", err)
	}
	var messages []json.RawMessage
	if m, ok := fields["messages"]; ok && fields["system"] == nil {
		if err := json.Unmarshal(m, &messages); err != nil || len(messages) == 0 {
			t.Fatalf("messages %s: %v", m, err)
		}
	}
	head := string(fields["tools"]) + string(fields["system"]) + string(fields["instructions"])
	if len(messages) > 0 {
		head += string(messages[0])
	}
	return head
}

// TestCacheShare runs a long session that compacts several times over
// each wire format: the tools and the system prompt never change, and
// every request repeats at least 95 % of its bytes
// from the start of the request before it, except a compaction's summary
// request and the first request after it.
func TestCacheShare(t *testing.T) {
	t.Parallel()
	for _, w := range cacheShareWires {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			shares, exempt := cacheShares(t, w)
			least, compactions := 1.0, 0
			for i, s := range shares {
				if exempt[i] {
					if i > 0 && !exempt[i-1] {
						compactions++
					}
					continue
				}
				least = min(least, s)
				if s < 0.95 {
					t.Errorf("request %d of %d repeats %.1f %% of the previous request's prefix, want ≥ 95 %%", i+1, len(shares), 100*s)
				}
			}
			if compactions < 2 {
				t.Errorf("%d compactions in %d requests: the session does not test what it should", compactions, len(shares))
			}
			t.Logf("%d requests, %d compactions, least share %.2f %%", len(shares), compactions, 100*least)
		})
	}
}
