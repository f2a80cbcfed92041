package testenv

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitHTTPServer serves bare repositories over git's smart HTTP protocol:
// git http-backend, the program git's own servers run, through net/http/cgi.
// Clients clone URL()+"/NAME.git".
type GitHTTPServer struct {
	root string
	srv  *httptest.Server
}

// StartGitHTTPServer starts a server for the bare repositories it will
// publish; it stops when the test ends.
func StartGitHTTPServer(t testing.TB) *GitHTTPServer {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		requireDependency(t, "git is not on PATH", "install git")
	}
	out, err := output(exec.Command("git", "--exec-path"))
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		requireDependency(t, "git http-backend is not installed: "+err.Error(), "install git's HTTP backend")
	}
	g := &GitHTTPServer{root: t.TempDir()}
	h := &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	g.srv = NewServiceServer(http.StripPrefix("/git", h))
	t.Cleanup(g.srv.Close)
	return g
}

// URL is the base URL of the repositories: URL()+"/NAME.git".
func (g *GitHTTPServer) URL() string { return g.srv.URL + "/git" }

// Publish commits the tree of dir as the whole content of the repository
// NAME.git on branch (created on first use, its history kept), tags the
// commit when tag is not empty, and returns the commit.
func (g *GitHTTPServer) Publish(t testing.TB, name, branch, dir, tag string) string {
	t.Helper()
	bare := filepath.Join(g.root, name+".git")
	if _, err := os.Stat(bare); err != nil {
		runGit(t, "", "init", "--quiet", "--bare", "--initial-branch="+branch, bare)
	}
	work := t.TempDir()
	runGit(t, "", "clone", "--quiet", bare, work)
	if runGitOK(work, "rev-parse", "--verify", "--quiet", "origin/"+branch) {
		runGit(t, work, "checkout", "--quiet", "-B", branch, "origin/"+branch)
	} else {
		runGit(t, work, "checkout", "--quiet", "--orphan", branch)
	}
	runGit(t, work, "rm", "-r", "--quiet", "--ignore-unmatch", ".")
	runGit(t, dir, "--work-tree="+dir, "--git-dir="+filepath.Join(work, ".git"), "add", "--all", ".")
	runGit(t, work, "-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "--quiet",
		"--allow-empty", "-m", "publish "+name)
	if tag != "" {
		runGit(t, work, "tag", "--force", tag)
	}
	runGit(t, work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+branch)
	if tag != "" {
		runGit(t, work, "push", "--quiet", "--force", "origin", "refs/tags/"+tag)
	}
	return strings.TrimSpace(runGit(t, work, "rev-parse", "HEAD"))
}

// GitEnv is an environment for git that sends https://github.com/ to the
// server, so that GitHub shorthands (OWNER/REPO) clone NAME.git from it as
// OWNER+"/"+NAME.git.
func (g *GitHTTPServer) GitEnv() []string {
	return append(os.Environ(),
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=url."+g.URL()+"/.insteadOf",
		"GIT_CONFIG_VALUE_0=https://github.com/",
		"GIT_CONFIG_NOSYSTEM=1",
	)
}

func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func runGitOK(dir string, args ...string) bool {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	return runCmd(cmd) == nil
}
