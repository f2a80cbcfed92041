package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
)

func TestBash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     string
		wantErr  bool
		contains []string
		absent   []string
	}{
		{name: "stdout and stderr", args: `{"command":"echo out; echo err >&2"}`, contains: []string{"out\n", "err\n"}},
		{name: "no output", args: `{"command":"true"}`, contains: []string{"[no output]"}},
		{name: "exit code", args: `{"command":"echo before; exit 3"}`, wantErr: true, contains: []string{"before", "[exit code 3]"}},
		{name: "runs in workspace", args: `{"command":"pwd; ls"}`, contains: []string{"marker.txt"}},
		{name: "bash syntax", args: `{"command":"a=(x y); echo ${#a[@]}"}`, contains: []string{"2"}},
		{name: "without validation, goes on after a failure", args: `{"command":"false; echo after"}`, contains: []string{"after"}},
		{name: "validation stops at the first failure", args: `{"command":"echo one; false; echo two", "validation": true}`,
			wantErr: true, contains: []string{"one", "[exit code 1]"}, absent: []string{"two"}},
		{name: "validation pipefail", args: `{"command":"false | cat; echo after", "validation": true}`,
			wantErr: true, contains: []string{"[exit code 1]"}, absent: []string{"after"}},
		{name: "validation and background", args: `{"command":"true", "validation": true, "background": true}`,
			wantErr: true, contains: []string{"cannot be combined"}},
		{name: "missing command", args: `{}`, wantErr: true, contains: []string{`missing required argument "command"`}},
		{name: "blank command", args: `{"command":"  "}`, wantErr: true, contains: []string{`missing required argument "command"`}},
		{name: "wrong type", args: `{"command":1}`, wantErr: true, contains: []string{"invalid arguments"}},
		{name: "unknown argument", args: `{"command":"true","cwd":"/"}`, wantErr: true, contains: []string{"invalid arguments", "cwd"}},
		{name: "timeout too large", args: `{"command":"true","timeout":3601}`, wantErr: true, contains: []string{"between 1 and 3600"}},
		{name: "timeout zero", args: `{"command":"true","timeout":0}`, wantErr: true, contains: []string{"between 1 and 3600"}},
		{name: "killed by signal", args: `{"command":"kill -KILL $$"}`, wantErr: true, contains: []string{"SIGKILL"}},
	}
	l, dir := newWorkspace(t)
	testenv.WriteTree(t, dir, map[string]string{"marker.txt": ""})
	b := NewBash(l, NewBackground(l))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := b.Run(context.Background(), json.RawMessage(tt.args))
			check(t, got, tt.wantErr, tt.contains...)
			for _, s := range tt.absent {
				if strings.Contains(got.Content, s) {
					t.Errorf("content contains %q:\n%s", s, got.Content)
				}
			}
		})
	}
}

// readPIDs reads the process ids a script wrote into file, one a line.
func readPIDs(t *testing.T, file string) []int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

func TestBashTimeoutTearsDownGroup(t *testing.T) {
	t.Parallel()
	l, dir := newWorkspace(t)
	b := NewBash(l, NewBackground(l))
	start := time.Now()
	got := b.Run(context.Background(), args(t, map[string]any{
		"command": "sleep 100 & echo $! > pids; echo $$ >> pids; echo started; sleep 100",
		"timeout": 1,
	}))
	check(t, got, true, "started", "timed out after 1s")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	for _, pid := range readPIDs(t, filepath.Join(dir, "pids")) {
		if testenv.Alive(pid) {
			t.Errorf("process %d is still alive after the timeout", pid)
		}
	}
	infos, err := l.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 0 {
		t.Errorf("executor still lists %d groups", len(infos))
	}
}

func TestBashLeftBehindChildEndsWithCall(t *testing.T) {
	t.Parallel()
	l, dir := newWorkspace(t)
	b := NewBash(l, NewBackground(l))
	got := b.Run(context.Background(), args(t, map[string]any{"command": "sleep 100 & echo $! > pids; echo done"}))
	check(t, got, false, "done")
	for _, pid := range readPIDs(t, filepath.Join(dir, "pids")) {
		if testenv.Alive(pid) {
			t.Errorf("left-behind process %d is still alive", pid)
		}
	}
}

func TestBashCancel(t *testing.T) {
	t.Parallel()
	l, _ := newWorkspace(t)
	b := NewBash(l, NewBackground(l))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	got := b.Run(ctx, args(t, map[string]any{"command": "sleep 100"}))
	check(t, got, true, "cancelled")
}

