package compaction_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

func TestDue(t *testing.T) {
	t.Parallel()
	msgs := session(10, 4_000) // ~10,300 tokens
	var tr compaction.Tracker
	tr.Observe(msgs, transcript.Usage{})
	tokens := tr.Tokens()
	for _, tc := range []struct {
		name   string
		window int64
		want   bool
	}{
		{"unknown window", 0, false},
		{"at 85 %", tokens * 100 / 85, true},
		{"under 85 %", tokens*100/85 + 2, false},
		{"far over", tokens / 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := compaction.New(compaction.Config{Window: tc.window, Summarizer: answering("s")})
			p.Observe(msgs, transcript.Usage{})
			if got := p.Due(); got != tc.want {
				t.Errorf("Due with %d tokens of a %d window = %v, want %v", p.Tokens(), tc.window, got, tc.want)
			}
		})
	}
}

func TestCompact(t *testing.T) {
	t.Parallel()
	msgs := session(30, 4_000)
	orig := append([]provider.Message(nil), msgs...)
	s := answering("  The test is fixed but not yet committed.  ")
	p := compaction.New(compaction.Config{Window: 35_000, Summarizer: s, Provider: "anthropic", Model: "claude-haiku-4-5"})
	p.SetFixed("You are an agent.", []provider.Tool{{Name: "bash", Description: "Run a command."}})
	p.Observe(msgs, transcript.Usage{})
	before := p.Tokens()
	if !p.Due() {
		t.Fatalf("%d tokens of a 35,000 window: not due", before)
	}

	res, err := p.Compact(t.Context(), msgs, compaction.TriggerAuto)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(orig, msgs); diff != "" {
		t.Errorf("Compact changed its input:\n%s", diff)
	}
	// The replacement, then the tail as it was.
	if got := res.Messages[0]; got.Role != provider.RoleUser || got.Text() != res.Replacement {
		t.Errorf("first message %+v, want the replacement", got)
	}
	if !strings.Contains(res.Replacement, "<summary>\nThe test is fixed but not yet committed.\n</summary>") {
		t.Errorf("replacement %q lacks the trimmed summary", res.Replacement)
	}
	if diff := cmp.Diff(msgs[res.Cut.Index:], res.Messages[1:]); diff != "" {
		t.Errorf("tail (-want +got):\n%s", diff)
	}
	if res.Cut.TailTokens < compaction.MinTail || res.Cut.TailTokens > compaction.MaxTail {
		t.Errorf("tail of %d tokens", res.Cut.TailTokens)
	}
	want := transcript.Provenance{
		Trigger: "auto", Provider: "anthropic", Model: "claude-haiku-4-5",
		Messages: res.Cut.Index, TokensBefore: before, TokensAfter: p.Tokens(),
	}
	if diff := cmp.Diff(want, res.Provenance); diff != "" {
		t.Errorf("provenance (-want +got):\n%s", diff)
	}
	if res.Provenance.TokensAfter >= before/2 {
		t.Errorf("%d tokens after, %d before", res.Provenance.TokensAfter, before)
	}

	// The summarizer got the messages before the cut, and no tools.
	calls := s.calls()
	if len(calls) != 1 {
		t.Fatalf("%d summary requests", len(calls))
	}
	req := calls[0]
	if len(req.Tools) != 0 || req.Messages[0].Role != provider.RoleSystem || req.MaxOutputTokens <= 0 {
		t.Errorf("summary request %+v", req)
	}
	input := req.Messages[1].Text()
	if !strings.Contains(input, "Fix the failing test") || strings.Contains(input, "call_30") {
		t.Error("the summary input is not the messages before the cut")
	}
	// The summary request fits the window: half of it for the input.
	if len(input) > 35_000/2*compaction.BytesPerToken+200 {
		t.Errorf("summary input of %d bytes for a 35,000 window", len(input))
	}

	// The estimate follows the new conversation from here.
	next := append(res.Messages, provider.UserMessage("go on"))
	p.Observe(next, transcript.Usage{})
	if got := p.Tokens(); got <= res.Provenance.TokensAfter {
		t.Errorf("estimate %d after a message was added to %d", got, res.Provenance.TokensAfter)
	}
}

