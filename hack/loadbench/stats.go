package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// summary is what one run measured.
type summary struct {
	// N is the number of objects created (and of pods seen).
	N int
	// P50, P99 and Max are the per-object latencies from create to pod.
	P50, P99, Max time.Duration
	// Span is the time from the first create call to the last pod seen.
	Span time.Duration
	// Creating is the time from the first create call to the return of
	// the last.
	Creating time.Duration
	// Requests are the API requests made during the span, by everyone
	// (the load's creates included).
	Requests requests
	// CPU is the CPU time the controller, kube-apiserver and etcd used
	// during the span.
	CPU cpuSample
	// ControllerRSS is the controller's peak resident set at the end of
	// the run, in bytes; 0 when unknown.
	ControllerRSS int64
}

// summarize computes a run's summary from its per-object latencies and its
// span. It fails on no latencies: a run that measured nothing has no
// percentiles.
func summarize(latencies []time.Duration, span time.Duration) (summary, error) {
	if len(latencies) == 0 {
		return summary{}, fmt.Errorf("summarize: no latencies")
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	return summary{
		N:    len(sorted),
		P50:  percentile(sorted, 50),
		P99:  percentile(sorted, 99),
		Max:  sorted[len(sorted)-1],
		Span: span,
	}, nil
}

// percentile is the p-th percentile of sorted by the nearest-rank method:
// the smallest value that at least p% of the values do not exceed. Of 300
// values, p99 is the 297th smallest: three values may be above it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(float64(len(sorted)) * p / 100))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Rate is pods per second over the run: N over Span.
func (s summary) Rate() float64 {
	if s.Span <= 0 {
		return 0
	}
	return float64(s.N) / s.Span.Seconds()
}

// benchLine renders the summary as a line of the Go benchmark format, so
// that benchstat can compare runs: one iteration, the latencies in
// milliseconds and the rate.
func (s summary) benchLine(name string) string {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	n := float64(max(s.N, 1))
	line := fmt.Sprintf("%s\t1\t%.1f p50-ms\t%.1f p99-ms\t%.1f max-ms\t%.1f pods/s\t%.2f requests/pod",
		name, ms(s.P50), ms(s.P99), ms(s.Max), s.Rate(), s.Requests.total()/n)
	for _, k := range []string{"controller", "kube-apiserver", "etcd"} {
		if d, ok := s.CPU[k]; ok {
			line += fmt.Sprintf("\t%.2f %s-cpu-ms/pod", ms(d)/n, k)
		}
	}
	if s.ControllerRSS > 0 {
		line += fmt.Sprintf("\t%.1f controller-peak-rss-MiB", float64(s.ControllerRSS)/(1<<20))
	}
	return line
}

// table renders the runs of each controller, in the order given, as a
// Markdown table with the median of each column below each controller's
// runs.
func table(order []string, runs map[string][]summary) string {
	var b strings.Builder
	b.WriteString("| controller | run | p50 ms | p99 ms | max ms | pods/s |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: |\n")
	row := func(name, run string, p50, p99, mx, rate float64) {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f | %.1f |\n", name, run, p50, p99, mx, rate)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, name := range order {
		ss := runs[name]
		if len(ss) == 0 {
			continue
		}
		n := len(ss)
		p50, p99, mx, rate := make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)
		for i, s := range ss {
			row(name, fmt.Sprint(i+1), ms(s.P50), ms(s.P99), ms(s.Max), s.Rate())
			p50, p99, mx, rate = append(p50, ms(s.P50)), append(p99, ms(s.P99)), append(mx, ms(s.Max)), append(rate, s.Rate())
		}
		if len(ss) > 1 {
			row(name, "median", median(p50), median(p99), median(mx), median(rate))
		}
	}
	return b.String()
}

// median of xs, the mean of the middle two for an even count.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
