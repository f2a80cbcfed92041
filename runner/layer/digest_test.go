package layer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// TestContentDigestMatchesConfigMap digests a directory laid out as the
// kubelet mounts a ConfigMap volume (files behind ..data links) and
// compares it with the controller's digest of the same ConfigMap: a
// runner can tell whether what it reads is what the controller rendered.
func TestContentDigestMatchesConfigMap(t *testing.T) {
	t.Parallel()
	data := map[string]string{
		"SYSTEM.md":                "Be careful.\n",
		"skills__review__SKILL.md": "---\nname: review\ndescription: Reviews.\n---\nBody\n",
		"tools__lint.toml":         manifest("lint", "./bin/lint.sh"),
		"tools__bin__lint.sh":      "#!/bin/sh\necho ok\n",
		"a-b":                      "sorts before a/…",
	}
	annotations := map[string]string{runconfig.ExecutablesAnnotation: `["tools/bin/lint.sh"]`}
	files, err := runconfig.LayerFiles(data, nil, annotations)
	if err != nil {
		t.Fatal(err)
	}
	want := runconfig.LayerDigest(files)

	dir := t.TempDir()
	stamp := filepath.Join(dir, "..2026_01_02_03_04_05.000000001")
	for _, f := range files {
		p := filepath.Join(stamp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, f.Mode()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(stamp), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, top := range []string{"SYSTEM.md", "skills", "tools", "a-b"} {
		if err := os.Symlink(filepath.Join("..data", top), filepath.Join(dir, top)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ContentDigest("", Layer{Name: "go", Kind: KindSpec, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("digest of the mounted layer %s, the controller's %s", got, want)
	}
}

func TestContentDigest(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	outside := t.TempDir()
	testenv.WriteTree(t, outside, map[string]string{"secret": "not for the layer"})
	testenv.WriteTree(t, ws, map[string]string{
		".aerie/SYSTEM.md":        "Project prompt.\n",
		".aerie/tools/t.toml":     manifest("t", "./t.sh"),
		".aerie/tools/t.sh":       "#!/bin/sh\n",
		".aerie/fifo":             "<fifo>",
		"escape/.aerie/SYSTEM.md": "x",
		"escape/.aerie/leak":      "->" + filepath.Join(outside, "secret"),
		"loop/.aerie/self":        "->.",
		"home/SYSTEM.md":          "Home prompt.\n",
		"home/sessions.db":        "not an artifact",
		"home/logs/today.log":     "not an artifact",
		"home/skills/a/SKILL.md":  "---\nname: a\n---\n",
		"home/..data/SKILL.md":    "left out",
	})
	proj := project(ws, ".aerie")
	d1, err := ContentDigest(ws, proj)
	if err != nil || !strings.HasPrefix(d1, "sha256:") || len(d1) != len("sha256:")+64 {
		t.Fatalf("ContentDigest = %q, %v", d1, err)
	}
	if d2, _ := ContentDigest(ws, proj); d2 != d1 {
		t.Errorf("digest not stable: %s then %s", d1, d2)
	}
	// Content, names and the executable bit all count.
	for name, change := range map[string]func() error{
		"content": func() error {
			testenv.WriteTree(t, ws, map[string]string{".aerie/SYSTEM.md": "Changed.\n"})
			return nil
		},
		"mode": func() error { return os.Chmod(filepath.Join(ws, ".aerie/tools/t.sh"), 0o644) },
		"name": func() error {
			return os.Rename(filepath.Join(ws, ".aerie/SYSTEM.md"), filepath.Join(ws, ".aerie/APPEND_SYSTEM.md"))
		},
	} {
		before, _ := ContentDigest(ws, proj)
		if err := change(); err != nil {
			t.Fatalf("%s change: %v", name, err)
		}
		if after, err := ContentDigest(ws, proj); err != nil || after == before {
			t.Errorf("%s change: digest %s → %s, %v", name, before, after, err)
		}
	}

	// A link out of the workspace fails the digest: nothing outside is read.
	if _, err := ContentDigest(ws, project(ws, "escape/.aerie")); err == nil || !strings.Contains(err.Error(), "leads outside") {
		t.Errorf("layer with a link out: %v", err)
	}
	// A loop ends the walk: the kernel's link limit or the depth bound.
	if _, err := ContentDigest(ws, project(ws, "loop/.aerie")); err == nil || !strings.Contains(err.Error(), "self") {
		t.Errorf("layer with a link loop: %v", err)
	}

	// $AERIE_HOME: only the artifacts count, not the database or logs.
	h := home(filepath.Join(ws, "home"))
	hd, err := ContentDigest(ws, h)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WriteTree(t, ws, map[string]string{"home/sessions.db": "grown", "home/logs/more.log": "x"})
	if again, _ := ContentDigest(ws, h); again != hd {
		t.Errorf("home digest changed with a non-artifact file")
	}

	if d, err := ContentDigest("", Bundled()); err != nil || d != Bundled().Digest {
		t.Errorf("bundled digest %s, %v; want %s", d, err, Bundled().Digest)
	}
}

func TestContentDigestBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{}
	for i := range MaxDigestFiles + 1 {
		files[fmt.Sprintf("skills/s%d/f%d", i/1000, i)] = ""
	}
	testenv.WriteTree(t, dir, files)
	_, err := ContentDigest("", Layer{Name: "big", Kind: KindSpec, Dir: dir})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("over %d files: %v, want ErrTooLarge", MaxDigestFiles, err)
	}
}

func TestWithDigests(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	testenv.WriteTree(t, ws, map[string]string{"spec/SYSTEM.md": "x", ".aerie/SYSTEM.md": "y"})
	in := []Layer{
		project(ws, ".aerie"),
		{Name: "spec", Kind: KindSpec, Dir: filepath.Join(ws, "spec"), Digest: "sha256:" + strings.Repeat("0", 64)},
		{Name: "gone", Kind: KindSpec, Dir: filepath.Join(ws, "gone")},
		Bundled(),
	}
	out, changed, errs := WithDigests(ws, in)
	if in[0].Digest != "" {
		t.Error("WithDigests changed its argument")
	}
	if out[0].Digest == "" || out[1].Digest == in[1].Digest || out[2].Digest != "" || out[3].Digest != Bundled().Digest {
		t.Errorf("digests %+v", out)
	}
	if len(changed) != 1 || changed[0].Name != "spec" || changed[0].Digest != in[1].Digest {
		t.Errorf("changed %+v, want the spec layer with its old digest", changed)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "gone") {
		t.Errorf("errors %v, want the missing layer's", errs)
	}
}

// BenchmarkContentDigest digests a layer of 1,000 skills, each a SKILL.md
// and a script: what a session start pays for a large layer.
func BenchmarkContentDigest(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("skills/s%04d/SKILL.md", i)] = fmt.Sprintf("---\nname: s%04d\ndescription: Skill %d.\n---\n%s", i, i, strings.Repeat("Body text. ", 200))
		files[fmt.Sprintf("skills/s%04d/run.sh", i)] = "#!/bin/sh\necho run\n"
	}
	testenv.WriteTree(b, dir, files)
	l := Layer{Name: "skills", Kind: KindSpec, Dir: dir}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ContentDigest("", l); err != nil {
			b.Fatal(err)
		}
	}
}
