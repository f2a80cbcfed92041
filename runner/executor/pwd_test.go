package executor

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWithPWD(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		dir  string
		want []string
	}{
		{"added", []string{"PATH=/bin"}, "/w", []string{"PATH=/bin", "PWD=/w"}},
		{"replaced", []string{"PWD=/old", "PATH=/bin", "PWD=/older"}, "/w", []string{"PATH=/bin", "PWD=/w"}},
		{"no dir", []string{"PWD=/old", "PATH=/bin"}, "", []string{"PATH=/bin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if d := cmp.Diff(tc.want, withPWD(tc.env, tc.dir)); d != "" {
				t.Errorf("withPWD(%q, %q) (-want +got):\n%s", tc.env, tc.dir, d)
			}
		})
	}
}

// TestLocalPWDThroughSymlink runs pwd in a directory reached through a
// symlink, as a layer's tools directory on a kubelet's ConfigMap volume
// (tools -> ..data/tools, ..data -> ..<timestamp>): the command sees the
// directory as named, not the timestamped one behind it.
func TestLocalPWDThroughSymlink(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "..2026_01_01", "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2026_01_01", filepath.Join(ws, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/tools", filepath.Join(ws, "tools")); err != nil {
		t.Fatal(err)
	}
	l, err := NewLocal(ws, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close(context.Background()) }()
	p, err := l.Start(context.Background(), Command{Argv: []string{"sh", "-c", "pwd"}, Dir: filepath.Join(ws, "tools")})
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), filepath.Join(ws, "tools"); got != want {
		t.Errorf("pwd = %q, want %q", got, want)
	}
}
