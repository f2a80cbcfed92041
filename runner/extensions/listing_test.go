package extensions

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// listingTree writes a workspace with two project layers and a home
// layer holding every kind of top-level artifact, some of them broken:
// a dangling SYSTEM.md link, a FIFO APPEND_SYSTEM.md, a link out of the
// workspace, sidecars.
func listingTree(t *testing.T) (ws string, layers []Layer) {
	t.Helper()
	dir := t.TempDir()
	ws, h := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	body := manifest("a", "/bin/true")
	tree(t, ws, map[string]string{
		".aerie/SYSTEM.md":                         "->missing",
		".aerie/APPEND_SYSTEM.md":                  "<fifo>",
		".aerie/tools/t.toml":                      manifest("t", "./t.sh"),
		".aerie/tools/t.sh":                        "#!/bin/sh\ncat\n",
		".aerie/toolsets.toml":                     "[toolsets.ro]\ntools = [\"read_file\"]\n",
		".aerie/trust.toml":                        "not pins",
		".osprey/SYSTEM.md":                        "->../../outside.md",
		".osprey/APPEND_SYSTEM.md":                 "Append.\n",
		".osprey/tool-descriptions.toml":           "bash = \"Run.\"\n",
		".osprey/APPEND_SYSTEM.md.provenance.json": `{"origin":"agent","operation_id":"op","digest":"` + digest([]byte("other")) + `"}`,
		"AGENTS.md":                                "Be brief.\n",
	})
	tree(t, h, map[string]string{
		"SYSTEM.md":                    "Persona.\n",
		"tools/a.toml":                 body,
		"tools/a.toml.provenance.json": `{"origin":"agent","operation_id":"op-7","digest":"` + digest([]byte(body)) + `"}`,
		"trust.toml":                   "",
	})
	tree(t, dir, map[string]string{"outside.md": "Outside.\n"})
	return ws, []Layer{project(ws, ".aerie"), project(ws, ".osprey"), home(h), Bundled()}
}

