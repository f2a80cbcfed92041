package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/transcript"
	"github.com/aerie-run/aerie/runner/workdiff"
)

// gitIn runs git in dir for a test's setup, with a throwaway identity.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestRunJournalsTheWorkspaceDiff runs a session in a git work tree whose
// tools edit a tracked file, create an untracked one and write one larger
// than the cap: the run journals the diff against the commit it started
// from, and aerie session diff prints it from the store, the patch cut at
// the cap with the whole size said, the stat whole.
func TestRunJournalsTheWorkspaceDiff(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n", workdiff.DefaultCap/64+1024)
	e := newE2E(t,
		toolTurn(
			call("w1", "write_file", map[string]any{"path": "README.md", "content": "# project\nchanged by the agent\n"}),
			call("w2", "write_file", map[string]any{"path": "notes/new.txt", "content": "an untracked file\n"}),
			call("w3", "write_file", map[string]any{"path": "zz-big.txt", "content": big}),
			call("w4", "write_file", map[string]any{"path": "debug.log", "content": "ignored\n"}),
		),
		answer("Edited."))
	testWriteFiles(t, e.ws, map[string]string{"README.md": "# project\n", ".gitignore": "*.log\n"})
	gitIn(t, e.ws, "init", "-q", "-b", "main")
	gitIn(t, e.ws, "add", ".")
	gitIn(t, e.ws, "commit", "-q", "-m", "start")
	head := gitIn(t, e.ws, "rev-parse", "HEAD")

	out := e.run("run", "Edit the project.")
	if out.code != 0 {
		t.Fatalf("aerie run exited %d:\n%s", out.code, out.stderr)
	}
	id := out.end(t).Session
	es := e.entries(id)
	last, ok := es[len(es)-1].Payload.(transcript.WorkspaceDiff)
	if !ok {
		t.Fatalf("last entry %T, want the workspace diff", es[len(es)-1].Payload)
	}
	if last.Base != head || !last.Truncated || last.Cap != workdiff.DefaultCap || len(last.Patch) != workdiff.DefaultCap ||
		last.Bytes <= int64(len(big)) {
		t.Errorf("diff record: base %s (want %s), truncated %t, %d of %d bytes, cap %d",
			last.Base, head, last.Truncated, len(last.Patch), last.Bytes, last.Cap)
	}
	if st := gitIn(t, e.ws, "status", "--porcelain"); !strings.Contains(st, "?? notes/") {
		t.Errorf("the run changed the index: git status\n%s", st)
	}

	stat := e.run("session", "diff", id, "--stat")
	if stat.code != 0 {
		t.Fatalf("aerie session diff --stat exited %d:\n%s", stat.code, stat.stderr)
	}
	for _, want := range []string{"README.md", "notes/new.txt", "zz-big.txt", "3 files changed"} {
		if !strings.Contains(stat.stdout, want) {
			t.Errorf("stat lacks %q:\n%s", want, stat.stdout)
		}
	}
	if strings.Contains(stat.stdout, "debug.log") {
		t.Errorf("the ignored file is in the stat:\n%s", stat.stdout)
	}

	patch := e.run("session", "diff", id[:8])
	if patch.code != 0 {
		t.Fatalf("aerie session diff exited %d:\n%s", patch.code, patch.stderr)
	}
	for _, want := range []string{"+changed by the agent", "diff --git a/notes/new.txt b/notes/new.txt", "+an untracked file"} {
		if !strings.Contains(patch.stdout, want) {
			t.Errorf("patch lacks %q", want)
		}
	}
	if len(patch.stdout) != workdiff.DefaultCap || !strings.Contains(patch.stderr, "the patch is cut at 1048576 bytes") {
		t.Errorf("patch of %d bytes, stderr %q: want the cap and a note", len(patch.stdout), patch.stderr)
	}

	js := e.run("session", "diff", id, "--json")
	var rec struct {
		Session string `json:"session"`
		Base    string `json:"base"`
		Bytes   int64  `json:"bytes"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &rec); err != nil || rec.Session != id || rec.Base != head || rec.Bytes != last.Bytes {
		t.Errorf("--json: %+v, %v", rec, err)
	}
}

// TestSessionDiffOutsideAWorkTree: a session whose workspace is no git
// work tree has no diff, which aerie session diff says.
func TestSessionDiffOutsideAWorkTree(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("Nothing to do."))
	out := e.run("run", "Look around.")
	if out.code != 0 {
		t.Fatalf("aerie run exited %d:\n%s", out.code, out.stderr)
	}
	id := out.end(t).Session
	for _, en := range e.entries(id) {
		if _, ok := en.Payload.(transcript.WorkspaceDiff); ok {
			t.Errorf("entry %d is a workspace diff outside a work tree", en.Seq)
		}
	}
	d := e.run("session", "diff", id)
	if d.code != 1 || !strings.Contains(d.stderr, "no workspace diff: its workspace was no git work tree") {
		t.Errorf("aerie session diff exited %d:\n%s", d.code, d.stderr)
	}
}

func testWriteFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
