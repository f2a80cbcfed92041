package delivery

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

const (
	user  = "aerie-bot"
	token = "push-token-9f2e"
)

// clone makes a workspace as the git-clone container does: a clone of
// the repository app at its head.
func clone(t *testing.T, g *testenv.GitServer) string {
	t.Helper()
	ws := t.TempDir()
	cmd := exec.Command("git", "-c", "credential.helper=", "clone", "-q", g.URL("app"), ws)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS="+askpass(t))
	if out, err := testenv.CombinedOutput(cmd); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	return ws
}

func askpass(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "askpass")
	testenv.WriteFile(t, p, "#!/bin/sh\ncase \"$1\" in Username*) echo "+user+";; *) echo "+token+";; esac\n", 0o700)
	return p
}

func spec(t *testing.T, g *testenv.GitServer, ws, base string) Spec {
	return Spec{
		Workspace: ws, Base: base, URL: g.URL("app"), Branch: "aerie/fix",
		Message: "aerie session fix", AuthorName: "aerie", AuthorEmail: "aerie@example.com",
		Username: user, Password: token, Scratch: t.TempDir(),
	}
}

func TestPush(t *testing.T) {
	g := testenv.StartGitServer(t, user, token)
	head := g.CreateRepo(t, "app", map[string]string{"main.go": "package main\n", ".gitignore": "*.log\n", "old.txt": "old\n"})
	ws := clone(t, g)
	testenv.WriteTree(t, ws, map[string]string{"main.go": "package main // fixed\n", "new/added.txt": "new\n", "run.log": "noise\n"})
	if err := os.Remove(filepath.Join(ws, "old.txt")); err != nil {
		t.Fatal(err)
	}
	r := Push(t.Context(), spec(t, g, ws, head))
	if r.Error != "" || r.NothingToPush || r.Branch != "aerie/fix" {
		t.Fatalf("Push = %+v", r)
	}
	got, ok := g.Ref(t, "app", "refs/heads/aerie/fix")
	if !ok || got != r.Commit {
		t.Fatalf("the server's aerie/fix is %q (exists %v), want the pushed %s", got, ok, r.Commit)
	}
	if parent := g.Git(t, "app", "rev-parse", r.Commit+"^"); parent != head {
		t.Errorf("parent %s, want the cloned %s", parent, head)
	}
	if files := g.Git(t, "app", "ls-tree", "-r", "--name-only", r.Commit); files != ".gitignore\nmain.go\nnew/added.txt" {
		t.Errorf("files of the commit:\n%s", files)
	}
	if msg := g.Git(t, "app", "log", "-1", "--format=%an <%ae>|%s", r.Commit); msg != "aerie <aerie@example.com>|aerie session fix" {
		t.Errorf("author and subject %q", msg)
	}
	// main is untouched.
	if m, _ := g.Ref(t, "app", "refs/heads/main"); m != head {
		t.Errorf("main moved to %s", m)
	}
}

func TestPushNothing(t *testing.T) {
	g := testenv.StartGitServer(t, user, token)
	head := g.CreateRepo(t, "app", map[string]string{"main.go": "package main\n", ".gitignore": "*.log\n"})
	ws := clone(t, g)
	testenv.WriteFile(t, filepath.Join(ws, "ignored.log"), "noise\n", 0o644)
	r := Push(t.Context(), spec(t, g, ws, head))
	if !r.NothingToPush || r.Commit != "" || r.Error != "" {
		t.Fatalf("Push = %+v, want nothing to push", r)
	}
	if _, ok := g.Ref(t, "app", "refs/heads/aerie/fix"); ok {
		t.Error("a branch was pushed with nothing to push")
	}
}

