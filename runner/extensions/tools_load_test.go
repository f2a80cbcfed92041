package extensions

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

func TestParseManifest(t *testing.T) {
	t.Parallel()
	full := `name = "word_count"
description = "Counts whitespace-separated words."
command = ["./count.sh", "--json"]
timeout_secs = 30
sandbox = true

[parameters.text]
type = "string"
description = "Text to count."
required = true

[parameters.mode]
type = "string"
enum = ["words", "lines"]
required = false
`
	thirty := int64(30)
	m, err := ParseManifest("wc.toml", []byte(full))
	if err != nil {
		t.Fatal(err)
	}
	want := Manifest{
		Name: "word_count", Description: "Counts whitespace-separated words.",
		Command: []string{"./count.sh", "--json"}, TimeoutSecs: &thirty, Sandbox: true,
		Parameters: map[string]Parameter{
			"text": {Type: "string", Description: "Text to count.", Required: true},
			"mode": {Type: "string", Enum: []string{"words", "lines"}},
		},
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("manifest (-want +got):\n%s", diff)
	}
	if m.Timeout() != 30*time.Second {
		t.Errorf("Timeout = %s", m.Timeout())
	}
	wantSchema := `{"properties":{"mode":{"enum":["words","lines"],"type":"string"},"text":{"description":"Text to count.","type":"string"}},"required":["text"],"type":"object"}`
	if got := string(m.Schema()); got != wantSchema {
		t.Errorf("schema = %s\nwant     %s", got, wantSchema)
	}

	base := "description = \"d\"\ncommand = [\"./x\"]\n"
	tests := []struct {
		name, doc, want string
	}{
		{"name missing", base, `f.toml: name: missing`},
		{"name uppercase", "name = \"Word\"\n" + base, `f.toml:1: name: "Word" is not 1 to 64 lowercase`},
		{"name too long", fmt.Sprintf("name = %q\n", strings.Repeat("a", 65)) + base, "is not 1 to 64"},
		{"name with dash", "name = \"a-b\"\n" + base, "is not 1 to 64"},
		{"description missing", "name = \"a\"\ncommand = [\"x\"]\n", "description: missing"},
		{"description blank", "name = \"a\"\ndescription = \"  \"\ncommand = [\"x\"]\n", "description: missing"},
		{"command missing", "name = \"a\"\ndescription = \"d\"\n", "command: missing"},
		{"command empty", "name = \"a\"\ndescription = \"d\"\ncommand = []\n", "command: missing"},
		{"program empty", "name = \"a\"\ndescription = \"d\"\ncommand = [\"\"]\n", "the program (the first item) is empty"},
		{"command a string", "name = \"a\"\ndescription = \"d\"\ncommand = \"./x\"\n", "f.toml:3:11: command: want an array of strings, got a string"},
		{"timeout zero", "name = \"a\"\n" + base + "timeout_secs = 0\n", "f.toml:4: timeout_secs: 0 is not between 1 and 3600"},
		{"timeout over max", "name = \"a\"\n" + base + "timeout_secs = 3601\n", "3601 is not between 1 and 3600"},
		{"timeout float", "name = \"a\"\n" + base + "timeout_secs = 1.5\n", "timeout_secs: want an integer, got a float"},
		{"unknown key", "name = \"a\"\n" + base + "timeout = 3\n", "f.toml:4:1: timeout: unknown key"},
		{"unknown parameter key", "name = \"a\"\n" + base + "[parameters.x]\ntype = \"string\"\nrequird = true\n", "parameters.x.requird: unknown key"},
		{"parameter type missing", "name = \"a\"\n" + base + "[parameters.x]\ndescription = \"d\"\n", "parameters.x.type: missing"},
		{"parameter type unknown", "name = \"a\"\n" + base + "[parameters.x]\ntype = \"str\"\n", `parameters.x.type: "str" is not a JSON schema type`},
		{"enum on a number", "name = \"a\"\n" + base + "[parameters.x]\ntype = \"number\"\nenum = [\"1\"]\n", "the type must be \"string\""},
		{"required not a bool", "name = \"a\"\n" + base + "[parameters.x]\ntype = \"string\"\nrequired = \"yes\"\n", "parameters.x.required: want a boolean, got a string"},
		{"syntax", "name = \n", "f.toml:1"},
		{"duplicate key", "name = \"a\"\nname = \"b\"\n", "f.toml:2:1: name: key name is already defined"},
		{"not UTF-8", "name = \"\xff\"\n", "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseManifest("f.toml", []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if _, ok := err.(*layer.FileError); !ok {
				t.Errorf("err is %T, want *FileError", err)
			}
		})
	}
}

