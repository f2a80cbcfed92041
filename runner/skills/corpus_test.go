package skills

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/layer"
)

// corpusSeeds adds every SKILL.md of the corpus to a fuzz test.
func corpusSeeds(f *testing.F) {
	err := filepath.WalkDir("testdata/corpus", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "SKILL.md" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f.Add(string(b))
		return nil
	})
	if err != nil {
		f.Fatalf("seed from the corpus: %v", err)
	}
}

// TestCorpus discovers the skills of public projects, each tree where
// it would be found: repository conventions as a working directory,
// skill collections as strict layers (where any malformed skill would be
// an error), plugin skills under their plugin's name.
func TestCorpus(t *testing.T) {
	t.Parallel()
	c, err := filepath.Abs("testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	roots := Roots([]layer.Layer{
		{Name: "anthropics", Dir: filepath.Join(c, "anthropics__skills"), Kind: layer.KindPlatform},
		{Name: "openai", Dir: filepath.Join(c, "openai__skills"), Kind: layer.KindBundled},
	}, Options{WorkDir: filepath.Join(c, "pydantic__pydantic-ai")})
	roots = append(roots,
		Root{Name: "agents-js", Dir: filepath.Join(c, "openai__openai-agents-js/.agents/skills"), Confine: filepath.Join(c, "openai__openai-agents-js")},
		Root{Name: "plugin shopify", Dir: filepath.Join(c, "openai__plugins/plugins/shopify/skills"), Namespace: "shopify"},
		Root{Name: "plugin zoom", Dir: filepath.Join(c, "openai__plugins/plugins/zoom/skills"), Namespace: "zoom"},
	)
	set, err := Discover(roots)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"workdir .agents/skills i-have-adhd active",
		"workdir .agents/skills pushing-commits-to-the-repo active",
		"workdir .claude/skills address-feedback active",
		// No name: the directory's name.
		"workdir .claude/skills pre-push-review active",
		"anthropics algorithmic-art active",
		// A 1,068-character block-scalar description: the spec sets no
		// limit.
		"anthropics claude-api active",
		"anthropics frontend-design active",
		"anthropics mcp-builder active",
		"anthropics skill-creator active",
		"anthropics slack-gif-creator active",
		"anthropics theme-factory active",
		"anthropics webapp-testing active",
		// .curated, .experimental and .system are searched like any
		// directory.
		"openai gh-fix-ci active",
		"openai notion-knowledge-capture active",
		"openai create-plan active",
		"openai skill-creator shadowed",
		"agents-js docs-sync active",
		"agents-js implementation-kickoff active",
		"agents-js pnpm-upgrade active",
		"plugin shopify shopify:shopify-onboarding-merchant active",
		"plugin shopify shopify:ucp active",
		// Its name differs from its directory (contact-center), which the
		// spec allows; its android, ios and web subdirectories hold
		// SKILL.md files too, but below a skill nothing is searched.
		"plugin zoom zoom:build-zoom-contact-center-app active",
	}
	if diff := cmp.Diff(want, statuses(set.Entries)); diff != "" {
		t.Errorf("entries (-want +got)\n%s", diff)
	}
	if len(set.Problems) != 0 {
		t.Errorf("problems: %v", set.Problems)
	}
	api := mustLookup(t, set, "claude-api")
	if utf8.RuneCountInString(api.Description) != 1068 || !strings.HasPrefix(api.Description, "Reference for the Claude API") {
		t.Errorf("claude-api description: %d characters", utf8.RuneCountInString(api.Description))
	}
	if sk := mustLookup(t, set, "skill-creator"); sk.Root != "anthropics" {
		t.Errorf("skill-creator from %s", sk.Root)
	}
	if sk := mustLookup(t, set, "zoom:build-zoom-contact-center-app"); filepath.Base(sk.Dir) != "contact-center" {
		t.Errorf("zoom skill dir %s", sk.Dir)
	}
	if got := len(set.Skills()); got != 21 {
		t.Errorf("%d skills, want 21", got)
	}
	// Every skill reads in full, and the tool reaches the files it refers
	// to (the omitted scripts are reported missing).
	for _, sk := range set.Skills() {
		content, err := sk.Content()
		if err != nil || !strings.HasPrefix(strings.TrimPrefix(content, "\ufeff"), "---") {
			t.Errorf("%s: %v", sk.Name, err)
		}
	}
	tool := NewTool(set)
	if r := tool.Run(t.Context(), []byte(`{"name":"mcp-builder","file":"reference/evaluation.md"}`)); r.IsError || !strings.Contains(r.Content, "# MCP Server Evaluation Guide") {
		t.Errorf("reference file: %v %.200s", r.IsError, r.Content)
	}
	if r := tool.Run(t.Context(), []byte(`{"name":"webapp-testing","file":"scripts/with_server.py"}`)); !r.IsError || !strings.Contains(r.Content, "no such file in the skill's directory") {
		t.Errorf("omitted script: %v %s", r.IsError, r.Content)
	}
}
