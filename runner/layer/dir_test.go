package layer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
)

// dirTree is a directory with what a Dir must read, refuse and describe:
// regular files, a file too large, a FIFO, links inside, out, absolute
// and dangling, and a subdirectory.
func dirTree(t *testing.T) (outer, dir string) {
	t.Helper()
	outer = t.TempDir()
	dir = filepath.Join(outer, "layer")
	testenv.WriteTree(t, outer, map[string]string{
		"secret":              "outside",
		"layer/a.txt":         "alpha",
		"layer/big.txt":       strings.Repeat("x", 100),
		"layer/fifo":          "<fifo>",
		"layer/sub/b.txt":     "beta",
		"layer/sub/in.txt":    "->../a.txt",
		"layer/out.txt":       "->../secret",
		"layer/abs.txt":       "->" + filepath.Join(outer, "layer", "a.txt"),
		"layer/dangling":      "->nowhere",
		"layer/subdir-link":   "->sub",
		"layer/empty":         "<dir>",
		"layer/sub/deep/c.md": "gamma",
	})
	return outer, dir
}

// dirModes runs f on a Dir that resolves with openat2 and on one that is
// an os.Root only, which must answer the same.
func dirModes(t *testing.T, dir string, f func(t *testing.T, d *Dir)) {
	t.Run("openat2", func(t *testing.T) {
		d, err := OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		f(t, d)
	})
	t.Run("root", func(t *testing.T) {
		r, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		d := &Dir{path: dir, fd: -1, root: r}
		defer d.Close()
		f(t, d)
	})
}

func TestDirReadFile(t *testing.T) {
	t.Parallel()
	_, dir := dirTree(t)
	tests := []struct {
		name string
		want string // content, or the error's sentinel or text
	}{
		{"a.txt", "alpha"},
		{"sub/b.txt", "beta"},
		{"sub/in.txt", "alpha"},
		{"sub/../a.txt", "alpha"},
		{"big.txt", "error: " + ErrTooLarge.Error()},
		{"fifo", "error: " + ErrNotRegular.Error()},
		{"sub", "error: " + ErrNotRegular.Error()},
		{"out.txt", "error: path escapes from parent"},
		{"abs.txt", "error: path escapes from parent"},
		{"../secret", "error: path escapes from parent"},
		{"/etc/passwd", "error: path escapes from parent"},
		{"dangling", "error: no such file or directory"},
		{"missing", "error: no such file or directory"},
	}
	dirModes(t, dir, func(t *testing.T, d *Dir) {
		for _, tt := range tests {
			b, err := d.ReadFile(tt.name, 10)
			got := string(b)
			if err != nil {
				got = "error: " + err.Error()
			}
			if !strings.HasPrefix(tt.want, "error: ") && got != tt.want || strings.HasPrefix(tt.want, "error: ") && !strings.Contains(got, strings.TrimPrefix(tt.want, "error: ")) {
				t.Errorf("ReadFile(%q) = %q, want %q", tt.name, got, tt.want)
			}
		}
		if _, err := d.ReadFile("missing", 10); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
		}
	})
}

func TestDirLstat(t *testing.T) {
	t.Parallel()
	_, dir := dirTree(t)
	tests := []struct {
		name string
		want string // the mode's type, or an error's text
	}{
		{"a.txt", "----------"},
		{"out.txt", "L---------"},
		{"dangling", "L---------"},
		{"fifo", "p---------"},
		{"sub", "d---------"},
		{"sub/in.txt", "L---------"},
		{"sub/deep/c.md", "----------"},
		{"subdir-link/b.txt", "----------"},
		{"missing", "no such file or directory"},
		{"a.txt/x", "not a directory"},
		{"../secret", "path escapes from parent"},
	}
	dirModes(t, dir, func(t *testing.T, d *Dir) {
		for _, tt := range tests {
			fi, err := d.Lstat(tt.name)
			var got string
			if err != nil {
				got = err.Error()
			} else {
				got = fi.Mode().Type().String()
				if fi.Name() != filepath.Base(tt.name) {
					t.Errorf("Lstat(%q).Name() = %q", tt.name, fi.Name())
				}
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("Lstat(%q) = %q, want %q", tt.name, got, tt.want)
			}
		}
	})
}

