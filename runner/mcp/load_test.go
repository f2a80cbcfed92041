package mcp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

func yamlNode(t testing.TB, in string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(in), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// newLayer writes files, as testenv.WriteTree takes them, into a new
// layer directory.
func newLayer(t testing.TB, name string, kind layer.Kind, files map[string]string) layer.Layer {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, files)
	return layer.Layer{Name: name, Dir: dir, Kind: kind}
}

func stdioDecl(id, command string) string {
	return "id: " + id + "\ntype: stdio\ncommand: " + command + "\n"
}

// pins trusts the manifests it lists and records what it was asked.
type pins struct {
	trusted map[string]bool
	mu      sync.Mutex
	asked   [][]string
}

func (p *pins) Check(l layer.Layer, manifest string, executables []string) layer.Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, append([]string{filepath.Base(manifest)}, executables...))
	if p.trusted[manifest] {
		return layer.Verdict{Status: layer.Trusted, Pinned: true}
	}
	return layer.Verdict{Status: layer.Untrusted, Reason: "no pin matches " + filepath.Base(manifest), Pinned: true}
}

func fileStatuses(fs []File) []string {
	var out []string
	for _, f := range fs {
		s := f.Layer.Name + " " + filepath.Base(f.Path) + " " + string(f.Status)
		if f.Plugin != "" {
			s = "plugin " + f.Plugin + " " + f.ID + " " + string(f.Status)
		}
		if f.Trust != "" {
			s += " " + string(f.Trust)
		}
		out = append(out, s)
	}
	return out
}

func serverIDs(ss []Server) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID+"@"+s.Layer.Name)
	}
	return out
}

