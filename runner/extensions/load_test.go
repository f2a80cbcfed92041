package extensions

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

// listingTree writes a workspace with two project layers and a home
// layer holding every kind of top-level artifact, some of them broken:
// a dangling SYSTEM.md link, a FIFO APPEND_SYSTEM.md, a link out of the
// workspace, sidecars.
func listingTree(t *testing.T) (ws string, layers []layer.Layer) {
	t.Helper()
	dir := t.TempDir()
	ws, h := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	body := manifest("a", "/bin/true")
	testenv.WriteTree(t, ws, map[string]string{
		".aerie/SYSTEM.md":                         "->missing",
		".aerie/APPEND_SYSTEM.md":                  "<fifo>",
		".aerie/tools/t.toml":                      manifest("t", "./t.sh"),
		".aerie/tools/t.sh":                        "#!/bin/sh\ncat\n",
		".aerie/toolsets.toml":                     "[toolsets.ro]\ntools = [\"read_file\"]\n",
		".aerie/trust.toml":                        "not pins",
		".osprey/SYSTEM.md":                        "->../../outside.md",
		".osprey/APPEND_SYSTEM.md":                 "Append.\n",
		".osprey/tool-descriptions.toml":           "bash = \"Run.\"\n",
		".osprey/APPEND_SYSTEM.md.provenance.json": `{"origin":"agent","operation_id":"op","digest":"` + layer.Digest([]byte("other")) + `"}`,
		"AGENTS.md":                                "Be brief.\n",
	})
	testenv.WriteTree(t, h, map[string]string{
		"SYSTEM.md":                    "Persona.\n",
		"tools/a.toml":                 body,
		"tools/a.toml.provenance.json": `{"origin":"agent","operation_id":"op-7","digest":"` + layer.Digest([]byte(body)) + `"}`,
		"trust.toml":                   "",
	})
	testenv.WriteTree(t, dir, map[string]string{"outside.md": "Outside.\n"})
	return ws, []layer.Layer{project(ws, ".aerie"), project(ws, ".osprey"), home(h), layer.Bundled()}
}

// TestListingLoadsAlike: Load with the listing finds exactly what it
// finds without one, for every artifact and every failure.
func TestListingLoadsAlike(t *testing.T) {
	t.Parallel()
	ws, layers := listingTree(t)
	src := layer.Source{Layers: layers, Workspace: ws}
	want, err := Load(src, Options{Persona: "p"})
	if err != nil {
		t.Fatal(err)
	}
	ls := layer.ListLayers(layers, ws)
	defer ls.Close()
	src.Listing = ls
	got, err := Load(src, Options{Persona: "p"})
	if err != nil {
		t.Fatal(err)
	}
	opts := []cmp.Option{cmpopts.IgnoreFields(layer.Artifact{}, "Err"), cmp.AllowUnexported(layer.Artifact{}), cmpopts.IgnoreUnexported(Set{}, Toolsets{}, layer.Pins{}, Tool{})}
	if diff := cmp.Diff(want.Report, got.Report, opts...); diff != "" {
		t.Errorf("report with the listing differs (-without +with):\n%s", diff)
	}
	if diff := cmp.Diff(want.Prompt, got.Prompt); diff != "" {
		t.Errorf("prompt with the listing differs (-without +with):\n%s", diff)
	}
	for i := range want.Report.Artifacts {
		if w, g := want.Report.Artifacts[i].Err, got.Report.Artifacts[i].Err; (w == nil) != (g == nil) || w != nil && w.Error() != g.Error() {
			t.Errorf("artifact %d: error %v, want %v", i, g, w)
		}
	}
	if len(want.Report.Artifacts) < 8 {
		t.Fatalf("only %d artifacts: the tree is not what the test means", len(want.Report.Artifacts))
	}
}

