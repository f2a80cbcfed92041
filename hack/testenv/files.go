package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// SparseFile creates the file path of size bytes without writing them
// (a hole), for the tests that check a loader refuses a huge file unread.
func SparseFile(t testing.TB, path string, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Golden compares got with the golden file path, after rewriting the file
// with got when update is set (the tests' -update flag). how says how to
// accept a change, for the failure's message.
func Golden(t testing.TB, path, got string, update bool, how string) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the golden file (%s to create it): %v", how, err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); %s to accept:\n%s", path, how, diff)
	}
}

// WriteTree creates files under dir, one a map entry: the slash-separated
// path relative to dir, and what to put there. Parent directories are made
// as needed, and the content says what the entry is:
//
//   - "->target" (a space may follow the arrow): a symbolic link to target;
//   - "<dir>", or a path ending in "/": a directory;
//   - "<fifo>": a named pipe;
//   - anything else: a regular file holding it, executable (0755) when it
//     starts with "#!", otherwise 0644 (a test that wants a script it cannot
//     run, or a program without a shebang, changes the mode afterwards).
//
// A file's mode is set whatever the umask, so that digests over modes come
// out the same on every machine.
func WriteTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := writeEntry(p, name, content); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
	}
}

// writeEntry makes the entry p of WriteTree's files.
func writeEntry(p, name, content string) error {
	if strings.HasSuffix(name, "/") || content == "<dir>" {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if target, ok := strings.CutPrefix(content, "->"); ok {
		return os.Symlink(strings.TrimLeft(target, " "), p)
	}
	if content == "<fifo>" {
		return syscall.Mkfifo(p, 0o644)
	}
	mode := os.FileMode(0o644)
	if strings.HasPrefix(content, "#!") {
		mode = 0o755
	}
	return writeFile(p, content, mode)
}

// WriteFile writes content to the file path with mode (whatever the umask),
// making its parent directories as needed.
func WriteFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(path, content, mode); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes content to path and then sets mode, which os.WriteFile
// alone leaves to the umask.
func writeFile(path, content string, mode os.FileMode) error {
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}

// CopyFile copies the file from to the new file to, with mode (whatever the
// umask): for the tests that run a copy of a binary somewhere else.
func CopyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFile(to, string(b), mode); err != nil {
		t.Fatal(err)
	}
}
