package process

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// statLine builds a /proc/<pid>/stat line with the fields aerie reads and
// plausible values for the rest.
func statLine(pid int, comm string, state byte, ppid, pgid, sid int, start uint64) string {
	return fmt.Sprintf("%d (%s) %c %d %d %d 34817 %d 4194560 120 0 0 0 1 2 0 0 20 0 1 0 %d 2256896 160 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0",
		pid, comm, state, ppid, pgid, sid, pgid, start)
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		line string
		want stat
	}{
		{"plain", statLine(42, "sleep", 'S', 1, 42, 7, 123456), stat{42, 1, 42, 7, 'S', 123456, 4194560}},
		{"spaces in comm", statLine(43, "my prog", 'R', 2, 43, 43, 9), stat{43, 2, 43, 43, 'R', 9, 4194560}},
		{"parenthesis in comm", statLine(44, "a) (b", 'S', 3, 4, 5, 6), stat{44, 3, 4, 5, 'S', 6, 4194560}},
		// A comm crafted to look like the fields that follow it: only
		// parsing from the last ')' gets the real ones.
		{"comm mimics fields", statLine(45, "x) Z 1 1 1 0 -", 'S', 10, 45, 45, 777), stat{45, 10, 45, 45, 'S', 777, 4194560}},
		{"newline in comm", statLine(46, "a\nb", 'Z', 1, 46, 46, 5), stat{46, 1, 46, 46, 'Z', 5, 4194560}},
		{"empty comm", statLine(47, "", 'D', 1, 47, 47, 5), stat{47, 1, 47, 47, 'D', 5, 4194560}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStat([]byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(stat{})); diff != "" {
				t.Errorf("parseStat mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStatMalformed(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		"",
		"42 sleep S 1 42 42",
		"42 (sleep S 1 42 42",
		"x (sleep) S 1 42 42 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"42 (sleep) S 1 42 42 0 0",
		"42 (sleep) S 1 42 42 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 -5",
		"42 (sleep) SS 1 42 42 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"42 (sleep) S one 42 42 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
	} {
		if s, err := parseStat([]byte(line)); err == nil {
			t.Errorf("parseStat(%q) = %+v, want an error", line, s)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add(statLine(1, "init", 'S', 0, 1, 1, 1))
	f.Add(statLine(45, "x) Z 1 1 1 0 -", 'S', 10, 45, 45, 777))
	f.Fuzz(func(t *testing.T, line string) {
		_, _ = parseStat([]byte(line)) // must not panic
	})
}

// TestReadStatOddName runs a real process whose comm has spaces and
// parentheses, and reads its identity back.
func TestReadStatOddName(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("sleep (coreutils) is needed for this test: %v", err)
	}
	link := filepath.Join(t.TempDir(), "x) S 1 1 (y")
	if err := os.Symlink(sleep, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, "30")
	g, err := Start(cmd, NewID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	st, err := readStat(g.PID)
	if err != nil {
		t.Fatal(err)
	}
	want := stat{pid: g.PID, ppid: os.Getpid(), pgid: g.PID, state: st.state, sid: st.sid, start: g.Birth.StartTime, flags: st.flags}
	if diff := cmp.Diff(want, st, cmp.AllowUnexported(stat{})); diff != "" {
		t.Errorf("readStat mismatch (-want +got):\n%s", diff)
	}
	if g.Birth.StartTime == 0 || g.Birth.BootID == "" || g.Birth.PIDNamespace == "" {
		t.Errorf("birth fingerprint %+v is incomplete", g.Birth)
	}
	if st.kernel() {
		t.Errorf("%d taken for a kernel thread: flags %#x", g.PID, st.flags)
	}
	// kthreadd, when this PID namespace shows it, is the kernel's.
	if k, err := readStat(2); err == nil && k.ppid == 0 && !k.kernel() {
		t.Errorf("pid 2 (%+v) not taken for a kernel thread", k)
	}
}
