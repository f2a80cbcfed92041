package testenv

import (
	"syscall"
	"testing"
	"time"
)

// ReportCPU starts counting the processor time, user and system, of every
// thread of the test binary and of the children it has reaped; the function
// it returns, called after the benchmark's loop, reports that time per
// operation as cpu-ns/op. On a shared machine it is a steadier figure than
// the wall time, which also measures the wait for a processor.
//
//	defer testenv.ReportCPU(b)()
func ReportCPU(b *testing.B) func() {
	b.Helper()
	start := cpuTime(b)
	return func() {
		b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

// cpuTime is the processor time the process and its reaped children have
// used.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var d time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatalf("getrusage: %v", err)
		}
		d += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return d
}
