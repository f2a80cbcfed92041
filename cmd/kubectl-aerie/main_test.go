package main

import (
	"bytes"
	"strings"
	"testing"
)

// harness runs kubectl-aerie's command line in-process.
type harness struct{}

type result struct {
	stdout, stderr string
	err            error
	code           int
}

// aerie runs the command line the way main does, with buffers for the
// standard streams. (The name is the one users type: aerie hands these
// commands to kubectl-aerie.)
func (harness) aerie(t *testing.T, args ...string) result {
	t.Helper()
	a := &app{name: "aerie", version: "v1.2.3", commit: "0a1b2c3"}
	var stdout, stderr bytes.Buffer
	cmd := newRootCmd(a)
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(t.Context())
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err, code: exitCode(err)}
}

// TestVersion: --version names the release and the commit it was built
// from, as the build sets them.
func TestVersion(t *testing.T) {
	t.Parallel()
	r := harness{}.aerie(t, "--version")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := "kubectl-aerie v1.2.3 (commit 0a1b2c3)\n"; r.stdout != want {
		t.Fatalf("--version printed %q, want %q", r.stdout, want)
	}
}

func TestDisplayName(t *testing.T) {
	t.Parallel()
	for argv0, want := range map[string]string{
		"aerie":                     "aerie",
		"/usr/local/bin/aerie":      "aerie",
		"kubectl-aerie":             "kubectl aerie",
		"/home/u/bin/kubectl-aerie": "kubectl aerie",
	} {
		if got := displayName(argv0); got != want {
			t.Errorf("displayName(%q) = %q, want %q", argv0, got, want)
		}
	}
}

func TestVersionWarning(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ mine, caller, want string }{
		{"v0.3.0", "", ""},       // run directly or by kubectl
		{"v0.3.0", "v0.3.0", ""}, // the same release
		{"dev", "v0.3.0", ""},    // a development build
		{"v0.3.0", "dev", ""},
		{"v0.2.0", "v0.3.0", "kubectl-aerie is v0.2.0 but aerie is v0.3.0; install the same release of both (go install github.com/aerie-run/aerie/cmd/kubectl-aerie@v0.3.0)"},
	} {
		if got := versionWarning(tt.mine, tt.caller); got != tt.want {
			t.Errorf("versionWarning(%q, %q) = %q, want %q", tt.mine, tt.caller, got, tt.want)
		}
	}
}
