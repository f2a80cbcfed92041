package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
)

// tree reads the files under dir: path → mode and content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = info.Mode().Perm().String()[1:4] + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLayerPackUnpack(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	testenv.WriteFile(t, filepath.Join(src, "skills/review/SKILL.md"), "---\nname: review\ndescription: Review code.\n---\nLook closely.\n", 0o644)
	testenv.WriteFile(t, filepath.Join(src, "tools/lint.toml"), "name = \"lint\"\n", 0o644)
	testenv.WriteFile(t, filepath.Join(src, "tools/lint.sh"), "#!/bin/sh\necho lint\n", 0o755)
	testenv.WriteFile(t, filepath.Join(src, "tools/lib/__init__.py"), "", 0o644)
	testenv.WriteFile(t, filepath.Join(src, "data/logo.bin"), "\x89PNG\xff\x00", 0o644)

	manifest := filepath.Join(t.TempDir(), "layer.yaml")
	r := harness{}.aerie(t, "layer", "pack", src, "--name", "team-tools", "-n", "agents")
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"name: team-tools", "namespace: agents", "aerie.run/layer: \"true\"", "skills__review__SKILL.md", `aerie.run/executables: '["tools/lint.sh"]'`, "binaryData"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("manifest lacks %q:\n%s", want, r.stdout)
		}
	}
	if err := os.WriteFile(manifest, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if r := (harness{}).aerie(t, "layer", "unpack", manifest, "--to", dst); r.err != nil {
		t.Fatal(r.err)
	}
	want := tree(t, src)
	if diff := cmp.Diff(want, tree(t, dst)); diff != "" {
		t.Errorf("round trip (-packed +unpacked):\n%s", diff)
	}
}

func TestLayerPackRefusals(t *testing.T) {
	t.Parallel()
	link := t.TempDir()
	testenv.WriteFile(t, filepath.Join(link, "a.md"), "a", 0o644)
	if err := os.Symlink("/etc/passwd", filepath.Join(link, "passwd")); err != nil {
		t.Fatal(err)
	}
	big := t.TempDir()
	testenv.WriteFile(t, filepath.Join(big, "small.md"), "a", 0o644)
	testenv.WriteFile(t, filepath.Join(big, "huge.txt"), strings.Repeat("x", 2<<20), 0o644)
	for _, tt := range []struct{ dir, want string }{
		{link, "passwd is a symbolic link"},
		{big, "huge.txt (2097152 bytes)"},
		{t.TempDir(), "no files"},
	} {
		r := harness{}.aerie(t, "layer", "pack", tt.dir, "--name", "x")
		if r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
			t.Errorf("pack %s: %v; want an error about %q", tt.dir, r.err, tt.want)
		}
	}
}
