package compaction_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/transcript"
)

// BenchmarkTurnBookkeeping measures what a Policy costs the loop each turn
// (Observe with the turn's new messages and usage, then Due) over a
// session of 1,000 turns, each a tool call and a 2 KiB result. One op is
// the whole session; p50-ns/turn is the median turn, and
// p50-last100-ns/turn the median of the last hundred turns, which a cost
// growing with the history would show.
//
//	go test -run '^$' -bench BenchmarkTurnBookkeeping ./runner/compaction/
func BenchmarkTurnBookkeeping(b *testing.B) {
	const turns = 1_000
	msgs := session(turns, 2<<10)
	all := make([]time.Duration, 0, turns)
	last := make([]time.Duration, 0, 100)
	b.ReportAllocs()
	for b.Loop() {
		p := compaction.New(compaction.Config{Window: 1 << 40, Summarizer: answering("s")})
		p.SetFixed("You are an agent.", nil)
		var u transcript.Usage
		for i := 1; i <= turns; i++ {
			u.Requests++
			u.ContextTokens += 600
			start := time.Now()
			p.Observe(msgs[:2*i+1], u)
			due := p.Due()
			d := time.Since(start)
			if due {
				b.Fatal("due with an unbounded window")
			}
			all = append(all, d)
			if i > turns-100 {
				last = append(last, d)
			}
		}
	}
	b.ReportMetric(float64(median(all).Nanoseconds()), "p50-ns/turn")
	b.ReportMetric(float64(median(last).Nanoseconds()), "p50-last100-ns/turn")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
