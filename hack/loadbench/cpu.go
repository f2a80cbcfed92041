package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: Linux reports
// them in USER_HZ, 100 per second on every architecture it runs on.
const userHZ = 100

// procStat is what the benchmark reads of /proc/<pid>/stat.
type procStat struct {
	comm string
	ppid int
	// cpu is the user and system time the process has used.
	cpu time.Duration
}

// parseStat parses the contents of /proc/<pid>/stat. The command name is
// in parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("parse /proc stat: no (comm) in %q", truncateBytes(b, 80))
	}
	f := bytes.Fields(b[end+1:])
	// After comm: state(3) ppid(4) ... utime(14) stime(15), 1-based.
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("parse /proc stat: %d fields after (comm), want at least 13", len(f))
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat: ppid %q: %w", f[1], err)
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(string(s), 10, 63)
		if err != nil {
			return procStat{}, fmt.Errorf("parse /proc stat: cpu time %q: %w", s, err)
		}
		ticks += n
	}
	if ticks > uint64(1<<63-1)/uint64(time.Second/userHZ) {
		return procStat{}, fmt.Errorf("parse /proc stat: cpu time of %d ticks is out of range", ticks)
	}
	return procStat{comm: string(b[open+1 : end]), ppid: ppid, cpu: time.Duration(ticks) * (time.Second / userHZ)}, nil
}

func truncateBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// cpuSample is the CPU time used so far by the processes a run watches, by
// name: the controller and the control plane's kube-apiserver and etcd.
type cpuSample map[string]time.Duration

// sampleCPU reads the CPU time of the controller (pid) and of this
// process's children named kube-apiserver and etcd. Without /proc it
// returns an empty sample, and the run reports no CPU times.
func sampleCPU(controller int) cpuSample {
	out := cpuSample{}
	if st, err := readStat(controller); err == nil {
		out["controller"] = st.cpu
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != self {
			continue
		}
		if st.comm == "kube-apiserver" || st.comm == "etcd" {
			out[st.comm] += st.cpu
		}
	}
	return out
}

// since is the CPU time used between before and s.
func (s cpuSample) since(before cpuSample) cpuSample {
	out := cpuSample{}
	for k, v := range s {
		if b, ok := before[k]; ok {
			out[k] = v - b
		}
	}
	return out
}

// peakRSS is the peak resident set of process pid (VmHWM in
// /proc/<pid>/status) in bytes, 0 when it cannot be read.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	return parseHWM(string(b))
}

// parseHWM reads VmHWM ("VmHWM:	  123456 kB") of a /proc status file, in
// bytes; 0 when it is missing or malformed.
func parseHWM(status string) int64 {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0
		}
		kib, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		return kib << 10
	}
	return 0
}
