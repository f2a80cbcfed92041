package plugins

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

const corpusMarket = "testdata/corpus/claude-plugins/anthropics__claude-plugins-official"

func TestParseMarketplace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format Format
		doc    string
		want   []MarketEntry // compared without Problem
		field  string        // of the catalog's error, or of the first entry's problem
		errHas string
	}{
		{name: "claude sources", format: FormatClaude, doc: `{"name":"m","owner":{"name":"O"},"plugins":[
			{"name":"a","source":"./plugins/a","version":"1.0.0","description":"A"},
			{"name":"b","source":{"source":"url","url":"https://h/x.git","sha":"0123456789abcdef0123456789abcdef01234567"}},
			{"name":"c","source":{"source":"git-subdir","url":"acme/mono","path":"./plugins/c","ref":"v1.2"},"strict":false,"skills":["./s1","s1/"],"lspServers":{}},
			{"name":"d","source":{"source":"github","repo":"acme/d","ref":"main"}}]}`,
			want: []MarketEntry{
				{Name: "a", Version: "1.0.0", Description: "A", Strict: true, Source: EntrySource{Kind: SourceRelative, Path: "plugins/a"}},
				{Name: "b", Strict: true, Source: EntrySource{Kind: SourceGit, URL: "https://h/x.git", SHA: "0123456789abcdef0123456789abcdef01234567"}},
				{Name: "c", Skills: []string{"s1"}, Components: []string{"lspServers"},
					Source: EntrySource{Kind: SourceGit, URL: "https://github.com/acme/mono.git", Path: "plugins/c", Ref: "v1.2"}},
				{Name: "d", Strict: true, Source: EntrySource{Kind: SourceGit, URL: "https://github.com/acme/d.git", Ref: "main"}},
			}},
		{name: "codex local", format: FormatCodex, doc: `{"name":"m","plugins":[{"name":"a","source":{"source":"local","path":"./plugins/a"},"policy":{}}]}`,
			want: []MarketEntry{{Name: "a", Strict: true, Source: EntrySource{Kind: SourceRelative, Path: "plugins/a"}}}},
		{name: "plugin root", format: FormatClaude, doc: `{"name":"m","metadata":{"pluginRoot":"./plugins"},"plugins":[{"name":"a","source":"a"},{"name":"b","source":"./b"}]}`,
			want: []MarketEntry{
				{Name: "a", Strict: true, Source: EntrySource{Kind: SourceRelative, Path: "plugins/a"}},
				{Name: "b", Strict: true, Source: EntrySource{Kind: SourceRelative, Path: "b"}},
			}},
		{name: "not json", format: FormatClaude, doc: `{`, errHas: "invalid JSON"},
		{name: "no name", format: FormatClaude, doc: `{"plugins":[]}`, field: "name", errHas: "required"},
		{name: "bad name", format: FormatClaude, doc: `{"name":"My Market","plugins":[]}`, field: "name", errHas: "lowercase"},
		{name: "no plugins", format: FormatClaude, doc: `{"name":"m"}`, field: "plugins", errHas: "required"},
		{name: "entry escapes", format: FormatClaude, doc: `{"name":"m","plugins":[{"name":"a","source":"../a"}]}`,
			field: "plugins[0].source", errHas: "leaves the plugin directory"},
		{name: "entry npm", format: FormatClaude, doc: `{"name":"m","plugins":[{"name":"a","source":{"source":"npm","package":"x"}}]}`,
			field: "plugins[0].source.source", errHas: "npm sources are not supported"},
		{name: "entry ext transport", format: FormatClaude, doc: `{"name":"m","plugins":[{"name":"a","source":{"source":"url","url":"ext::sh"}}]}`,
			field: "plugins[0].source.url", errHas: "must be an https"},
		{name: "entry option ref", format: FormatClaude, doc: `{"name":"m","plugins":[{"name":"a","source":{"source":"github","repo":"a/b","ref":"--upload-pack=x"}}]}`,
			field: "plugins[0].source.ref", errHas: "branch or tag"},
		{name: "entry bad sha", format: FormatClaude, doc: `{"name":"m","plugins":[{"name":"a","source":{"source":"url","url":"https://h/x","sha":"main"}}]}`,
			field: "plugins[0].source.sha", errHas: "hexadecimal"},
		{name: "entry subdir without path", format: FormatClaude, doc: `{"name":"m","plugins":[{"name":"a","source":{"source":"git-subdir","url":"https://h/x"}}]}`,
			field: "plugins[0].source.path", errHas: "required"},
		{name: "entry no source", format: FormatClaude, doc: `{"name":"m","plugins":[{"name":"a"}]}`,
			field: "plugins[0].source", errHas: "required"},
		{name: "entry bad strict", format: FormatClaude, doc: `{"name":"m","plugins":[{"name":"a","source":"./a","strict":"no"}]}`,
			field: "plugins[0].strict", errHas: "true or false"},
		{name: "entry duplicate", format: FormatClaude, doc: `{"name":"m","plugins":[{"name":"a","source":"./a"},{"name":"a","source":"./b"}]}`,
			field: "plugins[1].name", errHas: "already plugins[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := ParseMarketplace(tt.format, "/m/marketplace.json", []byte(tt.doc))
			if tt.want == nil && err == nil && m != nil {
				for _, e := range m.Entries {
					if e.Problem != nil {
						err = e.Problem
						break
					}
				}
			}
			if tt.errHas != "" {
				var p layer.Problem
				if !errors.As(err, &p) || p.File != "/m/marketplace.json" || p.Field != tt.field || !strings.Contains(p.Reason, tt.errHas) {
					t.Fatalf("error %v, want a problem of /m/marketplace.json field %q saying %q", err, tt.field, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range m.Entries {
				if e.Problem != nil {
					t.Errorf("entry %s: %v", e.Name, e.Problem)
				}
			}
			if diff := cmp.Diff(tt.want, m.Entries, cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().String() == ".Problem"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCorpusMarketplace resolves every entry of the official Claude
// marketplace's catalog: a relative source is installed when the corpus
// holds it and refused, naming the missing directory, when it does not; a
// git source resolves to its repository, directory, ref and pinned commit
// (the test cannot reach GitHub, so they are not fetched).
func TestCorpusMarketplace(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	m := &Manager{Dir: filepath.Join(home, Dir), MarketDir: filepath.Join(home, MarketsDir),
		Check: func() error { return nil }}
	rec, mk, err := m.AddMarketplace(t.Context(), corpusMarket, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Name != "claude-plugins-official" || mk.Owner != "Anthropic" || len(mk.Entries) != 286 || len(mk.Renames) != 9 {
		t.Fatalf("record %+v, %d entries, %d renames, owner %q", rec, len(mk.Entries), len(mk.Renames), mk.Owner)
	}
	counts := map[string]int{}
	var present []string
	for _, e := range mk.Entries {
		if e.Problem != nil {
			t.Errorf("entry %s refused: %v", e.Name, e.Problem)
			continue
		}
		_, src, err := Resolve(rec, mk, e.Name)
		switch {
		case e.Source.Kind == SourceRelative && err == nil:
			counts["relative present"]++
			present = append(present, e.Name)
		case e.Source.Kind == SourceRelative:
			counts["relative absent"]++
			if want := "its source ./" + e.Source.Path + " is not a directory of the marketplace"; !strings.Contains(err.Error(), want) {
				t.Errorf("entry %s: %v; want %q", e.Name, err, want)
			}
		case err != nil:
			t.Errorf("entry %s: %v", e.Name, err)
		default:
			counts["git"]++
			if !strings.HasPrefix(src.Source, "https://github.com/") || len(src.SHA) != 40 {
				t.Errorf("entry %s resolves to %+v, want a GitHub repository pinned to a commit", e.Name, src)
			}
		}
	}
	if diff := cmp.Diff(map[string]int{"relative present": 6, "relative absent": 47, "git": 233}, counts); diff != "" {
		t.Errorf("resolutions (-want +got):\n%s", diff)
	}
	if got := mk.Entry("adlc"); got == nil || got.Name != "agentforce-adlc" {
		t.Errorf("the rename adlc resolves to %+v", got)
	}

	for _, name := range present {
		if _, err := m.InstallFrom(t.Context(), name, rec.Name, nil); err != nil {
			t.Errorf("install %s: %v", name, err)
		}
	}
	set, err := Load([]layer.Layer{{Name: "home", Dir: home, Kind: layer.KindHome}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Format Format
		Skills int
		Entry  string
		Own    bool // the manifest is the plugin's own file
	}
	got := map[string]row{}
	for _, p := range set.Plugins {
		got[p.Name] = row{p.Format, len(p.Skills), p.Install.Marketplace + "/" + p.Install.Entry,
			!strings.HasSuffix(p.Manifest, InstallFile)}
	}
	want := map[string]row{
		"discord": {FormatClaude, 1, "claude-plugins-official/discord", true},
		// strict: false, no plugin.json: the entry is its manifest.
		"gopls-lsp":         {FormatClaude, 0, "claude-plugins-official/gopls-lsp", false},
		"hookify":           {FormatClaude, 1, "claude-plugins-official/hookify", true},
		"pr-review-toolkit": {FormatClaude, 0, "claude-plugins-official/pr-review-toolkit", true},
		"ralph-loop":        {FormatClaude, 0, "claude-plugins-official/ralph-loop", true},
		"security-guidance": {FormatClaude, 0, "claude-plugins-official/security-guidance", true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("installed (-want +got):\n%s", diff)
	}
	for _, e := range set.Entries {
		if e.Name == "gopls-lsp" && (e.Version != "1.0.0" || !strings.Contains(e.Description, "Go language server")) {
			t.Errorf("gopls-lsp entry %+v, want the marketplace entry's version and description", e)
		}
	}
}

// TestCodexMarketplace installs the 1Password plugin through its Codex
// catalog (.agents/plugins/marketplace.json, a local source).
func TestCodexMarketplace(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	m := &Manager{Dir: filepath.Join(home, Dir), MarketDir: filepath.Join(home, MarketsDir)}
	rec, mk, err := m.AddMarketplace(t.Context(), "testdata/corpus/codex-plugins/1Password__1password-codex-plugin", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Format != FormatCodex || mk.Name != "1password-plugins" || len(mk.Entries) != 1 {
		t.Fatalf("record %+v, catalog %+v", rec, mk)
	}
	if _, err := m.InstallFrom(t.Context(), "1password", rec.Name, nil); err != nil {
		t.Fatal(err)
	}
	set, err := Load([]layer.Layer{{Name: "home", Dir: home, Kind: layer.KindHome}}, Options{})
	if err != nil || len(set.Plugins) != 1 || set.Plugins[0].Format != FormatCodex || len(set.Plugins[0].Skills) != 1 {
		t.Fatalf("load: %v, %+v", err, set)
	}
}

// TestGitMarketplace adds a marketplace from a git server the test runs,
// installs an entry of every source kind from it, and follows the
// marketplace: after the catalog moves an entry's pin, marketplace update
// and plugin update install the new commit.
func TestGitMarketplace(t *testing.T) {
	t.Parallel()
	srv := testenv.StartGitHTTPServer(t)
	skill := func(name string) string {
		return "---\nname: " + name + "\ndescription: The " + name + " skill.\n---\nBody of " + name + ".\n"
	}
	// acme/tools: a repository whose root is a Claude plugin.
	tools := t.TempDir()
	testenv.WriteTree(t, tools, map[string]string{
		".claude-plugin/plugin.json": `{"name":"tools","version":"1.0.0"}`,
		"skills/lint/SKILL.md":       skill("lint"),
	})
	toolsV1 := srv.Publish(t, "acme/tools", "main", tools, "")
	// mono: a monorepo with a plugin without a manifest (strict: false)
	// and one with a manifest whose entry adds a skill directory.
	mono := t.TempDir()
	testenv.WriteTree(t, mono, map[string]string{
		"packages/docs/guides/write/SKILL.md":        skill("write"),
		"packages/deploy/.claude-plugin/plugin.json": `{"name":"deploy"}`,
		"packages/deploy/extra/ship/SKILL.md":        skill("ship"),
	})
	monoV1 := srv.Publish(t, "mono", "main", mono, "v1")
	catalog := func(toolsSHA string) string {
		return `{"name":"acme","owner":{"name":"Acme"},"plugins":[
			{"name":"review","source":"./plugins/review","description":"Review."},
			{"name":"tools","source":{"source":"github","repo":"acme/tools"}},
			{"name":"tools-pinned","source":{"source":"url","url":"` + srv.URL() + `/acme/tools.git","sha":"` + toolsSHA + `"}},
			{"name":"docs","strict":false,"version":"0.3.0","skills":["./guides"],
			 "source":{"source":"git-subdir","url":"` + srv.URL() + `/mono.git","path":"packages/docs","ref":"v1"}},
			{"name":"deploy","skills":["./extra"],"source":{"source":"git-subdir","url":"` + srv.URL() + `/mono.git","path":"packages/deploy","ref":"main"}}]}`
	}
	market := t.TempDir()
	testenv.WriteTree(t, market, map[string]string{
		".claude-plugin/marketplace.json":           catalog(toolsV1),
		"plugins/review/.claude-plugin/plugin.json": `{"name":"review"}`,
		"plugins/review/skills/check/SKILL.md":      skill("check"),
	})
	marketV1 := srv.Publish(t, "acme/market", "main", market, "")

	home := t.TempDir()
	m := &Manager{Dir: filepath.Join(home, Dir), MarketDir: filepath.Join(home, MarketsDir), Env: srv.GitEnv()}
	rec, _, err := m.AddMarketplace(t.Context(), "acme/market", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Name != "acme" || rec.Source != "https://github.com/acme/market.git" || rec.Commit != marketV1 ||
		rec.Dir != filepath.Join(home, MarketsDir, "acme") {
		t.Fatalf("record %+v", rec)
	}
	// tools-pinned's name differs from its manifest's: refused, precisely.
	if _, err := m.InstallFrom(t.Context(), "tools-pinned", "acme", nil); err == nil ||
		!strings.Contains(err.Error(), `the plugin's manifest names it "tools", but the marketplace entry is "tools-pinned"`) {
		t.Errorf("install tools-pinned: %v", err)
	}
	for _, n := range []string{"review", "tools", "docs", "deploy"} {
		if _, err := m.InstallFrom(t.Context(), n, "acme", nil); err != nil {
			t.Fatalf("install %s: %v", n, err)
		}
	}
	set, err := Load([]layer.Layer{{Name: "home", Dir: home, Kind: layer.KindHome}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Commit, Source, Path, Ref string
		Skills                    []string
	}
	got := map[string]row{}
	for _, p := range set.Plugins {
		var skills []string
		for _, s := range p.Skills {
			rel, _ := filepath.Rel(p.Root, s.Dir)
			skills = append(skills, rel)
		}
		got[p.Name] = row{p.Install.Commit, p.Install.Source, p.Install.Path, p.Install.Ref, skills}
		if p.Install.Marketplace != "acme" || p.Install.Entry != p.Name {
			t.Errorf("%s: provenance %+v, want marketplace acme and its entry", p.Name, p.Install)
		}
	}
	want := map[string]row{
		"review": {marketV1, filepath.Join(home, MarketsDir, "acme", "plugins", "review"), "", "", []string{"skills"}},
		"tools":  {toolsV1, "https://github.com/acme/tools.git", "", "", []string{"skills"}},
		"docs":   {monoV1, srv.URL() + "/mono.git", "packages/docs", "v1", []string{"guides"}},
		"deploy": {monoV1, srv.URL() + "/mono.git", "packages/deploy", "main", []string{"extra"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("installed (-want +got):\n%s", diff)
	}

	// A new release of tools, pinned by the catalog: the marketplace
	// update fetches the catalog, the plugin update follows the entry.
	testenv.WriteFile(t, filepath.Join(tools, "skills/format/SKILL.md"), skill("format"), 0o644)
	toolsV2 := srv.Publish(t, "acme/tools", "main", tools, "")
	testenv.WriteFile(t, filepath.Join(market, ".claude-plugin/marketplace.json"),
		strings.Replace(catalog(toolsV2), `"repo":"acme/tools"}`, `"repo":"acme/tools","sha":"`+toolsV1+`"}`, 1), 0o644)
	marketV2 := srv.Publish(t, "acme/market", "main", market, "")
	if rec, err = m.UpdateMarketplace(t.Context(), "acme"); err != nil || rec.Commit != marketV2 {
		t.Fatalf("update marketplace: %+v, %v", rec, err)
	}
	// tools is now pinned to v1 in the catalog: still v1. Unpin it.
	if err := m.Update(t.Context(), "tools"); err != nil {
		t.Fatal(err)
	}
	if inst := readRecord(t, m, "tools"); inst.Commit != toolsV1 {
		t.Errorf("tools after update at the pinned v1: commit %s, want %s", inst.Commit, toolsV1)
	}
	testenv.WriteFile(t, filepath.Join(market, ".claude-plugin/marketplace.json"),
		strings.Replace(catalog(toolsV2), `"repo":"acme/tools"}`, `"repo":"acme/tools","sha":"`+toolsV2+`"}`, 1), 0o644)
	srv.Publish(t, "acme/market", "main", market, "")
	if _, err := m.UpdateMarketplace(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	if err := m.Update(t.Context(), "tools"); err != nil {
		t.Fatal(err)
	}
	if inst := readRecord(t, m, "tools"); inst.Commit != toolsV2 || inst.Marketplace != "acme" {
		t.Errorf("tools after update: %+v, want commit %s from acme", inst, toolsV2)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "tools", "skills", "format", "SKILL.md")); err != nil {
		t.Errorf("the new skill is not installed: %v", err)
	}

	// Removing the marketplace removes its clone and keeps the plugins;
	// updating one then says what to do.
	if err := m.RemoveMarketplace("acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rec.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clone %s is still there: %v", rec.Dir, err)
	}
	if err := m.Update(t.Context(), "review"); err == nil || !strings.Contains(err.Error(), "marketplace acme is not added") {
		t.Errorf("update after remove: %v", err)
	}
	if names, _ := m.Installed(); len(names) != 4 {
		t.Errorf("installed after removing the marketplace: %v", names)
	}
}

func readRecord(t *testing.T, m *Manager, name string) *Install {
	t.Helper()
	in, err := readInstall(os.DirFS(m.Dir), name)
	if err != nil || in == nil {
		t.Fatalf("install record of %s: %+v, %v", name, in, err)
	}
	return in
}

// TestInstallRecordManifest checks the entry manifest of a record as input:
// a packed layer carries the record, so its paths must stay in the plugin.
func TestInstallRecordManifest(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	testenv.WriteTree(t, filepath.Join(home, Dir), map[string]string{
		"a/" + InstallFile: "source: x\ninstalled_at: 2026-01-01T00:00:00Z\nenabled: true\nmanifest:\n  format: claude\n  name: a\n  skills: [../../escape]\n",
		"b/" + InstallFile: "source: x\ninstalled_at: 2026-01-01T00:00:00Z\nenabled: true\nmanifest:\n  format: aerie\n  name: b\n",
	})
	set, err := Load([]layer.Layer{{Name: "home", Dir: home, Kind: layer.KindHome}}, Options{})
	if err == nil {
		t.Fatal("Load accepted the records")
	}
	for _, want := range []string{"manifest.skills: path \"../../escape\" leaves the plugin directory",
		"manifest.format: format \"aerie\" must be claude or codex"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if len(set.Plugins) != 0 {
		t.Errorf("plugins %+v, want none", set.Plugins)
	}
}
