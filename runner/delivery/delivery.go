// Package delivery delivers a session's work: it commits the files of a
// git workspace onto the commit the workspace was cloned at and pushes
// that commit to a branch of the remote (Push), and serves that one job
// on a socket, for the runner to ask once its agent completed (Serve,
// Request).
//
// In a runner pod Push runs in a container of its own, the only one that
// holds the push credentials: not the agent's, which holds the model key,
// nor the workspace's, where the tools run. Push never uses the
// workspace's repository: what the tools wrote there (hooks, a
// configuration with a credential helper, an fsmonitor, aliases) is never
// read. It fetches the cloned commit from the remote into a new bare
// repository in a private directory, with no system or global
// configuration and hooks turned off, and reads only the work tree's
// files from the workspace.
package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Spec is one delivery.
type Spec struct {
	// Workspace is the work tree whose files are committed.
	Workspace string
	// Base is the commit the workspace was cloned at: the new commit's
	// parent.
	Base string
	// URL is the remote, https:// or http://.
	URL string
	// Branch is the branch pushed to (without refs/heads/).
	Branch string
	// Message is the commit message.
	Message string
	// AuthorName and AuthorEmail are the commit's author and committer.
	AuthorName, AuthorEmail string
	// Username and Password are the push credentials; empty pushes
	// without.
	Username, Password string
	// Scratch is a private directory for the bare repository; Push
	// removes what it creates there.
	Scratch string
}

// Result is how a delivery went.
type Result struct {
	// Branch is the branch pushed to.
	Branch string `json:"branch"`
	// Commit is the commit pushed; empty when there was nothing to push
	// or the delivery failed.
	Commit string `json:"commit,omitempty"`
	// NothingToPush says the workspace's files are the cloned commit's.
	NothingToPush bool `json:"nothingToPush,omitempty"`
	// Error says why the delivery failed.
	Error string `json:"error,omitempty"`
}

// commandTimeout bounds each git command.
const commandTimeout = 5 * time.Minute

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// Push commits the workspace's files onto s.Base and pushes the commit to
// s.Branch. It never forces: a branch that exists must be an ancestor of
// the new commit, or the remote refuses.
func Push(ctx context.Context, s Spec) Result {
	r := Result{Branch: s.Branch}
	commit, err := push(ctx, s)
	switch {
	case errors.Is(err, errNothing):
		r.NothingToPush = true
	case err != nil:
		r.Error = redact(err.Error(), s.Password)
	default:
		r.Commit = commit
	}
	return r
}

var errNothing = errors.New("nothing to push")

func push(ctx context.Context, s Spec) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(s.Scratch, "push-")
	if err != nil {
		return "", fmt.Errorf("create the scratch repository: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	g, err := newGit(dir, s)
	if err != nil {
		return "", err
	}
	if _, err := g.run(ctx, "init", "-q", "--bare", g.repo); err != nil {
		return "", err
	}
	// The cloned commit, from the remote: the workspace's own repository
	// is the tools', and is never read.
	if _, err := g.run(ctx, "fetch", "-q", "--no-tags", "--depth=1", s.URL, s.Base); err != nil {
		return "", fmt.Errorf("fetch the cloned commit %s from %s: %w", s.Base, s.URL, err)
	}
	if _, err := g.run(ctx, "read-tree", s.Base); err != nil {
		return "", err
	}
	if _, err := g.run(ctx, "--work-tree="+s.Workspace, "add", "--all", "."); err != nil {
		return "", fmt.Errorf("add the workspace's files: %w", err)
	}
	tree, err := g.run(ctx, "write-tree")
	if err != nil {
		return "", err
	}
	baseTree, err := g.run(ctx, "rev-parse", s.Base+"^{tree}")
	if err != nil {
		return "", err
	}
	if tree == baseTree {
		return "", errNothing
	}
	commit, err := g.run(ctx, "commit-tree", tree, "-p", s.Base, "-m", s.Message)
	if err != nil {
		return "", err
	}
	if _, err := g.run(ctx, "push", "--porcelain", "--no-verify", s.URL, commit+":refs/heads/"+s.Branch); err != nil {
		return "", fmt.Errorf("push %s to branch %s of %s: %w", shortSHA(commit), s.Branch, s.URL, err)
	}
	return commit, nil
}

func (s Spec) check() error {
	switch {
	case !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://"):
		return fmt.Errorf("push URL %q: only https:// (or http://) URLs are pushed to", s.URL)
	case !shaRE.MatchString(s.Base):
		return fmt.Errorf("cloned commit %q is not a commit id: did the git-clone container record it?", s.Base)
	case s.Branch == "" || strings.HasPrefix(s.Branch, "-"):
		return fmt.Errorf("branch %q is not a branch name", s.Branch)
	case s.Workspace == "" || s.Scratch == "":
		return errors.New("no workspace or scratch directory")
	}
	return nil
}

// git runs git in the scratch repository, with nothing of the machine's,
// the user's or the workspace's configuration.
type git struct {
	repo string
	env  []string
}

// newGit prepares dir: the bare repository's path, an empty home, the
// index and the askpass program that answers with the credentials, which
// reach it in its environment only.
func newGit(dir string, s Spec) (*git, error) {
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, fmt.Errorf("create the scratch home: %w", err)
	}
	askpass := filepath.Join(dir, "askpass")
	script := "#!/bin/sh\ncase \"$1\" in\n  Username*) printf '%s\\n' \"$AERIE_PUSH_USERNAME\" ;;\n" +
		"  *) printf '%s\\n' \"$AERIE_PUSH_PASSWORD\" ;;\nesac\n"
	if err := os.WriteFile(askpass, []byte(script), 0o700); err != nil {
		return nil, fmt.Errorf("write the askpass program: %w", err)
	}
	g := &git{repo: filepath.Join(dir, "repo.git")}
	g.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"LC_ALL=C",
		"GIT_DIR=" + g.repo,
		"GIT_INDEX_FILE=" + filepath.Join(dir, "index"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_ASKPASS=" + askpass,
		"GIT_AUTHOR_NAME=" + s.AuthorName, "GIT_AUTHOR_EMAIL=" + s.AuthorEmail,
		"GIT_COMMITTER_NAME=" + s.AuthorName, "GIT_COMMITTER_EMAIL=" + s.AuthorEmail,
		"AERIE_PUSH_USERNAME=" + s.Username, "AERIE_PUSH_PASSWORD=" + s.Password,
	}
	return g, nil
}

// hardening is the configuration of every git command: no hooks, no
// fsmonitor, no filters or credential helpers, HTTP(S) only.
var hardening = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.untrackedCache=false",
	"-c", "credential.helper=",
	"-c", "protocol.allow=never",
	"-c", "protocol.https.allow=always",
	"-c", "protocol.http.allow=always",
	"-c", "http.followRedirects=false",
	"-c", "safe.directory=*",
}

// run runs git with args and returns its output, trimmed; a failure's
// error carries git's message.
func (g *git) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, hardening...), args...)...)
	cmd.Env = g.env
	cmd.Dir = filepath.Dir(g.repo)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errs.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		return "", fmt.Errorf("git %s: %w: %s", args[0], err, msg)
	}
	return strings.TrimSpace(out.String()), nil
}

// redact removes the password from msg, should git ever echo it.
func redact(msg, password string) string {
	if password == "" {
		return msg
	}
	return strings.ReplaceAll(msg, password, "[redacted]")
}

func shortSHA(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
