package workdiff_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/executortest"
	"github.com/aerie-run/aerie/runner/workdiff"
)

// git runs git in dir for the test's setup.
func git(t *testing.T, dir string, args ...string) string {
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

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// repo is a work tree with one commit: a.txt and a .gitignore.
func repo(t *testing.T) (dir, head string) {
	t.Helper()
	dir = t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, "a.txt"), "one\n")
	write(t, filepath.Join(dir, ".gitignore"), "*.log\n")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir, git(t, dir, "rev-parse", "HEAD")
}

func TestDiffHasChangesCommitsAndUntrackedFilesButNotIgnoredOnes(t *testing.T) {
	t.Parallel()
	dir, head := repo(t)
	exe := executortest.NewLocal(t, dir, executor.Options{})
	base, err := workdiff.Base(t.Context(), exe, filepath.Join(dir))
	if err != nil || base != head {
		t.Fatalf("Base = %q, %v; want %s", base, err, head)
	}
	write(t, filepath.Join(dir, "a.txt"), "one\ntwo\n")
	write(t, filepath.Join(dir, "sub", "new.go"), "package sub\n")
	write(t, filepath.Join(dir, "build.log"), "ignored\n")
	// A commit made during the run is part of its work too.
	write(t, filepath.Join(dir, "committed.txt"), "c\n")
	git(t, dir, "add", "committed.txt")
	git(t, dir, "commit", "-q", "-m", "second")
	indexBefore, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}

	d := workdiff.Take(t.Context(), exe, filepath.Join(dir, "sub"), base, 0)
	if d.Error != "" {
		t.Fatalf("diff error: %s", d.Error)
	}
	for _, want := range []string{"a.txt", "sub/new.go", "committed.txt", "3 files changed"} {
		if !strings.Contains(d.Stat, want) {
			t.Errorf("stat lacks %q:\n%s", want, d.Stat)
		}
	}
	for _, want := range []string{"+two", "diff --git a/sub/new.go b/sub/new.go", "new file mode", "+package sub", "+c"} {
		if !strings.Contains(d.Patch, want) {
			t.Errorf("patch lacks %q:\n%s", want, d.Patch)
		}
	}
	if strings.Contains(d.Stat+d.Patch, "build.log") {
		t.Errorf("the ignored file is in the diff:\n%s", d.Patch)
	}
	if d.Truncated || d.Bytes != int64(len(d.Patch)) || d.Cap != workdiff.DefaultCap || d.Base != head {
		t.Errorf("diff record %+v", d)
	}
	// The user's index is as it was: new.go is still untracked.
	indexAfter, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if string(indexAfter) != string(indexBefore) {
		t.Error("taking the diff changed the index")
	}
	if st := git(t, dir, "status", "--porcelain"); !strings.Contains(st, "?? sub/") {
		t.Errorf("git status after the diff:\n%s", st)
	}
}

func TestDiffIsCappedWithItsFullSize(t *testing.T) {
	t.Parallel()
	dir, base := repo(t)
	exe := executortest.NewLocal(t, dir, executor.Options{})
	write(t, filepath.Join(dir, "big.txt"), strings.Repeat("a line of the big file\n", 1000))
	d := workdiff.Take(t.Context(), exe, dir, base, 1000)
	if d.Error != "" {
		t.Fatal(d.Error)
	}
	if !d.Truncated || len(d.Patch) != 1000 || d.Bytes <= 23000 || d.Cap != 1000 {
		t.Errorf("capped diff: truncated %t, %d bytes kept of %d, cap %d", d.Truncated, len(d.Patch), d.Bytes, d.Cap)
	}
	if !strings.HasPrefix(d.Patch, "diff --git a/big.txt b/big.txt") || !strings.Contains(d.Stat, "big.txt | 1000 +") {
		t.Errorf("capped diff:\nstat %s\npatch %.200s", d.Stat, d.Patch)
	}
}

func TestDiffOfARepositoryWithoutCommits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	exe := executortest.NewLocal(t, dir, executor.Options{})
	base, err := workdiff.Base(t.Context(), exe, dir)
	if err != nil || base != "4b825dc642cb6eb9a060e54bf8d69288fbee4904" {
		t.Fatalf("Base = %q, %v; want the empty tree", base, err)
	}
	write(t, filepath.Join(dir, "first.txt"), "hello\n")
	d := workdiff.Take(t.Context(), exe, dir, base, 0)
	if d.Error != "" || !strings.Contains(d.Patch, "+hello") {
		t.Errorf("diff %+v", d)
	}
}

func TestNoBaseOutsideAWorkTree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := executortest.NewLocal(t, dir, executor.Options{})
	base, err := workdiff.Base(t.Context(), exe, dir)
	if err != nil || base != "" {
		t.Errorf("Base outside a work tree = %q, %v; want none", base, err)
	}
}

func TestDiffAgainstAMissingCommitSaysWhy(t *testing.T) {
	t.Parallel()
	dir, _ := repo(t)
	exe := executortest.NewLocal(t, dir, executor.Options{})
	d := workdiff.Take(t.Context(), exe, dir, "0123456789012345678901234567890123456789", 0)
	if !strings.Contains(d.Error, "git diff exited") || d.Stat != "" {
		t.Errorf("diff against a missing commit: %+v", d)
	}
}