// TestListingLoadsAlike: Load with the listing finds exactly what it
// finds without one, for every artifact and every failure.
func TestListingLoadsAlike(t *testing.T) {
	t.Parallel()
	ws, layers := listingTree(t)
	src := Source{Layers: layers, Workspace: ws}
	want, err := Load(src, Options{Persona: "p"})
	if err != nil {
		t.Fatal(err)
	}
	ls := ListLayers(layers, ws)
	defer ls.Close()
	src.Listing = ls
	got, err := Load(src, Options{Persona: "p"})
	if err != nil {
		t.Fatal(err)
	}
	opts := []cmp.Option{cmpopts.IgnoreFields(Artifact{}, "Err"), cmp.AllowUnexported(Artifact{}), cmpopts.IgnoreUnexported(Set{}, Toolsets{}, Pins{}, Tool{})}
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

// TestListingAbsent: the listing answers for the layers it listed, and
// knows nothing of the others.
func TestListingAbsent(t *testing.T) {
	t.Parallel()
	ws, layers := listingTree(t)
	dir := filepath.Dir(ws)
	tree(t, ws, map[string]string{"sub/.aerie": "->../../home", "big/.aerie/x": "x"})
	out := project(ws, "sub/.aerie")
	gone := Layer{Name: "gone", Dir: filepath.Join(dir, "gone"), Kind: KindNamespace}
	ls := ListLayers(append(layers, out, gone), ws)
	defer ls.Close()
	tests := []struct {
		l      Layer
		name   string
		absent bool
	}{
		{layers[0], "SYSTEM.md", false}, // a dangling link is there
		{layers[0], "hooks.toml", true},
		{layers[0], "tools", false},
		{layers[1], "trust.toml", true},
		{layers[2], "tools", false},
		{layers[2], "plugins", true},
		{layers[3], "plugins", false}, // bundled: not on disk, not listed
		{out, "tools", false},         // a link out of the workspace is not listed
		{gone, "tools", false},        // nor a layer that is not there
	}
	for _, tt := range tests {
		if got := ls.Absent(tt.l, tt.name); got != tt.absent {
			t.Errorf("Absent(%s, %s) = %v, want %v", tt.l.Name, tt.name, got, tt.absent)
		}
	}
	if ls.Dir(out) != nil || ls.Dir(gone) != nil || ls.Dir(layers[0]) == nil {
		t.Error("the listing holds open the layers it listed, and only those")
	}
	if ls.Workspace(ws) == nil || ls.Workspace(dir) != nil {
		t.Error("Workspace returns the workspace's directory, and nothing else")
	}
	var none *Listing
	if none.Absent(layers[0], "x") || none.Dir(layers[0]) != nil || none.Close() != nil {
		t.Error("a nil Listing knows nothing")
	}
}

// TestListingIsASnapshot: what changes in a layer between its listing
// and the reads is what the load finds at the moment the listing was
// made: a file created since is not looked for, and one removed since
// fails to read, as after an lstat.
func TestListingIsASnapshot(t *testing.T) {
	t.Parallel()
	ws, layers := listingTree(t)
	ls := ListLayers(layers, ws)
	defer ls.Close()
	aerie, osprey := layers[0].Dir, layers[1].Dir
	// After the listing: a new SYSTEM.md where a dangling link was, a
	// toolsets.toml appears in .osprey, an APPEND_SYSTEM.md goes.
	if err := os.Remove(filepath.Join(aerie, SystemFile)); err != nil {
		t.Fatal(err)
	}
	tree(t, ws, map[string]string{".aerie/SYSTEM.md": "New.\n", ".osprey/toolsets.toml": "[toolsets.x]\ntools = [\"bash\"]\n"})
	if err := os.Remove(filepath.Join(osprey, AppendSystemFile)); err != nil {
		t.Fatal(err)
	}
	set, err := Load(Source{Layers: layers, Workspace: ws, Listing: ls}, Options{Persona: "p"})
	if err != nil {
		t.Fatal(err)
	}
	arts := byPath(set.Report.Artifacts)
	// The SYSTEM.md was listed, so it is read: the new one.
	if a := arts[filepath.Join(aerie, SystemFile)]; a.Status != StatusActive || set.Prompt.Base != "New." {
		t.Errorf(".aerie SYSTEM.md: %+v, base %q; want the file read as it is now", a, set.Prompt.Base)
	}
	// The removed APPEND_SYSTEM.md was listed: its read fails.
	if a := arts[filepath.Join(osprey, AppendSystemFile)]; a.Status != StatusSkipped || !errors.Is(a.Err, os.ErrNotExist) {
		t.Errorf(".osprey APPEND_SYSTEM.md: %+v, want skipped as not found", a)
	}
	// The new toolsets.toml was not listed: not looked for.
	if a, ok := arts[filepath.Join(osprey, ToolsetsFile)]; ok {
		t.Errorf(".osprey toolsets.toml: %+v, want it unseen until the next load", a)
	}
	// Without a listing, the next load sees it.
	set, err = Load(Source{Layers: layers, Workspace: ws}, Options{Persona: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := byPath(set.Report.Artifacts)[filepath.Join(osprey, ToolsetsFile)]; !ok {
		t.Error("a load without the listing does not see the new toolsets.toml")
	}
}

// TestListingRefusesHugeDirectories: a layer with more entries than the
// listing reads is left unknown, and loaded as without a listing.
func TestListingRefusesHugeDirectories(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	files := map[string]string{".aerie/SYSTEM.md": "S.\n"}
	for i := range maxListed + 1 {
		files[fmt.Sprintf(".aerie/f%d", i)] = ""
	}
	tree(t, ws, files)
	l := project(ws, ".aerie")
	ls := ListLayers([]Layer{l}, ws)
	defer ls.Close()
	if ls.Absent(l, "tools") || ls.Dir(l) != nil {
		t.Error("a layer over the listing's limit was listed")
	}
}
