package extensions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

// loadOne writes the manifest doc and the files of a tool in a spec layer
// (trusted without a pin), loads it with a real executor, and returns it.
func loadOne(t *testing.T, doc string, files map[string]string) *Tool {
	t.Helper()
	dir := t.TempDir()
	spec := filepath.Join(dir, "layer")
	files["tools/t.toml"] = doc
	testenv.WriteTree(t, spec, files)
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	src := layer.Source{Layers: []layer.Layer{{Name: "spec[0]", Dir: spec, Kind: layer.KindSpec}}, Workspace: ws}
	loaded, arts, err := LoadTools(src, ToolOptions{Commands: newExecutor(t, ws)})
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 1 {
		t.Fatalf("loaded %d tools: %+v", len(loaded), arts)
	}
	return loaded[0]
}

func TestToolRun(t *testing.T) {
	t.Parallel()
	tool := loadOne(t, `name = "echo_input"
description = "Echoes its input with its arguments and directory."
command = ["./echo.sh", "fixed arg"]
[parameters.text]
type = "string"
required = true
[parameters.mode]
type = "string"
enum = ["a", "b"]
`, map[string]string{
		"tools/echo.sh": "#!/bin/sh\nprintf 'args=%s|' \"$*\"\nprintf 'pwd=%s|' \"$(pwd)\"\nprintf 'stdin='; cat\necho 'ignored' >&2\n",
	})
	res := tool.Run(context.Background(), json.RawMessage(`{ "text": "hi\nthere",
		"mode": "a" }`))
	want := fmt.Sprintf("args=fixed arg|pwd=%s|stdin={\"text\":\"hi\\nthere\",\"mode\":\"a\"}\n", filepath.Dir(tool.Argv()[0]))
	if res.IsError || res.Content != want {
		t.Errorf("result = %+v\nwant content %q", res, want)
	}

	for _, tt := range []struct{ call, want string }{
		{`{}`, `echo_input: invalid arguments: missing required parameter "text"`},
		{`{"text": null}`, `missing required parameter "text"`},
		{`{"text": "x", "mode": "c"}`, `parameter "mode" must be one of "a", "b"`},
		{`["text"]`, `want a JSON object`},
		{`{"text": "x"} {}`, `want a JSON object`},
	} {
		o := tool.Call(context.Background(), json.RawMessage(tt.call))
		if !o.Result.IsError || o.Failure != FailureInput || !strings.Contains(o.Result.Content, tt.want) {
			t.Errorf("call %s: %+v, want an input failure with %q", tt.call, o, tt.want)
		}
	}
}

func TestToolFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		script  string
		failure Failure
		want    []string
	}{
		{
			name:    "non-zero exit returns the output and an error",
			script:  "#!/bin/sh\necho partial\necho 'bad input' >&2\nexit 3\n",
			failure: FailureExit,
			want:    []string{"partial\n", "[stderr]\nbad input\n", "[t exited with code 3]"},
		},
		{
			name:    "killed by a signal",
			script:  "#!/bin/sh\nkill -KILL $$\n",
			failure: FailureExit,
			want:    []string{"[t killed by SIGKILL]"},
		},
		{
			name:    "program is not executable",
			script:  "not a script",
			failure: FailureSpawn,
			want:    []string{"t: start ", "permission denied"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := loadOne(t, manifest("t", "./t.sh"), map[string]string{"tools/t.sh": tt.script})
			o := tool.Call(context.Background(), nil)
			if !o.Result.IsError || o.Failure != tt.failure {
				t.Fatalf("outcome = %+v, want failure %s", o, tt.failure)
			}
			for _, w := range tt.want {
				if !strings.Contains(o.Result.Content, w) {
					t.Errorf("result %q does not contain %q", o.Result.Content, w)
				}
			}
		})
	}
}

