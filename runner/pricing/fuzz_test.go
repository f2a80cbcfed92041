package pricing_test

import (
	"math"
	"testing"

	"github.com/aerie-run/aerie/runner/pricing"
	"github.com/aerie-run/aerie/runner/provider"
)

// FuzzParse checks that no document makes the parser panic, and that what
// it accepts prices every response at a finite cost of 0 or more.
func FuzzParse(f *testing.F) {
	for _, d := range []string{
		"",
		"[prices.m]\ninput = 1\noutput = 2\n",
		"[prices.\"gpt-4.1\"]\ninput = 1.5\noutput = 2\ncache_read = 0.1\ncache_write = 3\n",
		"prices = { m = { input = 1, output = 2 } }\n",
		"prices.m.input = 1e400\n",
		"[prices.m]\ninput = -0.0\noutput = 10000\n",
		"[prices]\nm = []\n",
		"[[prices]]\n",
		"[prices.M]\ninput = 1\noutput = 1\n[prices.m]\ninput = 1\noutput = 1\n",
	} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		table, err := pricing.Parse(doc)
		if err != nil {
			return
		}
		u := provider.Usage{InputTokens: math.MaxInt32, OutputTokens: math.MaxInt32, CacheReadTokens: 7, CacheWriteTokens: 9}
		for name, p := range table {
			if c := p.Cost(u); math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
				t.Fatalf("%q: %+v costs %v", name, p, c)
			}
			if _, ok := table.Lookup(name); !ok {
				t.Fatalf("%q is in the table but not found", name)
			}
		}
	})
}
