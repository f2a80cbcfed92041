package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/config"
)

// harness describes one in-process run of the aerie command.
type harness struct {
	home     string // $AERIE_HOME; "" leaves it unset
	userHome string // what os.UserHomeDir would report
	dir      string // the current directory; "" is the test process's
	terminal bool   // whether stdin is a terminal
	stdin    io.Reader
	ctx      context.Context
}

type result struct {
	stdout, stderr string
	err            error
	code           int
}

// aerie runs the command line in-process, the way main does but with the
// harness's environment and streams.
func (h harness) aerie(t *testing.T, args ...string) result {
	t.Helper()
	a := &app{
		env: config.Env{
			Getenv: func(k string) string {
				if k == config.HomeEnv {
					return h.home
				}
				return ""
			},
			UserHomeDir: func() (string, error) { return h.userHome, nil },
		},
		isTerminal: func() bool { return h.terminal },
		checkDB:    checkDatabase,
		version:    "v1.2.3",
		commit:     "abc123",
		getwd: func() (string, error) {
			if h.dir != "" {
				return h.dir, nil
			}
			return os.Getwd()
		},
	}
	ctx := h.ctx
	if ctx == nil {
		ctx = t.Context()
	}
	in := h.stdin
	if in == nil {
		in = strings.NewReader("")
	}
	var stdout, stderr bytes.Buffer
	cmd := newRootCmd(a)
	cmd.SetArgs(args)
	cmd.SetIn(in)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(ctx)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err, code: exitCode(err)}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{args: []string{"version"}, want: "aerie v1.2.3 (commit abc123, "},
		{args: []string{"--version"}, want: "aerie v1.2.3\n"},
		{args: []string{"-v"}, want: "aerie v1.2.3\n"},
		{args: []string{}, want: "Run AI coding agents"}, // the usage
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			r := harness{}.aerie(t, tt.args...)
			if r.err != nil || !strings.HasPrefix(r.stdout, tt.want) {
				t.Errorf("aerie %v = %q, %v; want prefix %q", tt.args, r.stdout, r.err, tt.want)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		r := harness{}.aerie(t, "version", "--json")
		if r.err != nil {
			t.Fatal(r.err)
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, r.stdout)
		}
		if got["version"] != "v1.2.3" || got["commit"] != "abc123" || got["go"] == "" {
			t.Errorf("version --json = %v", got)
		}
	})
}

// TestNoTemplates checks that no command sets a usage, help or version
// template. Executing one needs text/template, whose reflective method
// calls make the linker keep every exported method of every type in the
// binary: the model SDKs' thousands of types would triple aerie's code and
// slow every start.
func TestNoTemplates(t *testing.T) {
	t.Parallel()
	bare := &cobra.Command{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.UsageTemplate() != bare.UsageTemplate() || c.HelpTemplate() != bare.HelpTemplate() || c.VersionTemplate() != bare.VersionTemplate() {
			t.Errorf("%s sets a template; write the text with a function (SetUsageFunc, SetHelpFunc) or a flag instead", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(&app{}))
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errCanceled, 130},
		{context.Canceled, 130},
		{io.EOF, 1},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	r := harness{}.aerie(t, "no-such-command")
	if r.code != 1 || !strings.Contains(r.err.Error(), "unknown command") {
		t.Errorf("aerie no-such-command = %d, %v", r.code, r.err)
	}
	if r.stdout != "" || r.stderr != "" {
		t.Errorf("printed usage on error: stdout %q stderr %q", r.stdout, r.stderr)
	}
}

// cmpLines compares text line by line for readable diffs.
func cmpLines(want, got string) string {
	return cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n"))
}
