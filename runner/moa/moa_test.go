package moa

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// model answers every request with answer(req), or fails with its error.
type model func(ctx context.Context, req provider.Request) (string, provider.Usage, error)

func (m model) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error] {
	return func(yield func(provider.Part, error) bool) {
		text, u, err := m(ctx, req)
		if err != nil {
			yield(provider.Part{}, err)
			return
		}
		if yield(provider.Part{Type: provider.PartTextDelta, Text: text}, nil) {
			yield(provider.Part{Type: provider.PartFinish, Usage: u, StopReason: provider.StopEndTurn}, nil)
		}
	}
}

func says(text string, in, out int64) model {
	return func(context.Context, provider.Request) (string, provider.Usage, error) {
		return text, provider.Usage{InputTokens: in, OutputTokens: out}, nil
	}
}

// traces keeps the traces added, or fails with err.
type traces struct {
	mu  sync.Mutex
	got []store.Trace
	err error
}

func (s *traces) AddTrace(_ context.Context, tenant string, tr store.Trace) (store.Trace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tenant != "tenant" {
		return store.Trace{}, errors.New("wrong tenant " + tenant)
	}
	s.got = append(s.got, tr)
	return tr, s.err
}

// ledger records the charges and refuses them once spent is set.
type ledger struct {
	mu      sync.Mutex
	charged transcript.Usage
	spent   error
}

func (l *ledger) Charge(_ context.Context, u transcript.Usage) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.charged.InputTokens += u.InputTokens
	l.charged.OutputTokens += u.OutputTokens
	l.charged.Requests += u.Requests
	return l.spent
}

func newTool(t *testing.T, st *traces, l Ledger, agg Model, refs ...Model) *Tool {
	t.Helper()
	cfg := Config{
		Aggregator: Member{Provider: "anthropic", Model: "agg", Client: agg},
		Traces:     st, Tenant: "tenant", Session: uuid.New(),
	}
	if l != nil {
		cfg.Ledger = l
	}
	for i, r := range refs {
		cfg.References = append(cfg.References, Member{Provider: "openai", Model: string(rune('a' + i)), Client: r})
	}
	tool, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func run(tool *Tool, args string) tools.Result {
	return tool.Run(tools.WithCallID(context.Background(), "call_1"), json.RawMessage(args))
}

func TestParseInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args, wantErr string
		want          input
	}{
		{args: `{"question":"why?"}`, want: input{Question: "why?"}},
		{args: `{"question":"why?","context":"logs"}`, want: input{Question: "why?", Context: "logs"}},
		{args: ``, wantErr: `missing required argument "question"`},
		{args: `{"question":"  "}`, wantErr: `missing required argument "question"`},
		{args: `{"question":"q","models":["x"]}`, wantErr: `unknown field "models"`},
		{args: `{"question":"q"} {}`, wantErr: "trailing data"},
		{args: `{"question":1}`, wantErr: "invalid arguments"},
	} {
		got, err := parseInput(json.RawMessage(tc.args))
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("parseInput(%s) error = %v, want %q", tc.args, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("parseInput(%s) = %+v, %v, want %+v", tc.args, got, err, tc.want)
		}
	}
}

// TestRunAsksReferencesConcurrently: each reference model waits until all
// have been asked, so the call ends only if they were asked at once.
func TestRunAsksReferencesConcurrently(t *testing.T) {
	t.Parallel()
	const n = 3
	var started sync.WaitGroup
	started.Add(n)
	ref := func(text string) model {
		return func(ctx context.Context, req provider.Request) (string, provider.Usage, error) {
			started.Done()
			started.Wait()
			return text, provider.Usage{InputTokens: 10, OutputTokens: 1}, nil
		}
	}
	var aggReq provider.Request
	agg := model(func(_ context.Context, req provider.Request) (string, provider.Usage, error) {
		aggReq = req
		return "the synthesis", provider.Usage{InputTokens: 100, OutputTokens: 9}, nil
	})
	st := &traces{}
	res := run(newTool(t, st, nil, agg, ref("one"), ref("two"), ref("three")), `{"question":"q?","context":"ctx"}`)
	if res.IsError || res.Content != "the synthesis\n\n[mixture_of_agents: 3 of 3 reference models answered]" {
		t.Fatalf("result = %+v", res)
	}
	if want := (provider.Usage{InputTokens: 130, OutputTokens: 12}); res.Usage != want {
		t.Errorf("usage = %+v, want %+v", res.Usage, want)
	}
	sys := aggReq.Messages[0].Text()
	for _, want := range []string{"synthesize", "1. (openai:a)\none", "2. (openai:b)\ntwo", "3. (openai:c)\nthree"} {
		if !strings.Contains(sys, want) {
			t.Errorf("aggregator instruction lacks %q:\n%s", want, sys)
		}
	}
	if q := aggReq.Messages[1].Text(); q != "<context>\nctx\n</context>\n\nq?" {
		t.Errorf("aggregator question = %q", q)
	}
	if len(st.got) != 1 || st.got[0].CallID != "call_1" || len(st.got[0].Proposals) != n ||
		st.got[0].Proposals[2].Output != "three" || st.got[0].Aggregate.Output != "the synthesis" {
		t.Errorf("traces = %+v", st.got)
	}
}