// TestListingIsASnapshot: what changes in a layer between its listing
// and the reads is what the load finds at the moment the listing was
// made: a file created since is not looked for, and one removed since
// fails to read, as after an lstat.
func TestListingIsASnapshot(t *testing.T) {
	t.Parallel()
	ws, layers := listingTree(t)
	ls := layer.ListLayers(layers, ws)
	defer ls.Close()
	aerie, osprey := layers[0].Dir, layers[1].Dir
	// After the listing: a new SYSTEM.md where a dangling link was, a
	// toolsets.toml appears in .osprey, an APPEND_SYSTEM.md goes.
	if err := os.Remove(filepath.Join(aerie, SystemFile)); err != nil {
		t.Fatal(err)
	}
	testenv.WriteTree(t, ws, map[string]string{".aerie/SYSTEM.md": "New.\n", ".osprey/toolsets.toml": "[toolsets.x]\ntools = [\"bash\"]\n"})
	if err := os.Remove(filepath.Join(osprey, AppendSystemFile)); err != nil {
		t.Fatal(err)
	}
	set, err := Load(layer.Source{Layers: layers, Workspace: ws, Listing: ls}, Options{Persona: "p"})
	if err != nil {
		t.Fatal(err)
	}
	arts := byPath(set.Report.Artifacts)
	// The SYSTEM.md was listed, so it is read: the new one.
	if a := arts[filepath.Join(aerie, SystemFile)]; a.Status != layer.StatusActive || set.Prompt.Base != "New." {
		t.Errorf(".aerie SYSTEM.md: %+v, base %q; want the file read as it is now", a, set.Prompt.Base)
	}
	// The removed APPEND_SYSTEM.md was listed: its read fails.
	if a := arts[filepath.Join(osprey, AppendSystemFile)]; a.Status != layer.StatusSkipped || !errors.Is(a.Err, os.ErrNotExist) {
		t.Errorf(".osprey APPEND_SYSTEM.md: %+v, want skipped as not found", a)
	}
	// The new toolsets.toml was not listed: not looked for.
	if a, ok := arts[filepath.Join(osprey, ToolsetsFile)]; ok {
		t.Errorf(".osprey toolsets.toml: %+v, want it unseen until the next load", a)
	}
	// Without a listing, the next load sees it.
	set, err = Load(layer.Source{Layers: layers, Workspace: ws}, Options{Persona: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := byPath(set.Report.Artifacts)[filepath.Join(osprey, ToolsetsFile)]; !ok {
		t.Error("a load without the listing does not see the new toolsets.toml")
	}
}

// TestUnreadableLayerIsReported: a layer whose directory is gone is in
// the report with a reason, and the others still load.
func TestUnreadableLayerIsReported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	testenv.WriteTree(t, h, map[string]string{"APPEND_SYSTEM.md": "from home"})
	gone := layer.Layer{Name: "spec[0]", Dir: filepath.Join(dir, "missing"), Kind: layer.KindSpec}
	set, err := Load(layer.Source{Layers: []layer.Layer{gone, home(h)}, Workspace: dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := set.Report.Artifacts[0]
	if a.Type != layer.TypeLayer || a.Status != layer.StatusSkipped || !strings.Contains(a.Reason, "no such file") {
		t.Errorf("first artifact = %+v, want the missing layer skipped", a)
	}
	if len(set.Report.Problems()) != 1 {
		t.Errorf("problems = %v, want the spec layer's", set.Report.Problems())
	}
	if got := set.Prompt.Text(); got != "from home" {
		t.Errorf("prompt = %q", got)
	}
	if _, err := os.Stat(gone.Dir); err == nil {
		t.Fatal("the layer was created")
	}
}

// TestSessionPins: a session's own pins (spec.trust.pinsFrom) trust a
// project tool; the trust.toml of a layer whose kind the session's trust
// sources leave out is not used, and is no problem either.
func TestSessionPins(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	testenv.WriteTree(t, ws, map[string]string{
		".aerie/tools/a.toml": manifest("a", "./a.sh"),
		".aerie/tools/a.sh":   "#!/bin/sh\necho a\n",
		".aerie/tools/b.toml": manifest("b", "./b.sh"),
		".aerie/tools/b.sh":   "#!/bin/sh\necho b\n",
	})
	proj := project(ws, ".aerie")
	pinB := mustPin(t, ws, proj, filepath.Join(ws, ".aerie/tools/b.toml"), "./b.sh")
	testenv.WriteTree(t, ws, map[string]string{"ns/" + layer.TrustFile: pinB.TOML()})
	pinA := mustPin(t, ws, proj, filepath.Join(ws, ".aerie/tools/a.toml"), "./a.sh")
	ns := layer.Layer{Name: "team", Kind: layer.KindNamespace, Dir: filepath.Join(ws, "ns")}

	load := func(ns layer.Layer, pins ...layer.Pin) map[string]layer.Artifact {
		t.Helper()
		set, err := Load(layer.Source{Layers: []layer.Layer{proj, ns}, Workspace: ws}, Options{Pins: pins})
		if err != nil {
			t.Fatal(err)
		}
		if p := set.Report.Problems(); len(p) > 0 {
			t.Errorf("problems: %v", p)
		}
		return byPath(set.Report.Artifacts)
	}
	arts := load(ns, pinA)
	if a, b := arts[filepath.Join(ws, ".aerie/tools/a.toml")], arts[filepath.Join(ws, ".aerie/tools/b.toml")]; a.Trust != layer.Trusted || b.Trust != layer.Trusted {
		t.Errorf("with the session's pin and the namespace's: a %s, b %s; want both trusted", a.Trust, b.Trust)
	}

	ns.IgnorePins = true
	arts = load(ns, pinA)
	if a, b := arts[filepath.Join(ws, ".aerie/tools/a.toml")], arts[filepath.Join(ws, ".aerie/tools/b.toml")]; a.Trust != layer.Trusted || b.Trust != layer.Untrusted {
		t.Errorf("namespace pins ignored: a %s, b %s; want a trusted, b untrusted", a.Trust, b.Trust)
	}
	tr := arts[filepath.Join(ws, "ns", layer.TrustFile)]
	if tr.Status != layer.StatusInactive || !strings.Contains(tr.Reason, "leave out namespace layers") {
		t.Errorf("ignored trust.toml: %+v", tr)
	}
}