func TestPushFailures(t *testing.T) {
	g := testenv.StartGitServer(t, user, token)
	head := g.CreateRepo(t, "app", map[string]string{"main.go": "package main\n"})
	ws := clone(t, g)
	testenv.WriteFile(t, filepath.Join(ws, "main.go"), "package main // changed\n", 0o644)

	t.Run("rejected", func(t *testing.T) {
		g.RejectPushes(t, "app", "pushes to this repository are frozen")
		s := spec(t, g, ws, head)
		s.Branch = "aerie/rejected"
		r := Push(t.Context(), s)
		if r.Commit != "" || !strings.Contains(r.Error, "pushes to this repository are frozen") ||
			!strings.Contains(r.Error, "aerie/rejected") {
			t.Fatalf("Push = %+v, want the hook's refusal", r)
		}
	})
	t.Run("wrong credentials", func(t *testing.T) {
		s := spec(t, g, ws, head)
		s.Password = "wrong-password-1234"
		r := Push(t.Context(), s)
		if r.Commit != "" || r.Error == "" || strings.Contains(r.Error, s.Password) {
			t.Fatalf("Push = %+v, want an error without the password", r)
		}
	})
	t.Run("not a commit", func(t *testing.T) {
		r := Push(t.Context(), spec(t, g, ws, "HEAD"))
		if !strings.Contains(r.Error, "not a commit id") {
			t.Fatalf("Push = %+v", r)
		}
	})
	t.Run("ssh URL", func(t *testing.T) {
		s := spec(t, g, ws, head)
		s.URL = "ssh://git@example.com/app.git"
		if r := Push(t.Context(), s); !strings.Contains(r.Error, "only https://") {
			t.Fatalf("Push = %+v", r)
		}
	})
}

// TestPushIgnoresWorkspaceRepository plants what a tool could write into
// the workspace's repository to run code with, or read, the push
// credentials: hooks, a credential helper, an fsmonitor, a pushurl. None
// of it is used.
func TestPushIgnoresWorkspaceRepository(t *testing.T) {
	g := testenv.StartGitServer(t, user, token)
	head := g.CreateRepo(t, "app", map[string]string{"main.go": "package main\n"})
	ws := clone(t, g)
	loot := filepath.Join(t.TempDir(), "loot")
	steal := "#!/bin/sh\n{ env; cat; } >> " + loot + "\n"
	for _, h := range []string{"pre-push", "pre-commit", "post-commit", "reference-transaction"} {
		testenv.WriteFile(t, filepath.Join(ws, ".git", "hooks", h), steal, 0o755)
	}
	testenv.WriteFile(t, filepath.Join(ws, "steal.sh"), steal, 0o755)
	cfg, err := os.OpenFile(filepath.Join(ws, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.WriteString("[credential]\n\thelper = !" + filepath.Join(ws, "steal.sh") + "\n" +
		"[core]\n\tfsmonitor = " + filepath.Join(ws, "steal.sh") + "\n\thooksPath = .git/hooks\n" +
		"[remote \"origin\"]\n\tpushurl = http://127.0.0.1:1/steal.git\n")
	if cerr := cfg.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	testenv.WriteFile(t, filepath.Join(ws, "main.go"), "package main // changed\n", 0o644)
	r := Push(t.Context(), spec(t, g, ws, head))
	if r.Error != "" || r.Commit == "" {
		t.Fatalf("Push = %+v", r)
	}
	if b, err := os.ReadFile(loot); err == nil {
		t.Fatalf("the workspace's repository ran code during the push; it got:\n%s", b)
	}
}

func TestServe(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "push.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, func(context.Context) Result {
			calls.Add(1)
			return Result{Branch: "aerie/x", Commit: "0123456789abcdef0123456789abcdef01234567"}
		})
	}()
	for range 2 {
		r, err := Request(t.Context(), socket)
		if err != nil || r.Branch != "aerie/x" || r.Commit == "" {
			t.Fatalf("Request = %+v, %v", r, err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("delivered %d times, want once", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := Request(t.Context(), filepath.Join(dir, "none.sock")); err == nil ||
		!strings.Contains(err.Error(), "push container") {
		t.Errorf("Request to no server: %v", err)
	}
}
