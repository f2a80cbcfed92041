package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := Write(path, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "two" {
		t.Fatalf("content %q, %v; want two", got, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("directory holds %v (%v); want the file alone, no temporary file", entries, err)
	}
}

// TestWriteWideMode keeps the mode exactly, wider than the umask allows.
func TestWriteWideMode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tool.sh")
	if err := Write(path, []byte("#!/bin/sh\n"), 0o777); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("mode %v, %v; want 0777", fi.Mode(), err)
	}
}

func TestWriteMissingDirectory(t *testing.T) {
	t.Parallel()
	err := Write(filepath.Join(t.TempDir(), "none", "f"), []byte("x"), 0o644)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v; want fs.ErrNotExist", err)
	}
}

// TestWriteInConfined refuses a name whose directory is a link out of the
// root, and leaves the outside untouched.
func TestWriteInConfined(t *testing.T) {
	t.Parallel()
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteIn(root, "out/secret", []byte("x"), 0o644); err == nil {
		t.Fatal("a write through a link out of the root succeeded")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the outside directory holds %v", entries)
	}
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteIn(root, "sub/f", []byte("in"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "sub/f")); !bytes.Equal(got, []byte("in")) {
		t.Errorf("sub/f = %q", got)
	}
}

// TestWriteFailureKeepsOld leaves the old content and no temporary file when
// the write cannot complete: here the target is a directory, so the rename
// fails.
func TestWriteFailureKeepsOld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "target"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Write(filepath.Join(dir, "target"), []byte("x"), 0o644)
	if err == nil {
		t.Fatal("a write over a directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || !entries[0].IsDir() {
		t.Errorf("directory holds %v; want only the untouched target", entries)
	}
}
