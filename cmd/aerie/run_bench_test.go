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
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/aerie-run/aerie/hack/testenv"
)

// The benchmarks run the aerie binary itself, built once as the Makefile
// and the Dockerfile build it (static, stripped), against the fake model
// server with no latency, and report what a user of aerie run sees:
//
//	go test -run '^$' -bench BenchmarkRun -benchtime 20x -count 5 ./cmd/aerie/
//
// Custom metrics: ms-to-first-request (process start to the model's first
// request), binary-MB (the size of the binary), peak-RSS-MiB (the process's
// maximum resident set, measured by hack/peakrss so that the benchmark's
// own memory is not counted), and the p50 and p99 of the time per turn.
//
// AERIE_BENCH_BIN=path benchmarks that binary instead of building one,
// which is how two versions are compared: build both, then run each in turn
// and compare with benchstat.

// buildAerie builds the aerie binary for the benchmarks, or returns
// $AERIE_BENCH_BIN.
func buildAerie(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("AERIE_BENCH_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			b.Fatal(err)
		}
		return abs
	}
	bin := filepath.Join(b.TempDir(), "aerie")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// buildPeakRSS builds hack/peakrss, which runs a command and reports its
// peak resident set. A child's ru_maxrss read here would include this
// process's own, which grows with every request the fake server keeps.
func buildPeakRSS(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "peakrss")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/aerie-run/aerie/hack/peakrss").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type benchRun struct {
	b *testing.B
	// cpu is the processor time of the runs so far: aerie's, with that of
	// the processes it ran and waited for.
	cpu     time.Duration
	bin     string
	peakRSS string // hack/peakrss; empty runs aerie directly
	ws      string
	model   *testenv.ModelServer
	env     []string
}

func newBenchRun(b *testing.B) *benchRun { return newBenchRunOf(b, buildAerie(b)) }

// newBenchRunOf runs bin, which takes aerie run's arguments.
func newBenchRunOf(b *testing.B, bin string) *benchRun {
	home := b.TempDir()
	return &benchRun{
		b: b, bin: bin, ws: b.TempDir(), model: testenv.StartModelServer(b),
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "AERIE_HOME=" + home, "ANTHROPIC_API_KEY=k"},
	}
}

// withRSS makes the runs go through hack/peakrss, which adds its own start
// to theirs: only for the benchmarks that report the resident set.
func (r *benchRun) withRSS() *benchRun {
	r.peakRSS = buildPeakRSS(r.b)
	return r
}

// run runs one session and returns its start time, events and peak RSS
// (0 without withRSS).
func (r *benchRun) run(turns []testenv.Turn, args ...string) (time.Time, []events.Event, float64) {
	r.b.Helper()
	r.model.Add(turns...)
	args = append([]string{"run", "--provider", "anthropic", "--model", "claude-sonnet-4-5", "--base-url", r.model.URL(), "--max-turns", "0"}, args...)
	var rssFile string
	cmd := exec.Command(r.bin, args...)
	if r.peakRSS != "" {
		rssFile = filepath.Join(r.b.TempDir(), "rss")
		cmd = exec.Command(r.peakRSS, append([]string{rssFile, r.bin}, args...)...)
	}
	cmd.Dir, cmd.Env = r.ws, r.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		r.b.Fatalf("aerie run: %v\n%s", err, stderr.String())
	}
	r.cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	var evs []events.Event
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev events.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			r.b.Fatal(err)
		}
		evs = append(evs, ev)
	}
	var rss float64
	if rssFile != "" {
		b, err := os.ReadFile(rssFile)
		if err != nil {
			r.b.Fatal(err)
		}
		kib, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		if err != nil {
			r.b.Fatalf("peakrss wrote %q: %v", b, err)
		}
		rss = kib / 1024
	}
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
	newBenchRun(b).firstRequests()
}

// BenchmarkRunFirstRequestFloor measures hack/startfloor the way
// BenchmarkRunFirstRequest measures aerie: "bare" is a Go program that opens
// a SQLite store and posts one request, "deps" the same program linking
// every package of other modules that aerie imports. deps is the floor
// under aerie's start with the dependencies it has; the difference between
// bare and deps is what they cost at each start, before aerie does anything.
func BenchmarkRunFirstRequestFloor(b *testing.B) {
	for _, v := range []struct{ name, tags string }{{"bare", ""}, {"deps", "startfloor_deps"}} {
		b.Run(v.name, func(b *testing.B) {
			bin := filepath.Join(b.TempDir(), "startfloor")
			cmd := exec.Command("go", "build", "-tags="+v.tags, "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/aerie-run/aerie/hack/startfloor")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("go build: %v\n%s", err, out)
			}
			newBenchRunOf(b, bin).firstRequests()
		})
	}
}

// firstRequests runs a one-turn session per iteration, after one that
// creates the database (it exists in real use), and reports the median time
// from the process's start to the model's first request, and the binary's
// size.
func (r *benchRun) firstRequests() {
	r.run([]testenv.Turn{answer("warm")}, "create the database")
	fi, err := os.Stat(r.bin)
	if err != nil {
		r.b.Fatal(err)
	}
	var firsts []float64
	for r.b.Loop() {
		n := len(r.model.Requests())
		start, _, _ := r.run([]testenv.Turn{answer("ok")}, "hello")
		firsts = append(firsts, float64(r.model.Requests()[n].Time.Sub(start).Microseconds())/1000)
	}
	r.b.ReportMetric(median(firsts), "ms-to-first-request")
	r.b.ReportMetric(float64(fi.Size())/1e6, "binary-MB")
}

