package executor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aerie-run/aerie/hack/testenv"
)

// The tests of this file run against a Local and against a Remote served
// that Local over a unix socket: the server enforces the workspace
// boundary, and its errors reach the client intact.

// workspace is an executor on a workspace with a secret beside it and
// links in it that lead inside and outside.
type workspace struct {
	e       testExecutor
	l       *Local // the Local behind e
	outside string // directory holding the workspace and the secret
	secret  string
}

func newWorkspace(t *testing.T, kind string) workspace {
	t.Helper()
	outside := t.TempDir()
	dir := filepath.Join(outside, "ws")
	secret := filepath.Join(outside, "secret")
	testenv.WriteTree(t, outside, map[string]string{
		"secret":       "api key",
		"ws/a.txt":     "a",
		"ws/sub/b.txt": "b",
		"ws/.git/HEAD": "ref",
		"ws/sub/c/d":   "d",
		// Links that lead inside and outside.
		"ws/out":     "->../secret",
		"ws/abs":     "->" + secret,
		"ws/dirout":  "->..",
		"ws/in":      "->a.txt",
		"ws/subin":   "->sub/b.txt",
		"ws/absin":   "->" + filepath.Join(dir, "a.txt"),
		"ws/chain":   "->in",
		"ws/dangles": "->new.txt",
	})
	e, l := openExecutor(t, kind, dir, Options{})
	return workspace{e: e, l: l, outside: outside, secret: secret}
}

func (w workspace) requireSecretIntact(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile(w.secret); err != nil || string(b) != "api key" {
		t.Fatalf("the file outside the workspace changed: %q, %v", b, err)
	}
}

func TestFilesConfinement(t *testing.T) {
	t.Parallel()
	each(t, true, testFilesConfinement)
}