func TestCompactKeepsContextOnFailure(t *testing.T) {
	t.Parallel()
	msgs := session(30, 4_000)
	failing := &summarizer{answer: func(context.Context, provider.Request) (string, error) {
		return "", errors.New("529 overloaded")
	}}
	p := compaction.New(compaction.Config{Window: 35_000, Summarizer: failing})
	p.Observe(msgs, transcript.Usage{})
	before := p.Tokens()
	if _, err := p.Compact(t.Context(), msgs, compaction.TriggerAuto); err == nil || !strings.Contains(err.Error(), "529 overloaded") {
		t.Fatalf("error %v, want the summarizer's", err)
	}
	if p.Tokens() != before || !p.Due() {
		t.Errorf("after a failed compaction: %d tokens (was %d), due %v", p.Tokens(), before, p.Due())
	}

	// An empty summary is a failure too.
	p = compaction.New(compaction.Config{Window: 35_000, Summarizer: answering(" \n")})
	if _, err := p.Compact(t.Context(), msgs, compaction.TriggerManual); err == nil {
		t.Error("an empty summary was taken")
	}

	// So is no summary within the timeout.
	slow := &summarizer{answer: func(ctx context.Context, _ provider.Request) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	p = compaction.New(compaction.Config{Window: 35_000, Summarizer: slow, SummaryTimeout: 50 * time.Millisecond})
	_, err := p.Compact(t.Context(), msgs, compaction.TriggerAuto)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no summary within 50ms") {
		t.Errorf("error %v, want the timeout", err)
	}
}

// TestCompactUsage: a compaction returns what its summary requests used,
// with its error when the answer was no summary: the tokens were spent.
func TestCompactUsage(t *testing.T) {
	t.Parallel()
	msgs := session(30, 4_000)
	used := provider.Usage{InputTokens: 9_000, OutputTokens: 300, CacheReadTokens: 1_000, CostUSD: 0.03}
	s := answering("The test is fixed.")
	s.usage = used
	res, err := compaction.New(compaction.Config{Window: 35_000, Summarizer: s}).Compact(t.Context(), msgs, compaction.TriggerManual)
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage != used {
		t.Errorf("usage %+v, want the summary's %+v", res.Usage, used)
	}

	empty := answering(" ")
	empty.usage = used
	res, err = compaction.New(compaction.Config{Window: 35_000, Summarizer: empty}).Compact(t.Context(), msgs, compaction.TriggerManual)
	if err == nil || res.Usage != used || res.Messages != nil {
		t.Errorf("an empty summary: %+v, %v; want an error with the usage alone", res, err)
	}
}

func TestAntiThrash(t *testing.T) {
	t.Parallel()
	// A long summary of a short prefix saves under 10 %.
	msgs := session(12, 4_000)
	verbose := answering(strings.Repeat("w", 16_000))
	p := compaction.New(compaction.Config{Window: 12_000, Summarizer: verbose})
	p.Observe(msgs, transcript.Usage{})
	if !p.Due() {
		t.Fatal("not due")
	}
	res, err := p.Compact(t.Context(), msgs, compaction.TriggerAuto)
	if err != nil {
		t.Fatal(err)
	}
	pr := res.Provenance
	if (pr.TokensBefore-pr.TokensAfter)*100 >= pr.TokensBefore*compaction.MinSaving {
		t.Fatalf("saved %d of %d tokens: the test needs a compaction that saves under 10 %%", pr.TokensBefore-pr.TokensAfter, pr.TokensBefore)
	}
	p.Observe(res.Messages, transcript.Usage{})
	if p.Tokens()*100 < 12_000*compaction.Threshold {
		t.Fatalf("%d tokens: the test needs the window still over the threshold", p.Tokens())
	}
	if p.Due() {
		t.Error("an automatic repeat is due after a compaction that saved under 10 %")
	}

	// Manual compaction bypasses the rule; one that saves enough re-arms
	// the automatic trigger.
	p2 := compaction.New(compaction.Config{Window: 12_000, Summarizer: answering("short")})
	p2.Observe(msgs, transcript.Usage{})
	if _, err := p2.Compact(t.Context(), msgs, compaction.TriggerAuto); err != nil {
		t.Fatal(err)
	}
	grown := append(append([]provider.Message(nil), msgs...), session(12, 4_000)[1:]...)
	p2.Observe(grown, transcript.Usage{})
	if !p2.Due() {
		t.Errorf("after a compaction that saved over 10 %%, a conversation over the threshold is not due")
	}
}

