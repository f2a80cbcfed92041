package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecutorInstall copies the running binary, as an executor pod's
// init container does, and refuses a directory that is not there.
func TestExecutorInstall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := (harness{}).aerie(t, "executor", "install", dir); r.code != 0 {
		t.Fatalf("aerie executor install: exit %d, %v", r.code, r.err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "aerie"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("installed binary: %d bytes, %v; want a copy of the %d of %s", len(got), err, len(want), self)
	}
	if fi, err := os.Stat(filepath.Join(dir, "aerie")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed binary mode %v, %v; want 0755", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files left in the directory, want only aerie", len(entries))
	}
	missing := filepath.Join(dir, "missing")
	r := (harness{}).aerie(t, "executor", "install", missing)
	if r.code != exitFailure || r.err == nil || !strings.Contains(r.err.Error(), missing+" is not a directory") {
		t.Errorf("install into a missing directory: exit %d, %v", r.code, r.err)
	}
}
