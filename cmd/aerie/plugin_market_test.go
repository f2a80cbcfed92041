package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

const corpusMarket = "../../runner/plugins/testdata/corpus/claude-plugins/anthropics__claude-plugins-official"

// TestPluginMarketplaceLocal adds the official Claude catalog from a
// directory, lists it, installs a strict: false entry and a plugin with
// its own manifest by NAME@MARKETPLACE, and packs them into a layer.
func TestPluginMarketplaceLocal(t *testing.T) {
	t.Parallel()
	h := harness{home: t.TempDir(), dir: t.TempDir()}
	market, err := filepath.Abs(corpusMarket)
	if err != nil {
		t.Fatal(err)
	}
	r := h.aerie(t, "plugin", "marketplace", "add", market)
	if r.code != 0 || !strings.Contains(r.stdout, "Added marketplace claude-plugins-official (286 plugins)") {
		t.Fatalf("marketplace add: code %d, stdout %q, err %v", r.code, r.stdout, r.err)
	}
	r = h.aerie(t, "plugin", "marketplace", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "claude-plugins-official") || !strings.Contains(r.stdout, "286 plugins") {
		t.Errorf("marketplace list: %q, %v", r.stdout, r.err)
	}
	r = h.aerie(t, "plugin", "marketplace", "list", "claude-plugins-official", "--json")
	var listed []marketJSON
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 1 || len(listed[0].Entries) != 286 {
		t.Fatalf("marketplace list --json: %v, %q", err, r.stdout)
	}
	problems := map[string]string{}
	for _, e := range listed[0].Entries {
		problems[e.Name] = e.Problem
	}
	if p := problems["clangd-lsp"]; !strings.Contains(p, "its source ./plugins/clangd-lsp is not a directory of the marketplace") {
		t.Errorf("clangd-lsp (absent from the corpus): problem %q", p)
	}
	if p := problems["gopls-lsp"]; p != "" {
		t.Errorf("gopls-lsp: problem %q, want none", p)
	}

	for _, ref := range []string{"gopls-lsp@claude-plugins-official", "discord@claude-plugins-official"} {
		if r := h.aerie(t, "plugin", "install", ref); r.code != 0 {
			t.Fatalf("install %s: %v", ref, r.err)
		}
	}
	if r := h.aerie(t, "plugin", "install", "clangd-lsp@claude-plugins-official"); r.code != 1 ||
		!strings.Contains(r.err.Error(), "its source ./plugins/clangd-lsp is not a directory") {
		t.Errorf("install clangd-lsp: code %d, %v", r.code, r.err)
	}
	if r := h.aerie(t, "plugin", "install", "nope@claude-plugins-official"); r.code != 1 ||
		!strings.Contains(r.err.Error(), `has no entry "nope"`) {
		t.Errorf("install nope: code %d, %v", r.code, r.err)
	}
	rec := readFile(t, filepath.Join(h.home, "plugins", "gopls-lsp", ".aerie-install.yaml"))
	for _, want := range []string{"marketplace: claude-plugins-official", "entry: gopls-lsp", "manifest:", "format: claude", "version: 1.0.0"} {
		if !strings.Contains(rec, want) {
			t.Errorf("install record %q lacks %q", rec, want)
		}
	}
	r = h.aerie(t, "plugin", "list")
	for _, want := range []string{"gopls-lsp", "discord"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plugin list %q lacks %q", r.stdout, want)
		}
	}
	if r := h.aerie(t, "plugin", "update", "gopls-lsp"); r.code != 0 {
		t.Errorf("update gopls-lsp: %v", r.err)
	}

	r = h.aerie(t, "plugin", "pack", "gopls-lsp", "discord", "--name", "team-plugins", "-n", "aerie-system")
	if r.code != 0 {
		t.Fatalf("plugin pack: %v", r.err)
	}
	files := layerFilesOf(t, r.stdout)
	for _, want := range []string{"plugins/gopls-lsp/.aerie-install.yaml", "plugins/gopls-lsp/README.md",
		"plugins/discord/.claude-plugin/plugin.json", "plugins/discord/skills/access/SKILL.md"} {
		if _, ok := files[want]; !ok {
			t.Errorf("packed layer lacks %s; it has %v", want, keys(files))
		}
	}
	if r := h.aerie(t, "plugin", "disable", "gopls-lsp"); r.code != 0 {
		t.Fatal(r.err)
	}
	if r := h.aerie(t, "plugin", "pack", "gopls-lsp", "--name", "x"); r.code != 1 || !strings.Contains(r.err.Error(), "plugin gopls-lsp is inactive") {
		t.Errorf("pack a disabled plugin: code %d, %v", r.code, r.err)
	}
	if r := h.aerie(t, "plugin", "pack", "missing", "--name", "x"); r.code != 1 || !strings.Contains(r.err.Error(), "plugin missing is not installed") {
		t.Errorf("pack a missing plugin: code %d, %v", r.code, r.err)
	}

	if r := h.aerie(t, "plugin", "marketplace", "remove", "claude-plugins-official"); r.code != 0 {
		t.Fatal(r.err)
	}
	if r := h.aerie(t, "plugin", "marketplace", "list"); !strings.Contains(r.stdout, "No marketplaces.") {
		t.Errorf("list after remove: %q", r.stdout)
	}
}