func TestBudgetGate(t *testing.T) {
	t.Parallel()
	msgs := session(30, 4_000)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := compaction.New(compaction.Config{Window: 35_000, Summarizer: answering("s"), Now: func() time.Time { return now }})
	for _, trigger := range []compaction.Trigger{compaction.TriggerAuto, compaction.TriggerManual, compaction.TriggerOverflow} {
		ctx, cancel := context.WithDeadline(t.Context(), now.Add(59*time.Second))
		_, err := p.Compact(ctx, msgs, trigger)
		cancel()
		if !errors.Is(err, compaction.ErrBudget) {
			t.Errorf("%s with 59 s left: %v, want ErrBudget", trigger, err)
		}
	}
	ctx, cancel := context.WithDeadline(t.Context(), now.Add(61*time.Second))
	defer cancel()
	if _, err := p.Compact(ctx, msgs, compaction.TriggerManual); err != nil {
		t.Errorf("with 61 s left: %v", err)
	}
}

func TestNoViableCut(t *testing.T) {
	t.Parallel()
	p := compaction.New(compaction.Config{Summarizer: answering("s")})
	if _, err := p.Compact(t.Context(), session(1, 100_000), compaction.TriggerOverflow); !errors.Is(err, compaction.ErrNoCut) {
		t.Errorf("error %v, want ErrNoCut", err)
	}
}

// children is a Children whose agents finish when done is closed.
type children struct {
	ids  []uuid.UUID
	done chan struct{}
	wait atomic.Int64 // the last Wait's duration
}

func (c *children) Active() []uuid.UUID {
	select {
	case <-c.done:
		return nil
	default:
		return c.ids
	}
}

func (c *children) Wait(ctx context.Context) {
	start := time.Now()
	defer func() { c.wait.Store(int64(time.Since(start))) }()
	select {
	case <-c.done:
	case <-ctx.Done():
	}
}

func TestChildrenGate(t *testing.T) {
	t.Parallel()
	msgs := session(30, 4_000)
	id := uuid.New()

	// Automatic and manual compaction skip while a child runs.
	running := &children{ids: []uuid.UUID{id}, done: make(chan struct{})}
	p := compaction.New(compaction.Config{Window: 35_000, Summarizer: answering("s"), Children: running})
	for _, trigger := range []compaction.Trigger{compaction.TriggerAuto, compaction.TriggerManual} {
		if _, err := p.Compact(t.Context(), msgs, trigger); !errors.Is(err, compaction.ErrChildrenActive) {
			t.Errorf("%s: %v, want ErrChildrenActive", trigger, err)
		}
	}

	// Overflow recovery waits for them, three seconds at most, and the
	// summary names those still running.
	res, err := p.Compact(t.Context(), msgs, compaction.TriggerOverflow)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Duration(running.wait.Load()); d < compaction.OverflowChildWait-50*time.Millisecond || d > compaction.OverflowChildWait+2*time.Second {
		t.Errorf("waited %s for the children, want %s", d, compaction.OverflowChildWait)
	}
	if diff := cmp.Diff([]uuid.UUID{id}, res.Provenance.PendingChildren); diff != "" {
		t.Errorf("pending children (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Replacement, id.String()) {
		t.Error("the replacement does not name the pending child")
	}

	// Children that finish within the wait are not pending.
	finishing := &children{ids: []uuid.UUID{id}, done: make(chan struct{})}
	time.AfterFunc(100*time.Millisecond, func() { close(finishing.done) })
	p = compaction.New(compaction.Config{Window: 35_000, Summarizer: answering("s"), Children: finishing})
	res, err = p.Compact(t.Context(), msgs, compaction.TriggerOverflow)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Provenance.PendingChildren) != 0 {
		t.Errorf("pending %v after the children finished", res.Provenance.PendingChildren)
	}
	if _, err := p.Compact(t.Context(), res.Messages, compaction.TriggerManual); errors.Is(err, compaction.ErrChildrenActive) {
		t.Error("manual compaction skipped after the children finished")
	}
}

