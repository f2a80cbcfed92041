package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
)

// maxBombRSS bounds the peak memory of a run whose hook or tool
// misbehaves.
const maxBombRSS = 512 << 20

// TestHookAndToolBombs runs sessions whose PreToolUse hook prints 1 GB or
// a verdict nested 100,000 deep, and one whose tool forks processes that
// outlive it, 1,000 in the bounded run and 10,000 under FAULTS_SCALE: each
// run must stay within bounded memory and time, tear everything down, and
// go on to complete its session. (TestForkBombPidsLimit is the bomb that
// hits a pids limit.)
func TestHookAndToolBombs(t *testing.T) {
	t.Parallel()
	forks := 1000
	if scale() > 1 {
		forks = 10000
	}
	for _, tc := range []struct {
		name, hook, command string
		forked              int // processes the command leaves behind
	}{
		{name: "hook printing 1 GB", hook: "head -c 1073741824 /dev/zero"},
		{name: "verdict nested 100000 deep", hook: "cat {{home}}/deep.json"},
		{name: fmt.Sprintf("tool forking %d processes", forks),
			command: fmt.Sprintf("for i in $(seq %d); do sleep 60 >/dev/null 2>&1 & echo $! >> pids.log; done; echo spawned", forks),
			forked:  forks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "")
			deep := strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000)
			testenv.WriteFile(t, filepath.Join(e.home, "deep.json"), deep, 0o644)
			if tc.hook != "" {
				hook := strings.ReplaceAll(tc.hook, "{{home}}", e.home)
				testenv.WriteFile(t, filepath.Join(e.home, "hooks.toml"),
					"[[hooks.PreToolUse]]\nmatcher = \"bash\"\n[[hooks.PreToolUse.hooks]]\ncommand = "+quote(hook)+"\n", 0o644)
			}
			command := cmpOr(tc.command, "echo ran")
			args, _ := json.Marshal(map[string]any{"command": "echo bomb >> steps.log; echo $$ >> pids.log; " + command})
			s := e.scripted(t, "bomb", testenv.Turn{ToolCalls: []testenv.ToolCall{{Name: "bash", Arguments: string(args)}}}, done())
			counts.faults.Add(1)
			out := s.run(3 * time.Minute)
			t.Logf("exit %d in %v, peak RSS %d MB: %s", out.code, out.took.Round(time.Millisecond), out.maxRSS>>20, lastLine(out.stderr))
			if out.code != 0 {
				violation(t, "%s: exit %d; stderr:\n%s", tc.name, out.code, tail(out.stderr))
			}
			if out.maxRSS > maxBombRSS {
				violation(t, "%s: peak RSS %d MB, over %d MB", tc.name, out.maxRSS>>20, maxBombRSS>>20)
			}
			if b, _ := os.ReadFile(filepath.Join(s.ws, "steps.log")); string(b) != "bomb\n" {
				t.Logf("%s: the command ran %d times (a hook failure may deny it)", tc.name, strings.Count(string(b), "bomb"))
			}
			s.checkStored()
			s.checkAnswered()
			if b, _ := os.ReadFile(filepath.Join(s.ws, "pids.log")); tc.forked > 0 && strings.Count(string(b), "\n") != tc.forked+1 {
				t.Errorf("%s: %d processes recorded, want the shell and %d", tc.name, strings.Count(string(b), "\n"), tc.forked)
			}
			s.checkProcesses()
			counts.entries.Add(int64(len(s.seen)))
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func cmpOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