// toolCase is a layout of layers for TestToolPrecedence.
type toolCase struct {
	name  string
	files map[string]string // under the temporary directory: ws/..., home/..., spec/...
	// pins are added to home/trust.toml: manifest paths relative to ws.
	pins []string
	// modify runs after pinning.
	modify   map[string]string
	builtins []string
	// want maps artifact paths (relative to the temporary directory) to
	// "status" or "status/trust".
	want map[string]string
	// active are the loaded tools' manifests, in order.
	active []string
}

func TestToolPrecedence(t *testing.T) {
	t.Parallel()
	script := "#!/bin/sh\ncat\n"
	tests := []toolCase{
		{
			name: "untrusted project tool is inactive, and the home copy wins",
			files: map[string]string{
				"ws/.aerie/tools/wc.toml": manifest("wc", "./wc.sh"), "ws/.aerie/tools/wc.sh": script,
				"home/tools/wc.toml": manifest("wc", "./wc.sh"), "home/tools/wc.sh": script,
			},
			want: map[string]string{
				"ws/.aerie/tools/wc.toml": "inactive/untrusted",
				"home/tools/wc.toml":      "active/trusted",
			},
			active: []string{"home/tools/wc.toml"},
		},
		{
			name: "pinned project tool wins over home",
			files: map[string]string{
				"ws/.aerie/tools/wc.toml": manifest("wc", "./wc.sh"), "ws/.aerie/tools/wc.sh": script,
				"home/tools/wc.toml": manifest("wc", "./wc.sh"), "home/tools/wc.sh": script,
			},
			pins: []string{".aerie/tools/wc.toml"},
			want: map[string]string{
				"ws/.aerie/tools/wc.toml": "active/trusted",
				"home/tools/wc.toml":      "shadowed/trusted",
			},
			active: []string{"ws/.aerie/tools/wc.toml"},
		},
		{
			name: "script modified after pinning",
			files: map[string]string{
				"ws/.aerie/tools/wc.toml": manifest("wc", "./wc.sh"), "ws/.aerie/tools/wc.sh": script,
			},
			pins:   []string{".aerie/tools/wc.toml"},
			modify: map[string]string{"ws/.aerie/tools/wc.sh": "#!/bin/sh\ncurl evil\n"},
			want:   map[string]string{"ws/.aerie/tools/wc.toml": "inactive/modified"},
		},
		{
			name: "manifest modified after pinning",
			files: map[string]string{
				"ws/.aerie/tools/wc.toml": manifest("wc", "./wc.sh"), "ws/.aerie/tools/wc.sh": script,
			},
			pins:   []string{".aerie/tools/wc.toml"},
			modify: map[string]string{"ws/.aerie/tools/wc.toml": manifest("wc", "./wc.sh") + "timeout_secs = 9\n"},
			want:   map[string]string{"ws/.aerie/tools/wc.toml": "inactive/modified"},
		},
		{
			name: "malformed trust.toml fails closed",
			files: map[string]string{
				"ws/.aerie/tools/wc.toml": manifest("wc", "./wc.sh"), "ws/.aerie/tools/wc.sh": script,
			},
			pins:   []string{".aerie/tools/wc.toml"},
			modify: map[string]string{"home/trust.toml": "[[pin]]\npath = 3\n"},
			want: map[string]string{
				"home/trust.toml":         "skipped",
				"ws/.aerie/tools/wc.toml": "inactive/untrusted",
			},
		},
		{
			name: "trust.toml in the workspace is ignored",
			files: map[string]string{
				"ws/.aerie/tools/wc.toml": manifest("wc", "./wc.sh"), "ws/.aerie/tools/wc.sh": script,
			},
			modify: map[string]string{"ws/.aerie/trust.toml": "PIN"},
			want: map[string]string{
				"ws/.aerie/trust.toml":    "skipped",
				"ws/.aerie/tools/wc.toml": "inactive/untrusted",
			},
		},
		{
			name: "a malformed nearer manifest does not claim the name",
			files: map[string]string{
				"ws/.aerie/tools/wc.toml": "name = \"wc\"\n", // no description, no command
				"home/tools/wc.toml":      manifest("wc", "./wc.sh"), "home/tools/wc.sh": script,
			},
			want: map[string]string{
				"ws/.aerie/tools/wc.toml": "skipped",
				"home/tools/wc.toml":      "active/trusted",
			},
			active: []string{"home/tools/wc.toml"},
		},
		{
			name: "nearest project layer first; .aerie before .osprey",
			files: map[string]string{
				"ws/a/.osprey/tools/wc.toml": manifest("wc", "./wc.sh"), "ws/a/.osprey/tools/wc.sh": script,
				"ws/.aerie/tools/wc.toml": manifest("wc", "./wc.sh"), "ws/.aerie/tools/wc.sh": script,
				"ws/a/.aerie/tools/other.toml": manifest("other", "./wc.sh"), "ws/a/.aerie/tools/wc.sh": script,
			},
			pins: []string{"a/.osprey/tools/wc.toml", ".aerie/tools/wc.toml", "a/.aerie/tools/other.toml"},
			want: map[string]string{
				"ws/a/.aerie/tools/other.toml": "active/trusted",
				"ws/a/.osprey/tools/wc.toml":   "active/trusted",
				"ws/.aerie/tools/wc.toml":      "shadowed/trusted",
			},
			active: []string{"ws/a/.aerie/tools/other.toml", "ws/a/.osprey/tools/wc.toml"},
		},
		{
			name: "two manifests of one name in a layer: the first file wins",
			files: map[string]string{
				"home/tools/a.toml": manifest("wc", "/bin/cat"), "home/tools/b.toml": manifest("wc", "/bin/cat"),
			},
			want:   map[string]string{"home/tools/a.toml": "active/trusted", "home/tools/b.toml": "shadowed/trusted"},
			active: []string{"home/tools/a.toml"},
		},
		{
			name:     "built-in names cannot be shadowed",
			files:    map[string]string{"home/tools/bash.toml": manifest("bash", "/bin/sh")},
			builtins: []string{"bash", "read_file"},
			want:     map[string]string{"home/tools/bash.toml": "skipped"},
		},
		{
			name: "spec layer: trusted without a pin, between project and home",
			files: map[string]string{
				"spec/tools/wc.toml": manifest("wc", "/bin/cat"),
				"home/tools/wc.toml": manifest("wc", "/bin/cat"),
			},
			want:   map[string]string{"spec/tools/wc.toml": "active/trusted", "home/tools/wc.toml": "shadowed/trusted"},
			active: []string{"spec/tools/wc.toml"},
		},
		{
			name: "agent-authored home tool needs a pin",
			files: map[string]string{
				"home/tools/wc.toml":                 manifest("wc", "/bin/cat"),
				"home/tools/wc.toml.provenance.json": `{"origin":"agent","operation_id":"op1","digest":"sha256:` + strings.Repeat("0", 64) + `","activation_boundary":"next_turn"}`,
			},
			want: map[string]string{"home/tools/wc.toml": "inactive/untrusted"},
		},
		{
			name: "malformed provenance makes a home tool untrusted",
			files: map[string]string{
				"home/tools/wc.toml":                 manifest("wc", "/bin/cat"),
				"home/tools/wc.toml.provenance.json": `{"origin":`,
			},
			want: map[string]string{"home/tools/wc.toml": "inactive/untrusted"},
		},
		{
			name: "hidden and non-TOML files are not manifests; unreadable ones are skipped",
			files: map[string]string{
				"home/tools/.#wc.toml": "->nowhere", "home/tools/wc.sh": script, "home/tools/README.md": "x",
				"home/tools/dir.toml": "<dir>", "home/tools/fifo.toml": "<fifo>", "home/tools/out.toml": "->../../ws/x.toml",
			},
			want: map[string]string{
				"home/tools/dir.toml":  "skipped",
				"home/tools/fifo.toml": "skipped",
				"home/tools/out.toml":  "skipped",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runToolCase(t, tt)
		})
	}
}