func TestSummaryRequestOverflow(t *testing.T) {
	t.Parallel()
	msgs := session(30, 4_000)
	// A summarizer whose window holds 20,000 bytes of input.
	var sizes []int
	small := &summarizer{answer: func(_ context.Context, req provider.Request) (string, error) {
		n := len(req.Messages[1].Text())
		sizes = append(sizes, n)
		if n > 20_000 {
			return "", &provider.APIError{StatusCode: 400, Message: "prompt is too long"}
		}
		return "summary", nil
	}}
	p := compaction.New(compaction.Config{Summarizer: small}) // the window unknown
	p.Observe(msgs, transcript.Usage{})
	res, err := p.Compact(t.Context(), msgs, compaction.TriggerOverflow)
	if err != nil {
		t.Fatal(err)
	}
	// Half the conversation's size first (the conversation overflowed),
	// then half again until it fits.
	const wrapper = 100 // the request's words around the rendering
	if half := int(res.Provenance.TokensBefore) * compaction.BytesPerToken / 2; len(sizes) != 3 || sizes[0] > half+wrapper || sizes[1] > half/2+wrapper {
		t.Errorf("summary inputs of %v bytes", sizes)
	}

	never := &summarizer{answer: func(context.Context, provider.Request) (string, error) {
		return "", &provider.APIError{StatusCode: 400, Message: "prompt is too long"}
	}}
	p = compaction.New(compaction.Config{Summarizer: never})
	_, err = p.Compact(t.Context(), msgs, compaction.TriggerOverflow)
	if !errors.Is(err, provider.ErrContextOverflow) || len(never.calls()) != 3 {
		t.Errorf("error %v after %d summary requests, want the overflow after 3", err, len(never.calls()))
	}
}

func TestAutoFailuresStopTrying(t *testing.T) {
	t.Parallel()
	msgs := session(30, 4_000)
	broken := true
	s := &summarizer{answer: func(context.Context, provider.Request) (string, error) {
		if broken {
			return "", errors.New("529 overloaded")
		}
		return "summary", nil
	}}
	p := compaction.New(compaction.Config{Window: 35_000, Summarizer: s})
	for i := range compaction.MaxAutoFailures {
		res, ok, err := p.Before(t.Context(), msgs, transcript.Usage{})
		if ok || err == nil {
			t.Fatalf("attempt %d: %+v, %v, %v", i+1, res.Cut, ok, err)
		}
	}
	if _, ok, err := p.Before(t.Context(), msgs, transcript.Usage{}); ok || err != nil || p.Due() {
		t.Errorf("after %d failures in a row: compacted %v, %v, due %v", compaction.MaxAutoFailures, ok, err, p.Due())
	}
	if n := len(s.calls()); n != compaction.MaxAutoFailures {
		t.Errorf("%d summary requests, want %d", n, compaction.MaxAutoFailures)
	}
	// A compaction of another trigger that succeeds re-arms it.
	broken = false
	res, err := p.Overflow(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	grown := append(append([]provider.Message(nil), res.Messages...), session(30, 4_000)[1:]...)
	p.Observe(grown, transcript.Usage{})
	if !p.Due() {
		t.Error("automatic compaction not due after an overflow compaction succeeded")
	}
}