func BenchmarkRunTenTurns(b *testing.B) {
	r := newBenchRun(b).withRSS()
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
// server's answer, which has no latency. The turn splits into the tool call
// (tool_call to tool_result: starting bash, which runs `true`, and the
// executor's work around it) and the rest of the loop (the request, the
// server's answer, the journal at the turn's end, the events); bash-true-ms
// is what `bash -c true` alone takes here, the floor under the tool call.
//
// The loop overhead is what the turn costs aerie, as the performance target
// defines it: the turn less the server's own time answering its request
// (ModelServer.ServerTimes, from the request's arrival to the last byte
// flushed). overhead-ms/turn keeps the tool call in; noproc-ms/turn also
// takes out the life of the tool's process, which the executor reports on
// tool_result (process_ns: from just before its fork to its exit as seen by
// the executor), leaving what aerie does around the child: the bash tool,
// pipes, process group, reaping, teardown, capping, the journal, the events.
//
// cpu-ms/turn is the processor time of the session per turn, its tools'
// processes included: on a busy machine, where wall times spread, it still
// tells two binaries apart.
func BenchmarkRunTurnOverhead(b *testing.B) {
	r := newBenchRun(b)
	var per, tool, loop, over, noproc []float64
	noProc := false
	for b.Loop() {
		n := len(r.model.Requests())
		_, evs, _ := r.run(shellTurns(100), "a hundred commands")
		served := r.model.ServerTimes(b.Context())[n:]
		if len(served) != 101 {
			b.Fatalf("%d model requests for 101 turns", len(served))
		}
		var start, call time.Time
		var toolMS, procMS float64
		for _, ev := range evs {
			switch ev.Type {
			case events.TurnStart:
				if !start.IsZero() {
					turn := ms(ev.Time.Sub(start))
					per = append(per, turn)
					tool = append(tool, toolMS)
					loop = append(loop, turn-toolMS)
					// Turn k (from 1) asked request k-1 of this run.
					o := turn - ms(served[ev.Turn-2])
					over = append(over, o)
					noproc = append(noproc, o-procMS)
				}
				start, toolMS, procMS = ev.Time, 0, 0
			case events.ToolCall:
				call = ev.Time
			case events.ToolResult:
				toolMS += ms(ev.Time.Sub(call))
				procMS += ms(ev.Process)
				// A binary from before process_ns cannot tell.
				noProc = noProc || ev.Process <= 0
			}
		}
	}
	b.StopTimer()
	var bash []float64
	for range 50 {
		start := time.Now()
		if out, err := exec.Command("bash", "-c", "true").CombinedOutput(); err != nil {
			b.Fatalf("bash -c true: %v\n%s", err, out)
		}
		bash = append(bash, ms(time.Since(start)))
	}
	b.ReportMetric(percentile(per, 50), "p50-ms/turn")
	b.ReportMetric(percentile(per, 99), "p99-ms/turn")
	b.ReportMetric(percentile(tool, 50), "p50-tool-ms/turn")
	b.ReportMetric(percentile(loop, 50), "p50-loop-ms/turn")
	b.ReportMetric(percentile(loop, 99), "p99-loop-ms/turn")
	b.ReportMetric(percentile(over, 50), "p50-overhead-ms/turn")
	b.ReportMetric(percentile(over, 99), "p99-overhead-ms/turn")
	if !noProc {
		b.ReportMetric(percentile(noproc, 50), "p50-noproc-ms/turn")
		b.ReportMetric(percentile(noproc, 99), "p99-noproc-ms/turn")
	}
	b.ReportMetric(percentile(bash, 50), "bash-true-ms")
	b.ReportMetric(ms(r.cpu)/float64(b.N*101), "cpu-ms/turn")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile returns the p-th percentile of xs (nearest rank).
func percentile(xs []float64, p int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)*p/100]
}

// BenchmarkRunLongSession compares the peak RSS of a 1,000-turn session
// with that of a 10-turn one.
func BenchmarkRunLongSession(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run("turns="+strconv.Itoa(n), func(b *testing.B) {
			r := newBenchRun(b).withRSS()
			var peak float64
			for b.Loop() {
				_, _, rss := r.run(shellTurns(n), "many commands")
				peak = max(peak, rss)
			}
			b.ReportMetric(peak, "peak-RSS-MiB")
		})
	}
}

func median(xs []float64) float64 { return percentile(xs, 50) }

// BenchmarkRunCompactedSession compares the peak RSS of a 2,000-step build
// with a 32k window, compacted automatically again and again, with that of
// a 10-step one: what a long task keeps in memory must not grow with its
// history. It also reports how many compactions the run made.
func BenchmarkRunCompactedSession(b *testing.B) {
	const window = 32_000
	for _, n := range []int{10, 2000} {
		b.Run("turns="+strconv.Itoa(n), func(b *testing.B) {
			r := newBenchRun(b).withRSS()
			r.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
			var peak float64
			compactions := 0
			for b.Loop() {
				_, evs, rss := r.run(buildSteps(n), "--context-window", strconv.Itoa(window), "Build every step.")
				peak = max(peak, rss)
				compactions = 0
				var end events.Event
				for _, ev := range evs {
					switch ev.Type {
					case events.Compaction:
						compactions++
					case events.SessionEnd:
						end = ev
					}
				}
				if end.Text != "All steps built." {
					b.Fatalf("session end %s %q: %s", end.Outcome, end.Text, end.Reason)
				}
			}
			b.ReportMetric(peak, "peak-RSS-MiB")
			b.ReportMetric(float64(compactions), "compactions")
		})
	}
}
