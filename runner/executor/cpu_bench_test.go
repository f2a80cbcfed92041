package executor

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/process"
)

// cpuNow is the CPU time, user and system, of this process and of the
// children it has waited for.
func cpuNow(b *testing.B) time.Duration {
	var self, kids syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids); err != nil {
		b.Fatal(err)
	}
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// BenchmarkBashCPU is the CPU cost of one bash tool call's command, a
// `bash -c` that runs one more program, in this process and its children
// (cpu-us/op): started with exec alone (the floor: bash itself), through
// Local as the bash tool starts it, and through Local with a ledger as
// aerie run has it. The differences are the executor's own share: the
// group's fingerprint, the reaper's passes and its Gone check, the
// supervising goroutines, the ledger's record.
//
//	go test -run '^$' -bench BashCPU -benchtime 300x -count 6 ./runner/executor/
func BenchmarkBashCPU(b *testing.B) {
	script := "echo step 1 > c1.txt && cat c1.txt"
	run := func(b *testing.B, f func()) {
		c0 := cpuNow(b)
		for b.Loop() {
			f()
		}
		b.ReportMetric(float64((cpuNow(b)-c0).Microseconds())/float64(b.N), "cpu-us/op")
	}
	b.Run("exec", func(b *testing.B) {
		dir := b.TempDir()
		env := Environ(os.Environ(), nil, nil)
		run(b, func() {
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir, cmd.Env = dir, env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if _, err := testReaper.Start(cmd, process.NewID()); err != nil {
				b.Fatal(err)
			}
			if err := testReaper.Wait(cmd); err != nil {
				b.Fatal(err)
			}
		})
	})
	for _, withLedger := range []bool{false, true} {
		name := "local"
		if withLedger {
			name = "local+ledger"
		}
		b.Run(name, func(b *testing.B) {
			opts := Options{}
			if withLedger {
				l, err := process.OpenLedger(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				opts.Ledger = l
			}
			l := newLocal(b, opts)
			ctx := context.Background()
			run(b, func() {
				runForeground(ctx, b, l, Command{Script: script, Shell: "bash", CombinedOutput: true})
			})
		})
	}
}
