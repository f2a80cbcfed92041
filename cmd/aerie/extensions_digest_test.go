package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/layer"
)

// TestExtensionsLayerDigests: aerie extensions --json gives every layer
// the digest a session started here would record.
func TestExtensionsLayerDigests(t *testing.T) {
	t.Parallel()
	h, dir := extensionsFixture(t)
	res := h.aerie(t, "extensions", "--json")
	if res.code != 0 {
		t.Fatalf("exit %d: %v\n%s", res.code, res.err, res.stderr)
	}
	r, _ := statuses(t, res.stdout, dir)
	ws := filepath.Join(dir, "ws")
	for _, l := range r.Layers {
		want, err := layer.ContentDigest(ws, l)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(l.Digest, "sha256:") || l.Digest != want {
			t.Errorf("layer %s: digest %q, want %q", l.Name, l.Digest, want)
		}
	}
	if len(r.Layers) != 4 {
		t.Errorf("%d layers, want 4", len(r.Layers))
	}
}
