package pricing_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/pricing"
	"github.com/aerie-run/aerie/runner/provider"
)

func TestPriceCost(t *testing.T) {
	t.Parallel()
	p := pricing.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	for _, tc := range []struct {
		name string
		u    provider.Usage
		want float64
	}{
		{"nothing", provider.Usage{}, 0},
		{"plain", provider.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, 18},
		// 1000 input tokens of which 600 read from the cache and 300
		// written to it: 100 plain.
		{"cached", provider.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadTokens: 600, CacheWriteTokens: 300},
			(100*3 + 100*15 + 600*0.3 + 300*3.75) / 1e6},
		// A provider that counts cached tokens apart from the input:
		// no negative plain input.
		{"cache beyond input", provider.Usage{InputTokens: 10, CacheReadTokens: 1000}, 1000 * 0.3 / 1e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := p.Cost(tc.u); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Cost(%+v) = %v, want %v", tc.u, got, tc.want)
			}
		})
	}
}

func TestBundled(t *testing.T) {
	t.Parallel()
	b := pricing.Bundled()
	for _, tc := range []struct {
		model string
		want  pricing.Price
		ok    bool
	}{
		{"claude-sonnet-4-5", pricing.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, true},
		{"claude-sonnet-4-5-20250929", pricing.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, true},
		{"anthropic/Claude-Opus-4-1", pricing.Price{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}, true},
		// cache_write left out: the input price.
		{"gpt-5-2025-08-07", pricing.Price{Input: 1.25, Output: 10, CacheRead: 0.125, CacheWrite: 1.25}, true},
		{"gpt-5-chat-latest", pricing.Price{}, false},
		{"llama3.1:8b", pricing.Price{}, false},
	} {
		got, ok := b.Lookup(tc.model)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", tc.model, got, ok, tc.want, tc.ok)
		}
	}
	// Every model whose context window aerie knows and whose price the
	// file has is priced from input and output at least.
	for name, p := range b {
		if p.Input <= 0 || p.Output <= 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	b["claude-sonnet-4-5"] = pricing.Price{}
	if p, _ := pricing.Bundled().Lookup("claude-sonnet-4-5"); p.Input != 3 {
		t.Errorf("Bundled returned a shared table")
	}
}

func TestTableWith(t *testing.T) {
	t.Parallel()
	over, err := pricing.Parse([]byte(`
[prices."claude-sonnet-4-5"]
input = 2
output = 10
[prices."Llama3.1:8b"]
input = 0
output = 0.5
cache_read = 0
`))
	if err != nil {
		t.Fatal(err)
	}
	got := pricing.Bundled().With(over)
	if p, _ := got.Lookup("claude-sonnet-4-5-20250929"); p != (pricing.Price{Input: 2, Output: 10, CacheRead: 2, CacheWrite: 2}) {
		t.Errorf("overridden: %+v", p)
	}
	if p, ok := got.Lookup("llama3.1:8b"); !ok || p != (pricing.Price{Output: 0.5}) {
		t.Errorf("added: %+v %v", p, ok)
	}
	if p, _ := got.Lookup("claude-haiku-4-5"); p.Input != 1 {
		t.Errorf("kept: %+v", p)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		doc, want string
	}{
		{`prices = 1`, `prices: want a table of [prices."model"] tables, got an integer`},
		{`prices.m = "x"`, `prices.m: want a table with input and output prices, got a string`},
		{"[prices.m]\noutput = 1\n", "prices.m.input: missing: give the price"},
		{"[prices.\"gpt-4.1\"]\ninput = 1\n", `prices."gpt-4.1".output: missing`},
		{"[prices.m]\ninput = -1\noutput = 1\n", "prices.m.input: -1 is out of range"},
		{"[prices.m]\ninput = 1\noutput = nan\n", "prices.m.output: NaN is out of range"},
		{"[prices.m]\ninput = 1\noutput = inf\n", "prices.m.output: +Inf is out of range"},
		{"[prices.m]\ninput = 1\noutput = '2'\n", "prices.m.output: want a number"},
		{"[prices.m]\ninput = 1\noutput = 2\ncache_read = true\n", "prices.m.cache_read: want a number"},
		{"[prices.M]\ninput = 1\noutput = 2\n[prices.m]\ninput = 1\noutput = 2\n", `prices.m: model "m" is priced twice`},
		{"[prices.\" \"]\ninput = 1\noutput = 2\n", `prices." ": empty model name`},
	} {
		_, err := pricing.Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// TestPriced: the finish part of a response through Priced carries its
// cost; the other parts pass unchanged.
func TestPriced(t *testing.T) {
	t.Parallel()
	u := provider.Usage{InputTokens: 2000, OutputTokens: 100, CacheReadTokens: 1000}
	m := provider.NewScripted("s", []provider.Response{{
		Message:    provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text("hi")}},
		StopReason: provider.StopEndTurn, Usage: u,
	}})
	p := pricing.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	var acc provider.Accumulator
	for part, err := range pricing.Priced(m, p).Stream(context.Background(), provider.Request{Messages: []provider.Message{provider.UserMessage("go")}}) {
		if err != nil {
			t.Fatal(err)
		}
		if err := acc.Add(part); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := acc.Response()
	if err != nil {
		t.Fatal(err)
	}
	want := u
	want.CostUSD = p.Cost(u)
	if diff := cmp.Diff(want, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if resp.Message.Text() != "hi" {
		t.Errorf("text %q", resp.Message.Text())
	}
}
