package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// nobody is the user a root test runs aerie as, so that aerie and its
// tools share a user that is not root, as on a developer's machine.
const nobody = 65534

// TestRunToolsCannotReadTheRunner runs `aerie run` as a user that is not
// root, with its API key in the environment, and a tool that reads the
// runner's /proc/<pid>/environ, /proc/<pid>/maps and /proc/<pid>/mem. The
// runner is non-dumpable, so all three are refused, and the key appears
// nowhere in what the model is sent.
func TestRunToolsCannotReadTheRunner(t *testing.T) {
	t.Parallel()
	script := strings.Join([]string{
		`echo "parent=$PPID"`,
		`cat /proc/$PPID/environ >/dev/null 2>&1 && echo "environ=read" || echo "environ=refused"`,
		`cat /proc/$PPID/maps >/dev/null 2>&1 && echo "maps=read" || echo "maps=refused"`,
		`(exec 3</proc/$PPID/mem) 2>/dev/null && echo "mem=opened" || echo "mem=refused"`,
		`tr '\0' '\n' </proc/$PPID/environ 2>&1 | head -c 4096`,
	}, "\n")
	e := newE2E(t, toolTurn(call("c1", "bash", map[string]any{"command": script})), answer("done"))
	bin := e.asUnprivileged(t)

	cmd := e.command("run", "--label", "harden", "read the runner")
	cmd.Path, cmd.Args[0] = bin, bin
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	out := e.output(cmd.Run(), stdout.String(), stderr.String())
	if out.code != 0 {
		t.Fatalf("aerie run exited %d; stderr:\n%s", out.code, out.stderr)
	}
	if n := len(e.model.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times, want 2", n)
	}
	got := toolResults(t, e.model.Requests()[1])["c1"].text
	if want := "parent=" + strconv.Itoa(cmd.Process.Pid); !strings.Contains(got, want) {
		t.Fatalf("the tool's parent is not the runner (want %q); tool output:\n%s", want, got)
	}
	for _, want := range []string{"environ=refused", "maps=refused", "mem=refused"} {
		if !strings.Contains(got, want) {
			t.Errorf("tool output lacks %q:\n%s", want, got)
		}
	}
	for _, leaked := range []string{"sk-ant-test-secret-value", "ANTHROPIC_API_KEY"} {
		if strings.Contains(got, leaked) {
			t.Errorf("the tool read %q from the runner:\n%s", leaked, got)
		}
	}
}

// asUnprivileged prepares e to run as nobody when the test runs as root:
// the workspace and aerie's home owned by that user, and a copy of the
// test binary that it can run (the build directory is private to root).
// It returns the copy's path. Run as another user, e stays as it is.
func (e *e2e) asUnprivileged(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "aerie-harden-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "aerie")
	testenv.CopyFile(t, os.Args[0], bin, 0o755)
	e.ws, e.home = filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	for _, d := range []string{e.ws, e.home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for i, kv := range e.env {
		switch {
		case strings.HasPrefix(kv, "HOME="):
			e.env[i] = "HOME=" + e.home
		case strings.HasPrefix(kv, "AERIE_HOME="):
			e.env[i] = "AERIE_HOME=" + e.home
		}
	}
	if os.Geteuid() != 0 {
		return bin
	}
	for _, p := range []string{dir, e.ws, e.home} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