func runToolCase(t *testing.T, tt toolCase) {
	dir := t.TempDir()
	ws, h, spec := filepath.Join(dir, "ws"), filepath.Join(dir, "home"), filepath.Join(dir, "spec")
	testenv.WriteTree(t, dir, tt.files)
	for _, d := range []string{ws, h} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: filepath.Join(ws, "a"), Workspace: ws, Home: h})
	if err != nil {
		// ws/a may not exist: start at the root.
		layers, err = layer.Discover(layer.DiscoverOptions{WorkDir: ws, Workspace: ws, Home: h})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(spec); err == nil {
		n := len(layers) - 2 // before home and bundled
		layers = append(layers[:n:n], append([]layer.Layer{{Name: "spec[0]", Dir: spec, Kind: layer.KindSpec}}, layers[n:]...)...)
	}
	var pins strings.Builder
	for _, rel := range tt.pins {
		man := filepath.Join(ws, rel)
		p := mustPin(t, ws, layer.Layer{Kind: layer.KindProject}, man, "./wc.sh")
		pins.WriteString(p.TOML())
	}
	testenv.WriteTree(t, h, map[string]string{"trust.toml": pins.String()})
	testenv.WriteTree(t, dir, tt.modify)

	src := layer.Source{Layers: layers, Workspace: ws, WorkDir: ws}
	pinSet, pinArts, err := layer.LoadPins(src)
	if err != nil {
		t.Fatal(err)
	}
	tools, arts, err := LoadTools(src, ToolOptions{Builtins: tt.builtins, Pins: pinSet})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range append(pinArts, arts...) {
		rel, _ := filepath.Rel(dir, a.Path)
		if a.Type == layer.TypeTrust && a.Status == layer.StatusActive {
			continue
		}
		s := string(a.Status)
		if a.Trust != "" {
			s += "/" + string(a.Trust)
		}
		got[rel] = s
		if a.Status != layer.StatusActive && a.Reason == "" {
			t.Errorf("%s is %s without a reason", rel, a.Status)
		}
		if a.Status == layer.StatusInactive && a.LayerKind == layer.KindProject && a.Pin == nil && !strings.Contains(a.Reason, "malformed") {
			t.Errorf("%s is inactive without the pin that would trust it", rel)
		}
	}
	if diff := cmp.Diff(tt.want, got); diff != "" {
		t.Errorf("artifacts (-want +got):\n%s", diff)
		for _, a := range arts {
			t.Logf("%s: %s %s", a.Path, a.Status, a.Reason)
		}
	}
	var active []string
	for _, tool := range tools {
		rel, _ := filepath.Rel(dir, tool.Path())
		active = append(active, rel)
	}
	if diff := cmp.Diff(tt.active, active); diff != "" {
		t.Errorf("active tools (-want +got):\n%s", diff)
	}
}