func TestDirReadDir(t *testing.T) {
	t.Parallel()
	_, dir := dirTree(t)
	dirModes(t, dir, func(t *testing.T, d *Dir) {
		des, more, err := d.ReadDir(".", 0)
		if err != nil || more {
			t.Fatal(more, err)
		}
		var got []string
		for _, de := range des {
			got = append(got, de.Name()+" "+de.Type().String())
		}
		want := []string{
			"a.txt ----------", "abs.txt L---------", "big.txt ----------", "dangling L---------",
			"empty d---------", "fifo p---------", "out.txt L---------", "sub d---------", "subdir-link L---------",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		des, more, err = d.ReadDir(".", 3)
		if err != nil || !more || len(des) != 3 {
			t.Errorf("at most 3: %d entries, more %v, %v", len(des), more, err)
		}
		des, more, err = d.ReadDir("sub", 3)
		if err != nil || more || len(des) != 3 {
			t.Errorf("exactly 3: %d entries, more %v, %v", len(des), more, err)
		}
		for _, name := range []string{"out.txt", "../", "a.txt"} {
			if _, _, err := d.ReadDir(name, 0); err == nil {
				t.Errorf("ReadDir(%q) read a directory", name)
			}
		}
		// Info is the entry's lstat.
		des, _, err = d.ReadDir(".", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			fi, err := de.Info()
			want, werr := os.Lstat(filepath.Join(dir, de.Name()))
			if err != nil || werr != nil || fi.Mode() != want.Mode() || fi.Size() != want.Size() {
				t.Errorf("%s: Info %v, %v; want %v", de.Name(), fi, err, want)
			}
		}
	})
}

// TestDirReadDirLarge: a directory that takes many reads of its entries
// lists as os.ReadDir lists it, whole or cut at max.
func TestDirReadDirLarge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var want []string
	for i := range 700 {
		name := fmt.Sprintf("%03d-%s", i, strings.Repeat("n", i%90))
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	if err := os.Mkdir(filepath.Join(dir, "zz"), 0o755); err != nil {
		t.Fatal(err)
	}
	want = append(want, "zz")
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	des, more, err := d.ReadDir(".", 0)
	if err != nil || more {
		t.Fatal(more, err)
	}
	var got []string
	for _, de := range des {
		got = append(got, de.Name())
	}
	if diff := cmp.Diff(want, got); diff != "" || !des[len(des)-1].IsDir() {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if des, more, err := d.ReadDir(".", 701); err != nil || more || len(des) != 701 {
		t.Errorf("exactly 701: %d entries, more %v, %v", len(des), more, err)
	}
	if des, more, err := d.ReadDir(".", 650); err != nil || !more || len(des) != 650 {
		t.Errorf("at most 650: %d entries, more %v, %v", len(des), more, err)
	}
}

func TestDirOpenDir(t *testing.T) {
	t.Parallel()
	outer, dir := dirTree(t)
	if err := os.Symlink(outer, filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	dirModes(t, dir, func(t *testing.T, d *Dir) {
		sub, err := d.OpenDir("subdir-link")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if b, err := sub.ReadFile("deep/c.md", 10); err != nil || string(b) != "gamma" {
			t.Errorf("through the subdirectory: %q, %v", b, err)
		}
		if _, err := sub.ReadFile("../a.txt", 10); !errors.Is(err, ErrEscapes) {
			t.Errorf("a subdirectory is a boundary of its own: %v", err)
		}
		if _, err := d.OpenDir("up"); !errors.Is(err, ErrEscapes) {
			t.Errorf("a link out: %v", err)
		}
		if _, err := d.OpenDir("a.txt"); err == nil {
			t.Error("opened a file as a directory")
		}
	})
}

// TestDirFileStat checks that a File describes itself as os.Stat does.
func TestDirFileStat(t *testing.T) {
	t.Parallel()
	_, dir := dirTree(t)
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := d.Open("sub/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Stat(filepath.Join(dir, "sub", "b.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name() != want.Name() || fi.Size() != want.Size() || fi.Mode() != want.Mode() || !fi.ModTime().Equal(want.ModTime()) || fi.IsDir() {
		t.Errorf("Stat = %s %d %s %s, want %s %d %s %s", fi.Name(), fi.Size(), fi.Mode(), fi.ModTime(), want.Name(), want.Size(), want.Mode(), want.ModTime())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("second close: %v", err)
	}
}

// TestDirErrEscapes: a path that leads out of a Dir, through a link or
// "..", fails with an error that is ErrEscapes for every way of reading
// it, whether openat2 or the os.Root refused it; other failures are not.
func TestDirErrEscapes(t *testing.T) {
	t.Parallel()
	outer, dir := dirTree(t)
	if err := os.Symlink(outer, filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	dirModes(t, dir, func(t *testing.T, d *Dir) {
		reads := map[string]func(name string) error{
			"Open": func(name string) error {
				f, err := d.Open(name)
				if err == nil {
					f.Close()
				}
				return err
			},
			"ReadFile": func(name string) error { _, err := d.ReadFile(name, 1<<10); return err },
			"Lstat":    func(name string) error { _, err := d.Lstat(name); return err },
			"ReadDir":  func(name string) error { _, _, err := d.ReadDir(name, 0); return err },
			"OpenDir": func(name string) error {
				sub, err := d.OpenDir(name)
				if err == nil {
					sub.Close()
				}
				return err
			},
		}
		for op, read := range reads {
			for _, name := range []string{"out.txt/x", "up/secret", "up/layer", "../secret", "sub/../../secret", "/etc/passwd", ""} {
				if op == "Lstat" && name == "up/secret" {
					// Lstat follows the links on the way, not the last.
					name = "up/layer/a.txt"
				}
				err := read(name)
				if !errors.Is(err, ErrEscapes) {
					t.Errorf("%s(%q) = %v, want ErrEscapes", op, name, err)
				}
				var pe *fs.PathError
				if !errors.As(err, &pe) || pe.Path != name {
					t.Errorf("%s(%q) = %v, want a *fs.PathError naming the path", op, name, err)
				}
			}
		}
		for _, name := range []string{"nowhere", "dangling", "a.txt/x"} {
			if err := reads["Open"](name); err == nil || errors.Is(err, ErrEscapes) {
				t.Errorf("Open(%q) = %v, want a failure that is not ErrEscapes", name, err)
			}
		}
		if _, err := d.ReadFile("out.txt", 1<<10); !errors.Is(err, ErrEscapes) || !strings.Contains(ExplainEscape(err).Error(), "name the target by its absolute path") {
			t.Errorf("ReadFile(out.txt) = %v, explained as %v", err, ExplainEscape(err))
		}
	})
}
