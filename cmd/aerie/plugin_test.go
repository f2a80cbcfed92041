package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

func writePlugin(t *testing.T, dir, manifest string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".aerie-plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".aerie-plugin", "plugin.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPluginLocalLifecycle(t *testing.T) {
	t.Parallel()
	h := harness{home: t.TempDir(), dir: t.TempDir()}
	src := filepath.Join(t.TempDir(), "review-src")
	writePlugin(t, src, "name: review\nversion: 1.0.0\n")
	if err := os.MkdirAll(filepath.Join(src, "skills", "checklist"), 0o755); err != nil {
		t.Fatal(err)
	}

	r := h.aerie(t, "plugin", "install", src)
	if r.code != 0 || !strings.Contains(r.stdout, "Installed plugin review") {
		t.Fatalf("install: code %d, stdout %q, err %v", r.code, r.stdout, r.err)
	}
	rec := readFile(t, filepath.Join(h.home, "plugins", "review", ".aerie-install.yaml"))
	for _, want := range []string{"source: " + src, "enabled: true", "installed_at:"} {
		if !strings.Contains(rec, want) {
			t.Errorf("install record %q lacks %q", rec, want)
		}
	}
	if r := h.aerie(t, "plugin", "install", src); r.code != 1 || !strings.Contains(r.err.Error(), "already installed") {
		t.Errorf("second install: code %d, err %v", r.code, r.err)
	}

	list := func() string {
		t.Helper()
		r := h.aerie(t, "plugin", "list")
		if r.code != 0 {
			t.Fatalf("list: %v", r.err)
		}
		return strings.Join(strings.Fields(r.stdout), " ")
	}
	if got, want := list(), "review 1.0.0 enabled "+src; got != want {
		t.Errorf("list = %q, want %q", got, want)
	}
	if r := h.aerie(t, "plugin", "disable", "review"); r.code != 0 {
		t.Fatalf("disable: %v", r.err)
	}
	if got, want := list(), "review 1.0.0 disabled "+src; got != want {
		t.Errorf("list = %q, want %q", got, want)
	}
	if r := h.aerie(t, "plugin", "enable", "review"); r.code != 0 {
		t.Fatalf("enable: %v", r.err)
	}
	r = h.aerie(t, "plugin", "list", "--json")
	var entries []struct {
		Name    string `json:"name"`
		Status  string `json:"status"`
		Enabled bool   `json:"enabled"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) != 1 ||
		entries[0].Name != "review" || entries[0].Status != "active" || !entries[0].Enabled {
		t.Errorf("list --json = %s (%v)", r.stdout, err)
	}
	if r := h.aerie(t, "plugin", "uninstall", "review"); r.code != 0 {
		t.Fatalf("uninstall: %v", r.err)
	}
	if got := list(); got != "No plugins." {
		t.Errorf("list after uninstall = %q", got)
	}
	if r := h.aerie(t, "plugin", "uninstall", "review"); r.code != 1 || !strings.Contains(r.err.Error(), "not installed") {
		t.Errorf("uninstall again: code %d, err %v", r.code, r.err)
	}
	entries2, _ := os.ReadDir(filepath.Join(h.home, "plugins"))
	if len(entries2) != 0 {
		t.Errorf("plugins directory keeps %v", entries2)
	}
}

func TestPluginInstallRefused(t *testing.T) {
	t.Parallel()
	h := harness{home: t.TempDir(), dir: t.TempDir()}
	// A second plugin that declares the MCP server the first declares: the
	// configuration would not load, so the install is undone.
	a := filepath.Join(t.TempDir(), "a")
	writePlugin(t, a, "name: a\nmcp_servers: [{id: docs, type: stdio, command: node}]\n")
	b := filepath.Join(t.TempDir(), "b")
	writePlugin(t, b, "name: b\nmcp_servers: [{id: docs, type: http, url: 'https://example.com/mcp'}]\n")
	if r := h.aerie(t, "plugin", "install", a); r.code != 0 {
		t.Fatalf("install a: %v", r.err)
	}
	r := h.aerie(t, "plugin", "install", b)
	if r.code != 1 || !strings.Contains(r.err.Error(), `both declare the MCP server "docs"`) {
		t.Fatalf("install b: code %d, err %v", r.code, r.err)
	}
	if _, err := os.Stat(filepath.Join(h.home, "plugins", "b")); !os.IsNotExist(err) {
		t.Errorf("b stayed installed: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	writePlugin(t, bad, "name: Bad\n")
	r = h.aerie(t, "plugin", "install", bad)
	if r.code != 1 || !strings.Contains(r.err.Error(), "plugin.yaml: name:") {
		t.Errorf("install bad: code %d, err %v", r.code, r.err)
	}
	r = h.aerie(t, "plugin", "install", t.TempDir())
	if r.code != 1 || !strings.Contains(r.err.Error(), "no plugin manifest") {
		t.Errorf("install empty: code %d, err %v", r.code, r.err)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestPluginGitInstallUpdate(t *testing.T) {
	t.Parallel()
	h := harness{home: t.TempDir(), dir: t.TempDir()}
	repo := t.TempDir()
	git(t, repo, "init", "--quiet", "--initial-branch=main")
	pdir := filepath.Join(repo, "plugins", "review")
	writePlugin(t, pdir, "name: review\nversion: 1.0.0\n")
	git(t, repo, "add", ".")
	git(t, repo, "commit", "--quiet", "-m", "v1")
	git(t, repo, "tag", "v1")
	first := git(t, repo, "rev-parse", "HEAD")
	url := "file://" + repo

	r := h.aerie(t, "plugin", "install", url, "--path", "plugins/review")
	if r.code != 0 {
		t.Fatalf("install: %v", r.err)
	}
	rec := readFile(t, filepath.Join(h.home, "plugins", "review", ".aerie-install.yaml"))
	for _, want := range []string{"source: " + url, "path: plugins/review", "commit: " + first} {
		if !strings.Contains(rec, want) {
			t.Errorf("install record %q lacks %q", rec, want)
		}
	}

	writePlugin(t, pdir, "name: review\nversion: 2.0.0\n")
	git(t, repo, "commit", "--quiet", "-am", "v2")
	if r := h.aerie(t, "plugin", "update", "review"); r.code != 0 {
		t.Fatalf("update: %v", r.err)
	}
	if got := readFile(t, filepath.Join(h.home, "plugins", "review", ".aerie-plugin", "plugin.yaml")); !strings.Contains(got, "2.0.0") {
		t.Errorf("manifest after update = %q", got)
	}

	// A broken manifest upstream: the update fails and the installed
	// version stays as it was.
	writePlugin(t, pdir, "name: review\nversion: 3.0.0\nhooks: [oops]\n")
	git(t, repo, "commit", "--quiet", "-am", "broken")
	r = h.aerie(t, "plugin", "update")
	if r.code != 1 || !strings.Contains(r.err.Error(), "hooks") {
		t.Fatalf("broken update: code %d, err %v", r.code, r.err)
	}
	if got := readFile(t, filepath.Join(h.home, "plugins", "review", ".aerie-plugin", "plugin.yaml")); !strings.Contains(got, "2.0.0") {
		t.Errorf("manifest after failed update = %q", got)
	}

	// An upstream change that parses but clashes with another installed
	// plugin's MCP server: the load after the swap fails and the previous
	// version is restored.
	other := filepath.Join(t.TempDir(), "other")
	writePlugin(t, other, "name: other\nmcp_servers: [{id: docs, type: stdio, command: node}]\n")
	if r := h.aerie(t, "plugin", "install", other); r.code != 0 {
		t.Fatalf("install other: %v", r.err)
	}
	writePlugin(t, pdir, "name: review\nversion: 4.0.0\nmcp_servers: [{id: docs, type: stdio, command: node}]\n")
	git(t, repo, "commit", "--quiet", "-am", "clash")
	r = h.aerie(t, "plugin", "update", "review")
	if r.code != 1 || !strings.Contains(r.err.Error(), "previous version was restored") {
		t.Fatalf("clashing update: code %d, err %v", r.code, r.err)
	}
	if got := readFile(t, filepath.Join(h.home, "plugins", "review", ".aerie-plugin", "plugin.yaml")); !strings.Contains(got, "2.0.0") {
		t.Errorf("manifest after rolled-back update = %q", got)
	}

	// A plugin broken in place keeps the configuration from loading; it
	// can still be disabled, and then everything loads.
	writePlugin(t, filepath.Join(h.home, "plugins", "review"), "name: review\nbogus: 1\n")
	if r := h.aerie(t, "plugin", "list"); r.code != 1 || !strings.Contains(r.stdout, "broken:") {
		t.Errorf("list with a broken plugin: code %d, stdout %q", r.code, r.stdout)
	}
	if r := h.aerie(t, "plugin", "disable", "review"); r.code != 0 {
		t.Fatalf("disable a broken plugin: %v", r.err)
	}
	if r := h.aerie(t, "plugin", "list"); r.code != 0 {
		t.Errorf("list with the broken plugin disabled: %v", r.err)
	}
	if r := h.aerie(t, "plugin", "enable", "review"); r.code != 1 || !strings.Contains(r.err.Error(), "change was undone") {
		t.Errorf("enable a broken plugin: code %d, err %v", r.code, r.err)
	}
	if rec := readFile(t, filepath.Join(h.home, "plugins", "review", ".aerie-install.yaml")); !strings.Contains(rec, "enabled: false") {
		t.Errorf("record after a refused enable = %q", rec)
	}

	// A tag pins the version.
	h2 := harness{home: t.TempDir(), dir: t.TempDir()}
	if r := h2.aerie(t, "plugin", "install", url, "--path", "plugins/review", "--ref", "v1"); r.code != 0 {
		t.Fatalf("install --ref: %v", r.err)
	}
	if got := readFile(t, filepath.Join(h2.home, "plugins", "review", ".aerie-plugin", "plugin.yaml")); !strings.Contains(got, "1.0.0") {
		t.Errorf("manifest at v1 = %q", got)
	}
	if r := h2.aerie(t, "plugin", "install", url, "--ref", "nope"); r.code != 1 || !strings.Contains(r.err.Error(), "git clone") {
		t.Errorf("install of a missing ref: code %d, err %v", r.code, r.err)
	}
}

// TestPluginJSON checks the --json output of every command that changes a
// plugin: the plugin in the shape of a plugin list --json entry, after the
// change (before it, for uninstall), and nothing else on standard output.
func TestPluginJSON(t *testing.T) {
	t.Parallel()
	h := harness{home: t.TempDir(), dir: t.TempDir()}
	src := filepath.Join(t.TempDir(), "review-src")
	writePlugin(t, src, "name: review\nversion: 1.0.0\n")
	dir := filepath.Join(h.home, "plugins", "review")

	type entry struct {
		Name    string `json:"name"`
		Dir     string `json:"dir"`
		Version string `json:"version"`
		Enabled bool   `json:"enabled"`
		Status  string `json:"status"`
		Install *struct {
			Source string `json:"source"`
		} `json:"install"`
	}
	// run runs a command with --json, checks that standard output is one
	// JSON object with the keys given, and decodes it into v.
	run := func(code int, v any, keys string, args ...string) {
		t.Helper()
		r := h.aerie(t, append(args, "--json")...)
		if r.code != code {
			t.Fatalf("%v: exit %d, want %d: %v", args, r.code, code, r.err)
		}
		var doc map[string]json.RawMessage
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		if err := dec.Decode(&doc); err != nil || dec.More() {
			t.Fatalf("%v: stdout is not one JSON object (%v):\n%s", args, err, r.stdout)
		}
		var got []string
		for k := range doc {
			got = append(got, k)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != keys {
			t.Errorf("%v: keys %v, want %s", args, got, keys)
		}
		if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	check := func(what string, got entry, version string, enabled bool, status string) {
		t.Helper()
		if got.Name != "review" || got.Dir != dir || got.Version != version || got.Enabled != enabled || got.Status != status ||
			got.Install == nil || got.Install.Source != src {
			t.Errorf("%s: %+v, want review %s in %s, enabled %v, %s, installed from %s", what, got, version, dir, enabled, status, src)
		}
	}

	var installed struct{ Installed entry }
	run(0, &installed, "installed", "plugin", "install", src)
	check("install", installed.Installed, "1.0.0", true, "active")

	var disabled struct{ Disabled entry }
	run(0, &disabled, "disabled", "plugin", "disable", "review")
	check("disable", disabled.Disabled, "1.0.0", false, "inactive")

	var enabled struct{ Enabled entry }
	run(0, &enabled, "enabled", "plugin", "enable", "review")
	check("enable", enabled.Enabled, "1.0.0", true, "active")

	writePlugin(t, src, "name: review\nversion: 1.1.0\n")
	var updates struct {
		Updated []entry
		Failed  []struct{ Name, Error string }
	}
	run(0, &updates, "failed updated", "plugin", "update")
	if len(updates.Updated) != 1 || updates.Failed == nil || len(updates.Failed) != 0 {
		t.Fatalf("update: %+v, want one plugin updated and an empty list of failures", updates)
	}
	check("update", updates.Updated[0], "1.1.0", true, "active")
	updates.Updated, updates.Failed = nil, nil
	run(1, &updates, "failed updated", "plugin", "update", "nosuch")
	if updates.Updated == nil || len(updates.Updated) != 0 || len(updates.Failed) != 1 ||
		updates.Failed[0].Name != "nosuch" || !strings.Contains(updates.Failed[0].Error, "not installed") {
		t.Errorf("update of a plugin not installed: %+v", updates)
	}

	var uninstalled struct{ Uninstalled entry }
	run(0, &uninstalled, "uninstalled", "plugin", "uninstall", "review")
	check("uninstall", uninstalled.Uninstalled, "1.1.0", true, "active")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the plugin is still installed: %v", err)
	}
}

// TestPluginInstallComponents records --components in the install record
// and refuses an unknown component by name.
func TestPluginInstallComponents(t *testing.T) {
	t.Parallel()
	h := harness{home: t.TempDir(), dir: t.TempDir()}
	src := filepath.Join(t.TempDir(), "cc")
	testenv.WriteTree(t, src, map[string]string{".claude-plugin/plugin.json": `{"name":"cc"}`})
	r := h.aerie(t, "plugin", "install", src, "--components", "lsp")
	if r.code != 1 || !strings.Contains(r.err.Error(), `--components: item 0: unknown component "lsp"`) {
		t.Fatalf("install --components lsp: code %d, err %v", r.code, r.err)
	}
	if r := h.aerie(t, "plugin", "install", src, "--components", "commands,skills"); r.code != 0 {
		t.Fatalf("install: %v", r.err)
	}
	rec := readFile(t, filepath.Join(h.home, "plugins", "cc", ".aerie-install.yaml"))
	if !strings.Contains(rec, "components:\n    - skills\n    - commands\n") {
		t.Errorf("install record lacks the components:\n%s", rec)
	}
}