// TestToolTimeoutKillsGroup: at its timeout the tool's whole process
// group, a background child included, is terminated.
func TestToolTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	tool := loadOne(t, manifest("slow", "./slow.sh")+"timeout_secs = 1\n", map[string]string{
		"tools/slow.sh": "#!/bin/sh\nsleep 300 &\necho child $!\nsleep 300\n",
	})
	start := time.Now()
	o := tool.Call(context.Background(), nil)
	if o.Failure != FailureTimeout || !strings.Contains(o.Result.Content, "[slow timed out after 1s; its process group was terminated]") {
		t.Fatalf("outcome = %+v, want a timeout", o)
	}
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Errorf("the call took %s", elapsed)
	}
	assertGone(t, o.Result.Content)
}

// TestToolCancelKillsGroup: canceling the call's context terminates the
// group too.
func TestToolCancelKillsGroup(t *testing.T) {
	t.Parallel()
	tool := loadOne(t, manifest("slow", "./slow.sh"), map[string]string{
		"tools/slow.sh": "#!/bin/sh\nsleep 300 &\necho child $!\nsleep 300\n",
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	o := tool.Call(ctx, nil)
	if o.Failure != FailureCanceled || !strings.Contains(o.Result.Content, "canceled; its process group was terminated") {
		t.Fatalf("outcome = %+v, want canceled", o)
	}
	assertGone(t, o.Result.Content)
}

// assertGone checks that the process the tool reported as "child PID" no
// longer exists (the test binary is a subreaper, so not even a zombie).
func assertGone(t *testing.T, out string) {
	t.Helper()
	i := strings.Index(out, "child ")
	if i < 0 {
		t.Fatalf("no child pid in %q", out)
	}
	pid, err := strconv.Atoi(strings.Fields(out[i+len("child "):])[0])
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("background child %d is gone, not even a zombie", pid),
		func() bool { return syscall.Kill(pid, 0) != nil })
}

// TestToolOutputCapped: each stream keeps 512 KiB of head and of tail,
// with the number of dropped bytes between.
func TestToolOutputCapped(t *testing.T) {
	t.Parallel()
	// 3 MiB on stdout: 'h' * 1 MiB, 'm' * 1 MiB, 't' * 1 MiB; then fail so
	// that stderr (2 MiB of 'e') is shown too.
	tool := loadOne(t, manifest("big", "./big.sh"), map[string]string{
		"tools/big.sh": "#!/bin/sh\n" +
			"head -c 1048576 /dev/zero | tr '\\0' h\n" +
			"head -c 1048576 /dev/zero | tr '\\0' m\n" +
			"head -c 1048576 /dev/zero | tr '\\0' t\n" +
			"head -c 2097152 /dev/zero | tr '\\0' e >&2\n" +
			"exit 1\n",
	})
	o := tool.Call(context.Background(), nil)
	if o.StdoutBytes != 3<<20 || o.StderrBytes != 2<<20 {
		t.Fatalf("counted %d and %d bytes", o.StdoutBytes, o.StderrBytes)
	}
	c := o.Result.Content
	wantOut := strings.Repeat("h", StreamKeep) + "\n[... 2097152 bytes dropped ...]\n" + strings.Repeat("t", StreamKeep) + "\n"
	wantErr := "[stderr]\n" + strings.Repeat("e", StreamKeep) + "\n[... 1048576 bytes dropped ...]\n" + strings.Repeat("e", StreamKeep) + "\n"
	if want := wantOut + wantErr + "[big exited with code 1]"; c != want {
		t.Errorf("content: %d bytes, want %d; starts %q, ends %q", len(c), len(want), c[:40], c[len(c)-80:])
	}
}

// TestToolRechecksTrust: a pinned project tool whose script changes after
// loading refuses to run.
func TestToolRechecksTrust(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	testenv.WriteTree(t, ws, map[string]string{".aerie/tools/t.toml": manifest("t", "./t.sh"), ".aerie/tools/t.sh": "#!/bin/sh\necho ok\n"})
	l := project(ws, ".aerie")
	pins := layer.NewPins(ws, mustPin(t, ws, l, filepath.Join(ws, ".aerie/tools/t.toml"), "./t.sh"))
	loaded, arts, err := LoadTools(layer.Source{Layers: []layer.Layer{l}, Workspace: ws}, ToolOptions{Pins: pins, Commands: newExecutor(t, ws)})
	if err != nil || len(loaded) != 1 {
		t.Fatalf("LoadTools: %v %+v", err, arts)
	}
	if r := loaded[0].Run(context.Background(), nil); r.IsError || r.Content != "ok\n" {
		t.Fatalf("pinned tool: %+v", r)
	}
	testenv.WriteTree(t, ws, map[string]string{".aerie/tools/t.sh": "#!/bin/sh\necho pwned\n"})
	o := loaded[0].Call(context.Background(), nil)
	if o.Failure != FailureUntrusted || !strings.Contains(o.Result.Content, "not run: it is modified") {
		t.Errorf("modified tool: %+v", o)
	}
}

// TestToolEnvironment: a custom tool gets the executor's secret-free
// environment, not the runner's.
func TestToolEnvironment(t *testing.T) {
	t.Parallel()
	tool := loadOne(t, manifest("env", "./env.sh"), map[string]string{"tools/env.sh": "#!/bin/sh\nenv\n"})
	tool.env = []string{"PATH=/usr/bin:/bin", "VISIBLE=1", "ANTHROPIC_API_KEY=should-not-matter"}
	res := tool.Run(context.Background(), nil)
	if !strings.Contains(res.Content, "VISIBLE=1") {
		t.Errorf("env = %q, want the configured environment", res.Content)
	}
	// The default (no Env) is executor.Environ's allow-list.
	tool.env = nil
	res = tool.Run(context.Background(), nil)
	for _, kv := range strings.Split(strings.TrimSpace(res.Content), "\n") {
		name, _, _ := strings.Cut(kv, "=")
		if name == "VISIBLE" || strings.HasPrefix(name, "AERIE_") && name != "AERIE_PROCESS_GROUP" || strings.HasSuffix(name, "_API_KEY") {
			t.Errorf("default environment has %s", name)
		}
	}
}

func TestHeadTail(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n      int
		writes []string
		want   string
	}{
		{4, []string{"abc"}, "abc"},
		{4, []string{"abcdefgh"}, "abcdefgh"},
		{4, []string{"abcdefghi"}, "abcd\n[... 1 bytes dropped ...]\nfghi"},
		{4, []string{"ab", "cd", "ef", "gh", "ij", "kl"}, "abcd\n[... 4 bytes dropped ...]\nijkl"},
		{4, []string{"abcd", "0123456789", "xy"}, "abcd\n[... 8 bytes dropped ...]\n89xy"},
		// "é" is two bytes: a cut inside it moves to its boundary.
		{2, []string{"aéxxxxxxxé"}, "a\n[... 9 bytes dropped ...]\né"},
		{3, []string{"abcéé"}, "abc\n[... 2 bytes dropped ...]\né"},
	} {
		w := newHeadTail(tt.n)
		for _, s := range tt.writes {
			if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", s, n, err)
			}
		}
		if got := w.String(); got != tt.want {
			t.Errorf("n=%d %q: got %q, want %q", tt.n, tt.writes, got, tt.want)
		}
	}
}

