package layer

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
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
		".osprey/APPEND_SYSTEM.md.provenance.json": `{"origin":"agent","operation_id":"op","digest":"` + Digest([]byte("other")) + `"}`,
		"AGENTS.md":                                "Be brief.\n",
	})
	testenv.WriteTree(t, h, map[string]string{
		"SYSTEM.md":                    "Persona.\n",
		"tools/a.toml":                 body,
		"tools/a.toml.provenance.json": `{"origin":"agent","operation_id":"op-7","digest":"` + Digest([]byte(body)) + `"}`,
		"trust.toml":                   "",
	})
	testenv.WriteTree(t, dir, map[string]string{"outside.md": "Outside.\n"})
	return ws, []Layer{project(ws, ".aerie"), project(ws, ".osprey"), home(h), Bundled()}
}

// TestListingAbsent: the listing answers for the layers it listed, and
// knows nothing of the others.
func TestListingAbsent(t *testing.T) {
	t.Parallel()
	ws, layers := listingTree(t)
	dir := filepath.Dir(ws)
	testenv.WriteTree(t, ws, map[string]string{"sub/.aerie": "->../../home", "big/.aerie/x": "x"})
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

// TestListingRefusesHugeDirectories: a layer with more entries than the
// listing reads is left unknown, and loaded as without a listing.
func TestListingRefusesHugeDirectories(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	files := map[string]string{".aerie/SYSTEM.md": "S.\n"}
	for i := range maxListed + 1 {
		files[fmt.Sprintf(".aerie/f%d", i)] = ""
	}
	testenv.WriteTree(t, ws, files)
	l := project(ws, ".aerie")
	ls := ListLayers([]Layer{l}, ws)
	defer ls.Close()
	if ls.Absent(l, "tools") || ls.Dir(l) != nil {
		t.Error("a layer over the listing's limit was listed")
	}
}
