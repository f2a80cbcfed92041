package testenv_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// TestGitServer clones a repository of the git server over HTTP with the
// right credentials, is refused with wrong ones, pushes a branch whose ref
// the server then has, and is refused by a repository that rejects pushes,
// with the hook's message.
func TestGitServer(t *testing.T) {
	t.Parallel()
	g := testenv.StartGitServer(t, "bot", "s3cret")
	head := g.CreateRepo(t, "demo", map[string]string{"README.md": "# demo\n"})
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := testenv.CombinedOutput(cmd)
		return string(out), err
	}
	withAuth := func(user, password string) string {
		return strings.Replace(g.URL("demo"), "://", "://"+user+":"+password+"@", 1)
	}
	if out, err := git("", "clone", "-q", withAuth("bot", "wrong"), filepath.Join(t.TempDir(), "x")); err == nil ||
		!strings.Contains(out, "Authentication failed") {
		t.Errorf("clone with a wrong password: %v\n%s", err, out)
	}
	work := filepath.Join(t.TempDir(), "demo")
	if out, err := git("", "clone", "-q", withAuth("bot", "s3cret"), work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(work, "README.md")); err != nil || string(b) != "# demo\n" {
		t.Fatalf("cloned README.md: %q, %v", b, err)
	}
	testenv.WriteFile(t, filepath.Join(work, "new.txt"), "new\n", 0o644)
	for _, args := range [][]string{{"add", "new.txt"}, {"commit", "-q", "-m", "add new.txt"}, {"push", "-q", "origin", "HEAD:refs/heads/feature"}} {
		if out, err := git(work, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	pushed, _ := git(work, "rev-parse", "HEAD")
	if got, ok := g.Ref(t, "demo", "refs/heads/feature"); !ok || got != strings.TrimSpace(pushed) {
		t.Errorf("refs/heads/feature = %q, %t; want %s", got, ok, pushed)
	}
	if got, _ := g.Ref(t, "demo", "refs/heads/main"); got != head {
		t.Errorf("main moved: %s, want %s", got, head)
	}
	if _, ok := g.Ref(t, "demo", "refs/heads/none"); ok {
		t.Error("a branch nobody pushed exists")
	}

	g.RejectPushes(t, "demo", "pushes are frozen")
	out, err := git(work, "push", "-q", "origin", "HEAD:refs/heads/other")
	if err == nil || !strings.Contains(out, "pushes are frozen") || !strings.Contains(out, "pre-receive hook declined") {
		t.Errorf("push to a repository that rejects pushes: %v\n%s", err, out)
	}
}