var _ tools.Tool = (*Tool)(nil)

// TestToolInRegistry: a custom tool runs through the tools.Registry like
// a built-in one.
func TestToolInRegistry(t *testing.T) {
	t.Parallel()
	tool := loadOne(t, manifest("upper", "./up.sh"), map[string]string{"tools/up.sh": "#!/bin/sh\ntr a-z A-Z\n"})
	reg, err := tools.NewRegistry(nil, tool)
	if err != nil {
		t.Fatal(err)
	}
	res := reg.Run(context.Background(), "call-1", "upper", json.RawMessage(`{"x":"abc"}`))
	if res.IsError || !bytes.Equal([]byte(res.Content), []byte("{\"X\":\"ABC\"}\n")) {
		t.Errorf("result = %+v", res)
	}
}

// TestValidToolName checks the name rule against the pattern it states.
func TestValidToolName(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^[a-z0-9_]{1,64}$`)
	for _, name := range []string{"", "a", "run_tests", "Run", "a-b", "a b", "é", "0", "_", strings.Repeat("a", 64), strings.Repeat("a", 65), "a\n", "\x00"} {
		if got, want := ValidToolName(name), pattern.MatchString(name); got != want {
			t.Errorf("ValidToolName(%q) = %v, want %v", name, got, want)
		}
	}
}