func testFilesConfinement(t *testing.T, kind string) {
	w := newWorkspace(t, kind)
	ctx := t.Context()
	escapes := []string{
		"../secret",
		"sub/../../secret",
		"out",
		"abs",
		"dirout/secret",
		filepath.Join(w.l.dir, "..", "secret"),
		w.secret,
		"/etc/passwd",
		// os.Root refuses absolute links even to inside the root.
		"absin",
	}
	for _, name := range escapes {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, ErrOutsideWorkspace) {
					t.Errorf("%s %s: %v, want %v", op, name, err, ErrOutsideWorkspace)
				} else if !strings.HasSuffix(err.Error(), "path is outside the workspace") || op == "read" && !strings.Contains(err.Error(), "read "+name+": ") {
					t.Errorf("%s %s: unclear error %q", op, name, err)
				}
			}
			_, err := w.e.ReadFile(ctx, name)
			check("read", err)
			_, err = w.e.Stat(ctx, name)
			check("stat", err)
			check("write", w.e.WriteFile(ctx, name, []byte("pwned"), 0o644))
			check("write below", w.e.WriteFile(ctx, filepath.Join(name, "x"), []byte("pwned"), 0o644))
			// A link as the last element is removed itself (TestRemove);
			// through one, nothing outside is reached.
			check("remove below", w.e.Remove(ctx, filepath.Join(name, "x")))
			for _, err := range w.e.Walk(ctx, name, WalkOptions{}) {
				check("walk", err)
				break
			}
			w.requireSecretIntact(t)
		})
	}
	// Links that stay inside are followed.
	for name, want := range map[string]string{
		"in":                                   "a",
		"chain":                                "a",
		"subin":                                "b",
		"sub/../a.txt":                         "a",
		"./sub/c/d":                            "d",
		filepath.Join(w.l.dir, "sub", "b.txt"): "b",
		filepath.Join(w.l.real, "a.txt"):       "a",
	} {
		got, err := w.e.ReadFile(ctx, name)
		if err != nil || string(got) != want {
			t.Errorf("read %s = %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	each(t, true, testWriteFile)
}

func testWriteFile(t *testing.T, kind string) {
	w := newWorkspace(t, kind)
	ctx := t.Context()
	dir := w.l.dir

	// New file, in new directories, with the mode asked for.
	if err := w.e.WriteFile(ctx, "new/deep/f.txt", []byte("1"), 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "new/deep/f.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("new file: %v, %v; want mode 0640", fi, err)
	}
	// An existing file keeps its mode.
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.e.WriteFile(ctx, "run.sh", []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(script); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("rewritten file: %v, %v; want mode 0755 kept", fi, err)
	}
	// A link is written through: the link stays, its target changes.
	if err := w.e.WriteFile(ctx, "chain", []byte("via link"), 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "via link" {
		t.Errorf("a.txt = %q after writing through links", b)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "chain")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("chain is no longer a link: %v, %v", fi, err)
	}
	// A dangling link inside the workspace creates its target.
	if err := w.e.WriteFile(ctx, "dangles", []byte("created"), 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "new.txt")); string(b) != "created" {
		t.Errorf("new.txt = %q", b)
	}
	// Not over a directory, nor the root.
	for _, name := range []string{"sub", ".", ""} {
		if err := w.e.WriteFile(ctx, name, []byte("x"), 0); err == nil {
			t.Errorf("wrote over directory %q", name)
		}
	}
	// No temporary file is left anywhere.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".aerie-") {
			t.Errorf("temporary file left: %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadDirStatWalk(t *testing.T) {
	t.Parallel()
	each(t, true, testReadDirStatWalk)
}

func testReadDirStatWalk(t *testing.T, kind string) {
	w := newWorkspace(t, kind)
	ctx := t.Context()

	infos, err := w.e.ReadDir(ctx, "sub")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name)
	}
	if diff := cmp.Diff([]string{"sub/b.txt", "sub/c"}, names); diff != "" {
		t.Errorf("ReadDir (-want +got):\n%s", diff)
	}

	root, err := w.e.ReadDir(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range root {
		if fi.Name == "out" && fi.Mode&fs.ModeSymlink == 0 {
			t.Errorf("ReadDir followed the link out: %+v", fi)
		}
	}

	fi, err := w.e.Stat(ctx, "subin")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(FileInfo{Name: "subin", Size: 1, Mode: 0o644}, fi, cmpopts.IgnoreFields(FileInfo{}, "ModTime")); diff != "" {
		t.Errorf("Stat (-want +got):\n%s", diff)
	}

	var walked []string
	for fi, err := range w.e.Walk(ctx, ".", WalkOptions{SkipDirs: []string{".git", "c"}}) {
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, fi.Name)
	}
	want := []string{".", ".git", "a.txt", "abs", "absin", "chain", "dangles", "dirout", "in", "out", "sub", "sub/b.txt", "sub/c", "subin"}
	if diff := cmp.Diff(want, walked); diff != "" {
		t.Errorf("Walk (-want +got):\n%s", diff)
	}

	// Breaking out of the loop stops the walk.
	n := 0
	for _, err := range w.e.Walk(ctx, "", WalkOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("walk went on after break: %d", n)
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	each(t, true, testRemove)
}

func testRemove(t *testing.T, kind string) {
	w := newWorkspace(t, kind)
	ctx := t.Context()
	dir := w.l.dir
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.txt", "empty", "sub/c/d", filepath.Join(dir, "sub", "b.txt")} {
		if err := w.e.Remove(ctx, name); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
	}
	for _, name := range []string{"a.txt", "empty", "sub/c/d", "sub/b.txt"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there: %v", name, err)
		}
	}
	// Links are removed, not what they point at, even outside.
	for _, name := range []string{"out", "abs", "dirout"} {
		if err := w.e.Remove(ctx, name); err != nil {
			t.Errorf("remove link %s: %v", name, err)
		}
	}
	w.requireSecretIntact(t)
	if _, err := os.Stat(w.outside); err != nil {
		t.Errorf("the directory a link pointed at is gone: %v", err)
	}

	tests := []struct {
		name string
		want error
	}{
		{"missing", fs.ErrNotExist},
		{"sub", syscall.ENOTEMPTY},
		{"../secret", ErrOutsideWorkspace},
		{"", nil},
		{".", nil},
		{dir, nil},
	}
	for _, tt := range tests {
		err := w.e.Remove(ctx, tt.name)
		var pe *fs.PathError
		switch {
		case err == nil:
			t.Errorf("remove %q succeeded", tt.name)
		case !errors.As(err, &pe) || pe.Op != "remove" || pe.Path != tt.name:
			t.Errorf("remove %q: %v, want a path error naming remove and the path", tt.name, err)
		case tt.want != nil && !errors.Is(err, tt.want):
			t.Errorf("remove %q: %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the workspace is gone: %v", err)
	}
}