// TestPluginMarketplaceGit adds a marketplace from a git server the test
// runs, installs from it, and follows it with marketplace update and
// plugin update.
func TestPluginMarketplaceGit(t *testing.T) {
	t.Parallel()
	srv := testenv.StartGitHTTPServer(t)
	market := t.TempDir()
	catalog := func(version string) string {
		return `{"name":"acme","plugins":[{"name":"review","version":"` + version + `","strict":false,` +
			`"description":"Review helpers.","source":"./plugins/review"}]}`
	}
	testenv.WriteTree(t, market, map[string]string{
		".claude-plugin/marketplace.json":      catalog("1.0.0"),
		"plugins/review/skills/check/SKILL.md": "---\nname: check\ndescription: Check a change.\n---\nCheck it.\n",
	})
	v1 := srv.Publish(t, "market", "main", market, "v1")

	h := harness{home: t.TempDir(), dir: t.TempDir()}
	r := h.aerie(t, "plugin", "marketplace", "add", srv.URL()+"/market.git", "--ref", "main", "--name", "team", "--json")
	var added map[string]marketJSON
	if err := json.Unmarshal([]byte(r.stdout), &added); err != nil || r.code != 0 {
		t.Fatalf("marketplace add: %v, %q, %v", err, r.stdout, r.err)
	}
	if a := added["added"]; a.Name != "team" || a.Commit != v1 || a.Ref != "main" || len(a.Entries) != 1 || a.Entries[0].Problem != "" {
		t.Errorf("added %+v", a)
	}
	if r := h.aerie(t, "plugin", "install", "review@team", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"marketplace": "team"`) {
		t.Fatalf("install review@team: %q, %v", r.stdout, r.err)
	}
	rec := readFile(t, filepath.Join(h.home, "plugins", "review", ".aerie-install.yaml"))
	for _, want := range []string{"commit: " + v1, "marketplace: team", "entry: review", "version: 1.0.0"} {
		if !strings.Contains(rec, want) {
			t.Errorf("install record %q lacks %q", rec, want)
		}
	}

	testenv.WriteFile(t, filepath.Join(market, ".claude-plugin/marketplace.json"), catalog("1.1.0"), 0o644)
	v2 := srv.Publish(t, "market", "main", market, "")
	if r := h.aerie(t, "plugin", "marketplace", "update"); r.code != 0 || !strings.Contains(r.stdout, "Updated marketplace team.") {
		t.Fatalf("marketplace update: %q, %v", r.stdout, r.err)
	}
	if r := h.aerie(t, "plugin", "update", "review"); r.code != 0 {
		t.Fatalf("plugin update: %v", r.err)
	}
	rec = readFile(t, filepath.Join(h.home, "plugins", "review", ".aerie-install.yaml"))
	for _, want := range []string{"commit: " + v2, "version: 1.1.0"} {
		if !strings.Contains(rec, want) {
			t.Errorf("install record after update %q lacks %q", rec, want)
		}
	}
	if r := h.aerie(t, "plugin", "marketplace", "add", srv.URL()+"/missing.git"); r.code != 1 || !strings.Contains(r.err.Error(), "git clone") {
		t.Errorf("add a missing repository: code %d, %v", r.code, r.err)
	}
	if r := h.aerie(t, "plugin", "install", "review@team", "--ref", "main"); r.code != 1 || !strings.Contains(r.err.Error(), "do not apply to NAME@MARKETPLACE") {
		t.Errorf("install with --ref: code %d, %v", r.code, r.err)
	}
}

// layerFilesOf decodes a printed layer ConfigMap the way the controller
// and the runner read it.
func layerFilesOf(t *testing.T, manifest string) map[string]runconfig.LayerFile {
	t.Helper()
	var cm layerManifest
	if err := yaml.UnmarshalStrict([]byte(manifest), &cm); err != nil {
		t.Fatalf("%v\n%s", err, manifest)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata.Labels[runconfig.LayerLabel] != "true" {
		t.Errorf("manifest %+v, want a labelled layer ConfigMap", cm.Metadata)
	}
	files, err := runconfig.LayerFiles(cm.Data, cm.BinaryData, cm.Metadata.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]runconfig.LayerFile{}
	for _, f := range files {
		out[f.Path] = f
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
