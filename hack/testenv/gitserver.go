package testenv

import (
	"crypto/subtle"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitServer is a real git server over HTTP for tests: git's own
// http-backend (the smart protocol, clone, fetch and push) behind
// net/http/cgi, with HTTP basic authentication on every request. Its
// repositories are bare repositories in a temporary directory.
type GitServer struct {
	root, user, password string
	srv                  *httptest.Server
}

// StartGitServer starts a git server that admits user with password, and
// stops it when the test ends. It needs git, with git-http-backend in its
// exec path (the git package of every distribution has it).
func StartGitServer(t testing.TB, user, password string) *GitServer {
	t.Helper()
	out, err := output(exec.Command("git", "--exec-path"))
	if err != nil {
		requireDependency(t, "git is not installed", "install git (`apt-get install -y git`)")
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		requireDependency(t, "no git-http-backend in git's exec path", "install git's complete package (`apt-get install -y git`)")
	}
	g := &GitServer{root: t.TempDir(), user: user, password: password}
	h := &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + g.root},
	}
	g.srv = NewServiceServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(g.user)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(g.password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// URL is the clone URL of the repository name, without credentials.
func (g *GitServer) URL(name string) string { return g.srv.URL + "/" + name + ".git" }

// CreateRepo creates the bare repository name, open to pushes, with one
// commit on main holding files (paths relative to the root), and returns
// that commit.
func (g *GitServer) CreateRepo(t testing.TB, name string, files map[string]string) string {
	t.Helper()
	bare := g.path(name)
	g.git(t, "", "init", "-q", "--bare", "-b", "main", bare)
	g.git(t, bare, "config", "http.receivepack", "true")
	work := t.TempDir()
	WriteTree(t, work, files)
	g.git(t, work, "init", "-q", "-b", "main")
	g.git(t, work, "add", "-A")
	g.git(t, work, "commit", "-q", "-m", "initial commit")
	g.git(t, work, "push", "-q", bare, "main")
	return g.git(t, work, "rev-parse", "HEAD")
}

// Ref returns the commit the ref (refs/heads/BRANCH, say) of the
// repository name points to, and whether it exists.
func (g *GitServer) Ref(t testing.TB, name, ref string) (string, bool) {
	t.Helper()
	out, err := output(g.command("", "--git-dir", g.path(name), "rev-parse", "--verify", "-q", ref+"^{commit}"))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// Git runs git in the bare repository name (show, log, cat-file, ...)
// and returns its output.
func (g *GitServer) Git(t testing.TB, name string, args ...string) string {
	t.Helper()
	return g.git(t, "", append([]string{"--git-dir", g.path(name)}, args...)...)
}

// RejectPushes makes the repository name refuse every push, with a
// pre-receive hook that prints message.
func (g *GitServer) RejectPushes(t testing.TB, name, message string) {
	t.Helper()
	hook := "#!/bin/sh\necho '" + strings.ReplaceAll(message, "'", `'\''`) + "' >&2\nexit 1\n"
	WriteFile(t, filepath.Join(g.path(name), "hooks", "pre-receive"), hook, 0o755)
}

func (g *GitServer) path(name string) string { return filepath.Join(g.root, name+".git") }

func (g *GitServer) git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := g.command(dir, args...)
	out, err := CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// command is git with a fixed identity and no configuration of the
// machine's or the user's.
func (g *GitServer) command(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=testenv", "GIT_AUTHOR_EMAIL=testenv@example.com",
		"GIT_COMMITTER_NAME=testenv", "GIT_COMMITTER_EMAIL=testenv@example.com")
	return cmd
}