func TestBackgroundProcessRoundTrip(t *testing.T) {
	t.Parallel()
	l, dir := newWorkspace(t)
	bg := NewBackground(l)
	b, p := NewBash(l, bg), NewProcess(bg)
	ctx := context.Background()
	run := func(v map[string]any) Result { return p.Run(ctx, args(t, v)) }

	check(t, run(map[string]any{"action": "list"}), false, "no background processes")

	start := time.Now()
	got := b.Run(ctx, args(t, map[string]any{
		"command":    `echo $$ > pid; echo ready; while read -r line; do echo "got:$line"; done; echo eof`,
		"background": true,
		"timeout":    1, // ignored
	}))
	check(t, got, false, "started background process")
	if time.Since(start) > 5*time.Second {
		t.Error("background start did not return at once")
	}
	id := regexp.MustCompile(`process (\S+)`).FindStringSubmatch(got.Content)[1]

	check(t, run(map[string]any{"action": "list"}), false, id, "running", "while read")

	if !testenv.Poll(5*time.Second, func() bool { return strings.Contains(run(map[string]any{"action": "poll", "id": id}).Content, "ready") }) {
		t.Fatal("never saw ready")
	}
	check(t, run(map[string]any{"action": "poll", "id": id}), false, "[no new output]", "running")

	check(t, run(map[string]any{"action": "write", "id": id, "input": "hello"}), false, "wrote 6 bytes")
	check(t, run(map[string]any{"action": "write", "id": id, "input": "wor", "newline": false}), false, "wrote 3 bytes")
	check(t, run(map[string]any{"action": "write", "id": id, "input": "ld"}), false)
	var out strings.Builder
	if !testenv.Poll(5*time.Second, func() bool {
		out.WriteString(run(map[string]any{"action": "poll", "id": id}).Content)
		return strings.Contains(out.String(), "got:world")
	}) {
		t.Fatalf("output so far: %s", out.String())
	}
	if !strings.Contains(out.String(), "got:hello") || strings.Count(out.String(), "got:hello") != 1 {
		t.Errorf("poll repeated or lost output: %s", out.String())
	}

	pid := readPIDs(t, filepath.Join(dir, "pid"))[0]
	check(t, run(map[string]any{"action": "kill", "id": id}), false, id)
	if !testenv.Poll(5*time.Second, func() bool { return !testenv.Alive(pid) }) {
		t.Errorf("process %d still alive after kill", pid)
	}
	check(t, run(map[string]any{"action": "poll", "id": id}), false, "killed")
	check(t, run(map[string]any{"action": "list"}), false, id, "killed")
}

func TestBackgroundProcessExits(t *testing.T) {
	t.Parallel()
	l, _ := newWorkspace(t)
	bg := NewBackground(l)
	b, p := NewBash(l, bg), NewProcess(bg)
	ctx := context.Background()
	got := b.Run(ctx, args(t, map[string]any{"command": "echo bye; exit 4", "background": true}))
	id := regexp.MustCompile(`process (\S+)`).FindStringSubmatch(got.Content)[1]
	var out strings.Builder
	if !testenv.Poll(5*time.Second, func() bool {
		r := p.Run(ctx, args(t, map[string]any{"action": "poll", "id": id}))
		out.WriteString(r.Content)
		return strings.Contains(r.Content, "exited with code 4")
	}) {
		t.Fatalf("never exited: %s", out.String())
	}
	if !strings.Contains(out.String(), "bye") {
		t.Errorf("output lost: %s", out.String())
	}
	check(t, p.Run(ctx, args(t, map[string]any{"action": "kill", "id": id})), false)
}

func TestProcessErrors(t *testing.T) {
	t.Parallel()
	l, _ := newWorkspace(t)
	p := NewProcess(NewBackground(l))
	tests := []struct {
		name, args string
		want       string
	}{
		{"missing action", `{}`, `missing required argument "action"`},
		{"unknown action", `{"action":"restart","id":"x"}`, `unknown action "restart"`},
		{"poll without id", `{"action":"poll"}`, "poll needs the id"},
		{"write without id", `{"action":"write","input":"x"}`, "write needs the id"},
		{"kill without id", `{"action":"kill"}`, "kill needs the id"},
		{"unknown id", `{"action":"poll","id":"nope"}`, `no background process "nope"`},
		{"bad newline", `{"action":"write","id":"x","newline":"yes"}`, "invalid arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, p.Run(context.Background(), json.RawMessage(tt.args)), true, tt.want)
		})
	}
}

// TestBashProcessTime checks that a foreground command's result carries
// how long the command lived, inside the time of the whole call, and that
// a call that runs no command carries none.
func TestBashProcessTime(t *testing.T) {
	t.Parallel()
	l, _ := newWorkspace(t)
	b := NewBash(l, NewBackground(l))
	const sleep = 50 * time.Millisecond
	start := time.Now()
	got := b.Run(context.Background(), args(t, map[string]any{"command": "sleep 0.05"}))
	call := time.Since(start)
	check(t, got, false, "[no output]")
	if got.Process < sleep || got.Process > call {
		t.Errorf("process time %v, want at least the command's %v and at most the call's %v", got.Process, sleep, call)
	}
	if got := b.Run(context.Background(), json.RawMessage(`{}`)); got.Process != 0 {
		t.Errorf("process time %v for a call that ran no command", got.Process)
	}
}