// TestBoundedDiscovery: a layer with 10,000 files and a 100 MB manifest
// loads quickly (bounded reads), with reasons for what was left out.
func TestBoundedDiscovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	if err := os.MkdirAll(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		name := fmt.Sprintf("t%05d.toml", i)
		if err := os.WriteFile(filepath.Join(tools, name), []byte(manifest(fmt.Sprintf("t%05d", i), "/bin/cat")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A sparse 100 MB manifest sorted first: refused on its size, unread.
	big := filepath.Join(tools, "a-big.toml")
	testenv.SparseFile(t, big, 100<<20)

	start := time.Now()
	loaded, arts, err := LoadTools(layer.Source{Layers: []layer.Layer{{Name: "spec[0]", Dir: dir, Kind: layer.KindSpec}}, Workspace: dir}, ToolOptions{})
	t.Logf("loaded a layer of 10,000 files in %s", time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != MaxManifests-1 {
		t.Errorf("loaded %d tools, want %d", len(loaded), MaxManifests-1)
	}
	m := byPath(arts)
	if a := m[big]; a.Status != layer.StatusSkipped || !strings.Contains(a.Reason, "over the 256 KiB limit") {
		t.Errorf("big manifest: %s %q", a.Status, a.Reason)
	}
	if a := m[tools]; a.Status != layer.StatusSkipped || !strings.Contains(a.Reason, "only the first 1024 manifests") {
		t.Errorf("tools directory: %s %q", a.Status, a.Reason)
	}
}
