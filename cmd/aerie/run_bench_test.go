package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
)

// The benchmarks run the aerie binary itself, built once, against the fake
// model server with no latency, and report what a user of aerie run sees:
//
//	go test -run '^$' -bench BenchmarkRun -benchtime 20x -count 5 ./cmd/aerie/
//
// Custom metrics: ms-to-first-request (process start to the model's first
// request), peak-RSS-MiB (the process's maximum resident set), and the p50
// and p99 of the time per turn.

// buildAerie builds the aerie binary for the benchmarks.
func buildAerie(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "aerie")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type benchRun struct {
	b     *testing.B
	bin   string
	ws    string
	model *testenv.ModelServer
	env   []string
}

func newBenchRun(b *testing.B) *benchRun {
	home := b.TempDir()
	return &benchRun{
		b: b, bin: buildAerie(b), ws: b.TempDir(), model: testenv.StartModelServer(b),
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "AERIE_HOME=" + home, "ANTHROPIC_API_KEY=k"},
	}
}

// run runs one session and returns its start time, events and peak RSS.
func (r *benchRun) run(turns []testenv.Turn, args ...string) (time.Time, []agent.Event, float64) {
	r.b.Helper()
	r.model.Add(turns...)
	args = append([]string{"run", "--provider", "anthropic", "--model", "claude-sonnet-4-5", "--base-url", r.model.URL(), "--max-turns", "0"}, args...)
	cmd := exec.Command(r.bin, args...)
	cmd.Dir, cmd.Env = r.ws, r.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		r.b.Fatalf("aerie run: %v\n%s", err, stderr.String())
	}
	var evs []agent.Event
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev agent.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			r.b.Fatal(err)
		}
		evs = append(evs, ev)
	}
	rss := float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024 // KiB on Linux
	return start, evs, rss
}

func shellTurns(n int) []testenv.Turn {
	turns := make([]testenv.Turn, 0, n+1)
	for range n {
		turns = append(turns, toolTurn(call("", "bash", map[string]any{"command": "true"})))
	}
	return append(turns, answer("done"))
}

func BenchmarkRunFirstRequest(b *testing.B) {
	r := newBenchRun(b)
	r.run([]testenv.Turn{answer("warm")}, "create the database") // the database exists in real use
	var firsts []float64
	for b.Loop() {
		n := len(r.model.Requests())
		start, _, _ := r.run([]testenv.Turn{answer("ok")}, "hello")
		firsts = append(firsts, float64(r.model.Requests()[n].Time.Sub(start).Microseconds())/1000)
	}
	b.ReportMetric(median(firsts), "ms-to-first-request")
}

func BenchmarkRunTenTurns(b *testing.B) {
	r := newBenchRun(b)
	r.run([]testenv.Turn{answer("warm")}, "create the database")
	var peaks []float64
	for b.Loop() {
		_, _, rss := r.run(shellTurns(10), "ten commands")
		peaks = append(peaks, rss)
	}
	b.ReportMetric(slices.Max(peaks), "peak-RSS-MiB")
}

// BenchmarkRunTurnOverhead measures the time per turn of a 100-turn session
// whose turns each run `true`: the loop, the journal, the tool and the
// server's answer, which has no latency.
func BenchmarkRunTurnOverhead(b *testing.B) {
	r := newBenchRun(b)
	var per []float64
	for b.Loop() {
		_, evs, _ := r.run(shellTurns(100), "a hundred commands")
		var starts []time.Time
		for _, ev := range evs {
			if ev.Type == agent.EventTurnStart {
				starts = append(starts, ev.Time)
			}
		}
		for i := 1; i < len(starts); i++ {
			per = append(per, float64(starts[i].Sub(starts[i-1]).Microseconds())/1000)
		}
	}
	slices.Sort(per)
	b.ReportMetric(per[len(per)/2], "p50-ms/turn")
	b.ReportMetric(per[len(per)*99/100], "p99-ms/turn")
}

// BenchmarkRunLongSession compares the peak RSS of a 1,000-turn session
// with that of a 10-turn one.
func BenchmarkRunLongSession(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run("turns="+strconv.Itoa(n), func(b *testing.B) {
			r := newBenchRun(b)
			var peak float64
			for b.Loop() {
				_, _, rss := r.run(shellTurns(n), "many commands")
				peak = max(peak, rss)
			}
			b.ReportMetric(peak, "peak-RSS-MiB")
		})
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