func TestRunFailures(t *testing.T) {
	t.Parallel()
	fail := model(func(context.Context, provider.Request) (string, provider.Usage, error) {
		return "", provider.Usage{}, errors.New("503 overloaded\nretry later")
	})
	empty := says("   ", 5, 0)
	t.Run("one reference fails", func(t *testing.T) {
		t.Parallel()
		st := &traces{}
		res := run(newTool(t, st, nil, says("synth", 1, 1), says("fine", 1, 1), fail), `{"question":"q"}`)
		if res.IsError || !strings.HasSuffix(res.Content,
			"[mixture_of_agents: 1 of 2 reference models answered; failed: openai:b: 503 overloaded retry later]") {
			t.Errorf("result = %+v", res)
		}
		if p := st.got[0].Proposals[1]; p.Error != "503 overloaded retry later" || p.Output != "" {
			t.Errorf("failed proposal = %+v", p)
		}
	})
	t.Run("every reference fails", func(t *testing.T) {
		t.Parallel()
		st := &traces{}
		asked := false
		agg := model(func(context.Context, provider.Request) (string, provider.Usage, error) {
			asked = true
			return "x", provider.Usage{}, nil
		})
		res := run(newTool(t, st, nil, agg, fail, empty), `{"question":"q"}`)
		if !res.IsError || res.Content != "mixture_of_agents: every reference model failed: "+
			"openai:a: 503 overloaded retry later; openai:b: the model answered without text" {
			t.Errorf("result = %+v", res)
		}
		if asked {
			t.Error("the aggregator was asked without proposals")
		}
		if res.Usage.InputTokens != 5 {
			t.Errorf("usage = %+v, want the empty answer's 5 input tokens", res.Usage)
		}
		if len(st.got) != 1 {
			t.Errorf("%d traces, want 1", len(st.got))
		}
	})
	t.Run("the aggregator fails", func(t *testing.T) {
		t.Parallel()
		st := &traces{}
		res := run(newTool(t, st, nil, fail, says("fine", 1, 1)), `{"question":"q"}`)
		if !res.IsError || res.Content != "mixture_of_agents: the aggregator anthropic:agg failed: 503 overloaded retry later" {
			t.Errorf("result = %+v", res)
		}
		if a := st.got[0].Aggregate; a.Model != "agg" || a.Error == "" {
			t.Errorf("aggregate = %+v", a)
		}
	})
	t.Run("the trace cannot be stored", func(t *testing.T) {
		t.Parallel()
		st := &traces{err: errors.New("disk full")}
		if res := run(newTool(t, st, nil, says("synth", 1, 1), says("fine", 1, 1)), `{"question":"q"}`); res.IsError {
			t.Errorf("result = %+v, want the synthesis all the same", res)
		}
	})
	t.Run("bad arguments", func(t *testing.T) {
		t.Parallel()
		st := &traces{}
		if res := run(newTool(t, st, nil, says("synth", 1, 1), says("fine", 1, 1)), `{}`); !res.IsError {
			t.Errorf("result = %+v, want an error", res)
		}
		if len(st.got) != 0 {
			t.Errorf("a call with bad arguments stored %d traces", len(st.got))
		}
	})
}

// TestRunChargesLedger: with a ledger, every call is charged to it and the
// result carries no usage; a spent budget discards the answers it refused.
func TestRunChargesLedger(t *testing.T) {
	t.Parallel()
	l := &ledger{}
	res := run(newTool(t, &traces{}, l, says("synth", 100, 10), says("a", 10, 1), says("b", 20, 2)), `{"question":"q"}`)
	if res.IsError || res.Usage != (provider.Usage{}) {
		t.Errorf("result = %+v, want the synthesis without usage", res)
	}
	if want := (transcript.Usage{InputTokens: 130, OutputTokens: 13, Requests: 3}); l.charged != want {
		t.Errorf("charged %+v, want %+v", l.charged, want)
	}

	spent := &ledger{spent: errors.New("the token budget of 100 is spent")}
	res = run(newTool(t, &traces{}, spent, says("synth", 100, 10), says("a", 10, 1)), `{"question":"q"}`)
	if !res.IsError || !strings.Contains(res.Content, "openai:a: budget: the token budget of 100 is spent") {
		t.Errorf("result = %+v, want the budget named", res)
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	ok := Member{Provider: "anthropic", Model: "m", Client: says("x", 0, 0)}
	for name, cfg := range map[string]Config{
		"no references":  {Aggregator: ok, Traces: &traces{}, Tenant: "t", Session: uuid.New()},
		"no client":      {References: []Member{{Provider: "anthropic", Model: "m"}}, Aggregator: ok, Traces: &traces{}, Tenant: "t", Session: uuid.New()},
		"no trace store": {References: []Member{ok}, Aggregator: ok},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
