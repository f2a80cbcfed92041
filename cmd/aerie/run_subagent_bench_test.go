package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
)

// BenchmarkRunSubagents measures aerie run fanning out: a root that spawns
// 16 children at once, each of 5 turns (4 tool steps and an answer)
// against a fake model server that holds every answer back 50 ms, beside
// the same run with one child. Each iteration runs both as processes and
// reports the wall time of 16 over that of one (wall-ratio; the target is
// at most 1.2) and the growth of the peak resident set per further child
// (rss-MiB/child; the target is at most 2), with the wall times and peak
// sets themselves, and the CPU time of the 16 (cpu-ms-16: user and
// system time of the process and its tools), which shows how near the
// machine's cores the fan-out runs. The file case's children write and read files, the
// bash case's run shell commands.
//
//	go test -run '^$' -bench RunSubagents -benchtime 3x ./cmd/aerie/
func BenchmarkRunSubagents(b *testing.B) {
	steps := map[string]func(child, step int) testenv.ToolCall{
		"file": func(child, step int) testenv.ToolCall {
			path := fmt.Sprintf("c%d-%d.txt", child, step)
			if step%2 == 1 {
				return call(fmt.Sprintf("r%d", step), "read_file", map[string]any{"path": fmt.Sprintf("c%d-%d.txt", child, step-1)})
			}
			return call(fmt.Sprintf("w%d", step), "write_file", map[string]any{"path": path, "content": "some text\n"})
		},
		"bash": func(child, step int) testenv.ToolCall {
			return call(fmt.Sprintf("b%d", step), "bash", map[string]any{
				"command": fmt.Sprintf("echo step %d > c%d.txt && cat c%d.txt", step, child, child),
			})
		},
	}
	for _, kind := range []string{"file", "bash"} {
		b.Run(kind, func(b *testing.B) {
			var ratio, growth, wall1, wall16, rss1, rss16, cpu16 float64
			for b.Loop() {
				w1, r1, _ := fanOut(b, 1, steps[kind])
				w16, r16, c16 := fanOut(b, 16, steps[kind])
				cpu16 += c16.Seconds() * 1000
				ratio += w16.Seconds() / w1.Seconds()
				growth += float64(r16-r1) / 15 / (1 << 20)
				wall1 += w1.Seconds() * 1000
				wall16 += w16.Seconds() * 1000
				rss1 += float64(r1) / (1 << 20)
				rss16 += float64(r16) / (1 << 20)
			}
			n := float64(b.N)
			b.ReportMetric(ratio/n, "wall-ratio")
			b.ReportMetric(growth/n, "rss-MiB/child")
			b.ReportMetric(wall1/n, "wall-ms-1")
			b.ReportMetric(wall16/n, "wall-ms-16")
			b.ReportMetric(rss1/n, "peak-rss-MiB-1")
			b.ReportMetric(rss16/n, "peak-rss-MiB-16")
			b.ReportMetric(cpu16/n, "cpu-ms-16")
		})
	}
}

// fanOut runs aerie run once with a root spawning n children at once,
// each taking the steps step gives; it returns the run's wall time, the
// process's peak resident set in bytes, and the CPU time of the process
// and the tool processes it waited for.
func fanOut(b *testing.B, n int, step func(child, step int) testenv.ToolCall) (wall time.Duration, rss int64, cpu time.Duration) {
	b.Helper()
	const latency = 50 * time.Millisecond
	ws, home := b.TempDir(), b.TempDir()
	testenv.WriteFile(b, filepath.Join(ws, ".aerie/config.toml"), "[subagents]\nmax_concurrent = 16\n", 0o644)
	var spawns []testenv.ToolCall
	for i := range n {
		spawns = append(spawns, spawn(fmt.Sprintf("s%d", i), fmt.Sprintf("child-%d: work", i)))
	}
	delayed := func(t testenv.Turn) testenv.Turn { t.Delay = latency; return t }
	model := testenv.StartModelServer(b, delayed(toolTurn(spawns...)), delayed(answer("all done")))
	for i := range n {
		var turns []testenv.Turn
		for s := range 4 {
			turns = append(turns, delayed(toolTurn(step(i, s))))
		}
		model.Conversation(fmt.Sprintf("child-%d:", i), append(turns, delayed(answer("done")))...)
	}
	cmd := exec.Command(os.Args[0], "run", "--provider", "anthropic", "--model", "claude-sonnet-4-5",
		"--base-url", model.URL(), "fan out")
	cmd.Dir = ws
	cmd.Env = []string{
		asMainEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + home, "AERIE_HOME=" + home,
		"ANTHROPIC_API_KEY=sk-ant-bench",
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall = time.Since(start)
	if err != nil {
		b.Fatalf("aerie run with %d children: %v\n%s", n, err, out)
	}
	if left := model.Remaining(); left != 0 {
		b.Fatalf("%d children: %d turns left unanswered\n%s", n, left, out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no resource usage of the run")
	}
	cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return wall, ru.Maxrss << 10, cpu // Maxrss is in kilobytes on Linux
}