func TestLoadPrecedence(t *testing.T) {
	t.Parallel()
	project := newLayer(t, ".aerie", layer.KindProject, map[string]string{
		"mcp_servers/local-tool.yaml": stdioDecl("local-tool", "./bin/tool"),
		"mcp_servers/pinned.yaml":     stdioDecl("pinned", "uvx"),
		"mcp_servers/shared.yaml":     stdioDecl("shared", "project-version"),
		"mcp_servers/off.yaml":        stdioDecl("off", "x") + "disabled: true\n",
		"mcp_servers/broken.yaml":     "id: broken\ntype: nope\n",
		"mcp_servers/notes.md":        "not configuration",
		"mcp_servers/.swp.yaml":       "editor file",
		"mcp_servers/old.yml":         stdioDecl("old", "x"),
	})
	spec := newLayer(t, "spec[0]", layer.KindSpec, map[string]string{
		"mcp_servers/shared.yaml":  stdioDecl("shared", "spec-version"),
		"mcp_servers/broken.yaml":  stdioDecl("broken", "would-run"),
		"mcp_servers/off.yaml":     stdioDecl("off", "would-run"),
		"mcp_servers/remote.yaml":  "id: remote\ntype: http\nurl: https://mcp.example.com/mcp\n",
		"mcp_servers/private.yaml": stdioDecl("private", "x"),
	})
	home := newLayer(t, "home", layer.KindHome, map[string]string{"mcp_servers/remote.yaml": "id: remote\ntype: sse\nurl: https://far/sse\n"})
	missing := layer.Layer{Name: "gone", Dir: filepath.Join(t.TempDir(), "gone"), Kind: layer.KindBundled}
	trust := &pins{trusted: map[string]bool{
		filepath.Join(project.Dir, "mcp_servers/pinned.yaml"): true,
		filepath.Join(project.Dir, "mcp_servers/shared.yaml"): true,
	}}
	c, err := Load([]layer.Layer{project, spec, home, missing}, trust, LoadOptions{Dir: "/ws/sub"})
	if err != nil {
		t.Fatal(err) // problems in project layers are not errors
	}
	wantFiles := []string{
		".aerie broken.yaml skipped",
		".aerie local-tool.yaml inactive untrusted",
		".aerie off.yaml inactive",
		".aerie old.yml skipped",
		".aerie pinned.yaml active trusted",
		".aerie shared.yaml active trusted",
		"spec[0] broken.yaml shadowed",
		"spec[0] off.yaml shadowed",
		"spec[0] private.yaml active",
		"spec[0] remote.yaml active",
		"spec[0] shared.yaml shadowed",
		"home remote.yaml shadowed",
	}
	if diff := cmp.Diff(wantFiles, fileStatuses(c.Files)); diff != "" {
		t.Errorf("files (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]string{"pinned@.aerie", "private@spec[0]", "remote@spec[0]", "shared@.aerie"}, serverIDs(c.Servers)); diff != "" {
		t.Errorf("servers (-want +got)\n%s", diff)
	}
	// Trust is asked for project servers only, with path commands
	// resolved against the working directory.
	want := [][]string{{"local-tool.yaml", "/ws/sub/bin/tool"}, {"pinned.yaml"}, {"shared.yaml"}}
	if diff := cmp.Diff(want, trust.asked); diff != "" {
		t.Errorf("trust asked (-want +got)\n%s", diff)
	}
	var reasons []string
	for _, f := range c.Files {
		if f.Reason != "" {
			reasons = append(reasons, filepath.Base(f.Path)+": "+f.Reason)
		}
	}
	wantReasons := []string{
		`broken.yaml: type: "nope": one of stdio, http, sse`,
		"local-tool.yaml: no pin matches local-tool.yaml",
		"off.yaml: disabled: true in its declaration",
		"old.yml: only mcp_servers/*.yaml files declare servers; rename it old.yaml",
		"broken.yaml: the declaration in .aerie (" + filepath.Join(project.Dir, "mcp_servers/broken.yaml") + ") comes first",
		"off.yaml: the declaration in .aerie (" + filepath.Join(project.Dir, "mcp_servers/off.yaml") + ") comes first",
		"shared.yaml: the declaration in .aerie (" + filepath.Join(project.Dir, "mcp_servers/shared.yaml") + ") comes first",
		"remote.yaml: the declaration in spec[0] (" + filepath.Join(spec.Dir, "mcp_servers/remote.yaml") + ") comes first",
	}
	if diff := cmp.Diff(wantReasons, reasons); diff != "" {
		t.Errorf("reasons (-want +got)\n%s", diff)
	}
}

func TestLoadPrivateErrors(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "x.yaml"), []byte(stdioDecl("escape", "x")), 0o644); err != nil {
		t.Fatal(err)
	}
	l := newLayer(t, "platform", layer.KindPlatform, map[string]string{
		"mcp_servers/good.yaml":   stdioDecl("good", "x"),
		"mcp_servers/bad.yaml":    "id: bad\ntype: stdio\n",
		"mcp_servers/big.yaml":    strings.Repeat("#", MaxFileSize+1),
		"mcp_servers/dir.yaml/x":  "",
		"mcp_servers/escape.yaml": "-> " + filepath.Join(outside, "x.yaml"),
	})
	if err := syscall.Mkfifo(filepath.Join(l.Dir, "mcp_servers/fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]layer.Layer{l}, nil, LoadOptions{})
	if err == nil {
		t.Fatal("no error for malformed declarations in a private layer")
	}
	var p layer.Problem
	if !errors.As(err, &p) {
		t.Errorf("the error wraps no Problem: %v", err)
	}
	got := map[string]string{}
	for _, f := range c.Files {
		got[filepath.Base(f.Path)] = string(f.Status) + ": " + f.Reason
	}
	want := map[string]string{
		"good.yaml":   "active: ",
		"bad.yaml":    "skipped: command: missing; a stdio server needs the program that runs it",
		"big.yaml":    "skipped: larger than 1 MB (1048577 bytes); not read",
		"dir.yaml":    "skipped: not a regular file",
		"escape.yaml": "skipped: cannot open: it leads outside the layer",
		"fifo.yaml":   "skipped: not a regular file",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	for _, name := range []string{"bad.yaml", "big.yaml", "dir.yaml", "escape.yaml", "fifo.yaml"} {
		if !strings.Contains(err.Error(), filepath.Join(l.Dir, "mcp_servers", name)) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}

func TestAddPlugin(t *testing.T) {
	t.Parallel()
	home := newLayer(t, "home", layer.KindHome, map[string]string{"mcp_servers/docs.yaml": stdioDecl("docs", "my-docs")})
	c, err := Load([]layer.Layer{home}, nil, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Layer: home, File: "/p/review/.aerie-plugin/plugin.yaml", Plugin: "review"}
	entry := func(in string) Server {
		srv, probs := ParseEntry(yamlNode(t, in), src)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		return srv
	}
	review := []Server{
		entry("id: review-docs\ntype: stdio\ncommand: ${AERIE_PLUGIN_ROOT}/bin/server\nargs: [\"${OPENVAALA_PLUGIN_ROOT}/mcp/server.mjs\", \"${HOME}\"]\nenv: {DATA: \"${AERIE_PLUGIN_ROOT}/data\", AERIE_PLUGIN_ROOT: mine}\n"),
		entry("id: docs\ntype: stdio\ncommand: plugin-docs\n"),
		entry("id: remote\ntype: http\nurl: https://x/${AERIE_PLUGIN_ROOT}\n"),
	}
	if err := c.AddPlugin("review", "/p/review", review); err != nil {
		t.Fatal(err)
	}
	src.Plugin = "lint"
	err = c.AddPlugin("lint", "/p/lint", []Server{entry("id: review-docs\ntype: stdio\ncommand: x\n"), entry("id: lint-off\ntype: stdio\ncommand: x\ndisabled: true\n")})
	if err == nil || !strings.Contains(err.Error(), `plugins review and lint both declare the MCP server "review-docs"; disable one of them`) {
		t.Errorf("error = %v", err)
	}
	wantFiles := []string{
		"home docs.yaml active",
		"plugin review review-docs active",
		"plugin review docs shadowed",
		"plugin review remote active",
		"plugin lint review-docs skipped",
		"plugin lint lint-off inactive",
	}
	if diff := cmp.Diff(wantFiles, fileStatuses(c.Files)); diff != "" {
		t.Errorf("files (-want +got)\n%s", diff)
	}
	var rd Server
	for _, s := range c.Servers {
		if s.ID == "review-docs" {
			rd = s
		}
	}
	want := Server{
		ID: "review-docs", Type: TypeStdio, Command: "/p/review/bin/server", Args: []string{"/p/review/mcp/server.mjs", "${HOME}"},
		Env:       map[string]string{"DATA": "/p/review/data", "AERIE_PLUGIN_ROOT": "mine", "OPENVAALA_PLUGIN_ROOT": "/p/review"},
		Executors: []string{"local"}, StartupTimeout: DefaultStartupTimeout, ToolTimeout: DefaultToolTimeout,
		Layer: home, File: "/p/review/.aerie-plugin/plugin.yaml", Plugin: "review", PluginRoot: "/p/review",
	}
	if diff := cmp.Diff(want, rd); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]string{"docs@home", "remote@home", "review-docs@home"}, serverIDs(c.Servers)); diff != "" {
		t.Errorf("servers (-want +got)\n%s", diff)
	}
	for _, s := range c.Servers {
		if s.ID == "remote" && s.URL != "https://x/${AERIE_PLUGIN_ROOT}" {
			t.Errorf("an http server's url was expanded: %s", s.URL)
		}
	}
}

// TestBoundedDiscovery: a layer whose mcp_servers/ holds 10,000
// declarations and a 100 MB one reads only the first MaxFiles in name
// order, says which were left out, and refuses the big one unread.
func TestBoundedDiscovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	decls := filepath.Join(dir, "mcp_servers")
	if err := os.MkdirAll(decls, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		id := fmt.Sprintf("s%05d", i)
		if err := os.WriteFile(filepath.Join(decls, id+".yaml"), []byte(stdioDecl(id, "srv")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A sparse 100 MB declaration sorted first: refused on its size, unread.
	testenv.SparseFile(t, filepath.Join(decls, "a-big.yaml"), 100<<20)

	c, err := Load([]layer.Layer{{Name: "spec[0]", Dir: dir, Kind: layer.KindSpec}}, nil, LoadOptions{})
	const leftOut = "only the first 128 declarations in name order are read; the other 9873, from mcp_servers/s00127.yaml on, are not; declare fewer servers, or spread them over layers"
	// The layer is private: what was left out is an error for whoever runs
	// the session, as well as a line of the report.
	if err == nil || !strings.Contains(err.Error(), leftOut) {
		t.Errorf("error %v, want one saying what was left out", err)
	}
	if len(c.Servers) != MaxFiles-1 {
		t.Errorf("%d servers, want %d", len(c.Servers), MaxFiles-1)
	}
	got := map[string]string{}
	for _, f := range c.Files {
		got[filepath.Base(f.Path)] = string(f.Status) + ": " + f.Reason
	}
	if len(got) != MaxFiles+1 {
		t.Errorf("%d files reported, want %d", len(got), MaxFiles+1)
	}
	for name, want := range map[string]string{
		"mcp_servers": "skipped: " + leftOut,
		"a-big.yaml":  "skipped: larger than 1 MB (104857600 bytes); not read",
		"s00126.yaml": "active: ",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
}

// TestLoadTrustVerdict: with real trust pins, a project declaration pinned
// as it is is active and trusted, one changed since it was pinned is
// inactive and modified, one never pinned inactive and untrusted; the
// report shows the same, with the pin that would trust each inactive one
// and the digest of each declaration read.
func TestLoadTrustVerdict(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	proj := layer.Layer{Name: ".aerie", Dir: filepath.Join(ws, ".aerie"), Kind: layer.KindProject}
	decl := func(id string) string { return filepath.Join(proj.Dir, "mcp_servers", id+".yaml") }
	for _, id := range []string{"pinned", "changed", "fresh"} {
		if err := os.MkdirAll(filepath.Dir(decl(id)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(decl(id), []byte(stdioDecl(id, "uvx")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var pins []layer.Pin
	for _, id := range []string{"pinned", "changed"} {
		pin, err := layer.ComputePin(ws, proj, decl(id), nil)
		if err != nil {
			t.Fatal(err)
		}
		pins = append(pins, pin)
	}
	if err := os.WriteFile(decl("changed"), []byte(stdioDecl("changed", "uvx")+"required: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]layer.Layer{proj}, layer.NewPins(ws, pins...), LoadOptions{Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".aerie changed.yaml inactive modified", ".aerie fresh.yaml inactive untrusted", ".aerie pinned.yaml active trusted"}
	if diff := cmp.Diff(want, fileStatuses(c.Files)); diff != "" {
		t.Errorf("files (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]string{"pinned@.aerie"}, serverIDs(c.Servers)); diff != "" {
		t.Errorf("servers (-want +got)\n%s", diff)
	}
	for _, a := range c.Artifacts(ws) {
		if data, err := os.ReadFile(a.Path); err != nil || a.Digest != layer.Digest(data) {
			t.Errorf("%s: digest %q, want the declaration's (%v)", a.Name, a.Digest, err)
		}
		switch a.Name {
		case "pinned":
			if a.Status != layer.StatusActive || a.Trust != layer.Trusted || a.Pin != nil {
				t.Errorf("pinned: %+v", a)
			}
		case "changed", "fresh":
			if a.Status != layer.StatusInactive || a.Pin == nil || a.Pin.Path != ".aerie/mcp_servers/"+a.Name+".yaml" {
				t.Errorf("%s: %+v, want inactive with the pin that would trust it", a.Name, a)
			}
			if a.Name == "changed" && (a.Trust != layer.Modified || a.Pin.SHA256 == pins[1].SHA256) {
				t.Errorf("changed: trust %s, pin %+v; want modified, and a new pin", a.Trust, a.Pin)
			}
		}
	}
}
