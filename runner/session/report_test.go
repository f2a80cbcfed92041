package session

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/skills"
)

// TestReportSkillsAndMCP: the report's skill entries have their layer's
// kind and the digest of their SKILL.md — one read only as far as its
// frontmatter is digested for the full report alone — and the skill and
// MCP entries' reasons are sanitized; an untrusted or disabled MCP
// declaration is reported in the report's terms, with the digest of the
// declaration read.
func TestReportSkillsAndMCP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	small := "---\nname: small\ndescription: Use it.\n---\nBody.\n"
	big := "---\nname: big\ndescription: Use it.\n---\n" + strings.Repeat("Follow the steps. ", 500)
	leak := "token=hunter2\x1b[2J" + strings.Repeat("x", 1000)
	files := map[string]string{
		"ws/.aerie/skills/small/SKILL.md": small,
		"ws/.aerie/skills/big/SKILL.md":   big,
		"ws/.aerie/skills/leak/SKILL.md":  "---\nname: \"" + strings.ReplaceAll(leak, "\x1b", `\e`) + "\"\ndescription: Use it.\n---\n",
		"ws/.aerie/mcp_servers/x.yaml":    "id: x\ntype: stdio\ncommand: x-server\n",
		"ws/.aerie/mcp_servers/z.yaml":    "id: z\ntype: \"" + strings.ReplaceAll(leak, "\x1b", `\e`) + "\"\ncommand: z\n",
		"home/mcp_servers/y.yaml":         "id: y\ntype: stdio\ncommand: y-server\ndisabled: true\n",
	}
	testenv.WriteTree(t, dir, files)
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: ws, Workspace: ws, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	x, err := LoadExtensions(LoadOptions{Layers: layers, Workspace: ws, Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Type   layer.Type
		Name   string
		Kind   layer.Kind
		Status layer.Status
		Trust  layer.TrustStatus
		Digest string
		Reason string
	}
	entries := func(r layer.Report) []entry {
		var out []entry
		for _, a := range r.Artifacts {
			if a.Type != skills.TypeSkill && a.Type != mcp.TypeServer {
				continue
			}
			if len(a.Reason) > 40 {
				a.Reason = a.Reason[:40] // enough to tell them apart
			}
			out = append(out, entry{a.Type, filepath.Base(a.Path), a.LayerKind, a.Status, a.Trust, a.Digest, a.Reason})
		}
		return out
	}
	digest := func(s string) string { return layer.Digest([]byte(s)) }
	leakDoc := files["ws/.aerie/skills/leak/SKILL.md"]
	want := []entry{
		{skills.TypeSkill, "big", layer.KindProject, layer.StatusActive, "", digest(big), ""},
		{skills.TypeSkill, "leak", layer.KindProject, layer.StatusSkipped, "", digest(leakDoc), `name: "token=[redacted] is not a valid s`},
		{skills.TypeSkill, "small", layer.KindProject, layer.StatusActive, "", digest(small), ""},
		{mcp.TypeServer, "x.yaml", layer.KindProject, layer.StatusInactive, layer.Untrusted, digest(files["ws/.aerie/mcp_servers/x.yaml"]), "no trust pin for .aerie/mcp_servers/x.ya"},
		{mcp.TypeServer, "z.yaml", layer.KindProject, layer.StatusSkipped, "", digest(files["ws/.aerie/mcp_servers/z.yaml"]), `type: "token=[redacted] one of stdio, ht`},
		{mcp.TypeServer, "y.yaml", layer.KindHome, layer.StatusInactive, "", digest(files["home/mcp_servers/y.yaml"]), "disabled: true in its declaration"},
	}
	full := x.Report()
	if diff := cmp.Diff(want, entries(full)); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	for _, a := range full.Artifacts {
		if len(a.Reason) > 500 || strings.Contains(a.Reason, "hunter2") {
			t.Errorf("%s: reason %q", a.Path, a.Reason)
		}
	}
	// What a session start reports costs no read for a digest.
	want[0].Digest = ""
	if diff := cmp.Diff(want, entries(x.report(false))); diff != "" {
		t.Errorf("report without reads (-want +got):\n%s", diff)
	}
}
