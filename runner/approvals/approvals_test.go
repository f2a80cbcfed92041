package approvals

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data, err string
	}{
		{"empty", "", ""},
		{"rules", "[[approval]]\ntool = \"bash\"\ninput = { command = \"git status\" }\n[[approval]]\ntool = \"write_file|apply_patch\"\ndecision = \"deny\"\n", ""},
		{"no tool", "[[approval]]\nreason = \"x\"\n", "f.toml: approval[0].tool: missing"},
		{"bad tool", "[[approval]]\ntool = \"(\"\n", "f.toml: approval[0].tool: invalid regular expression"},
		{"bad input", "[[approval]]\ntool = \"bash\"\ninput = { command = \"[\" }\n", "approval[0].input.command: invalid regular expression"},
		{"bad decision", "[[approval]]\ntool = \"bash\"\ndecision = \"maybe\"\n", `approval[0].decision: "maybe": want allow or deny`},
		{"unknown field", "[[approval]]\ntool = \"bash\"\nargs = 1\n", "unknown field"},
		{"not TOML", "[[approval", "f.toml: invalid TOML at line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.data), "f.toml")
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("Parse: %v, want %q", err, tt.err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	rules, err := Parse([]byte(`
[[approval]]
tool = "bash"
input = { command = "git (status|diff)( .*)?" }
reason = "read-only git"
[[approval]]
tool = "bash"
input = { command = "rm .*" }
decision = "deny"
[[approval]]
tool = "write_.*"
input = { mode = "420" }
`), "a.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := Store{rules: rules}
	asked := 0
	next := func(context.Context, hooks.ApprovalRequest) hooks.Approval {
		asked++
		return hooks.Approval{Pending: true, Policy: "ask"}
	}
	policy := s.Then(next)
	tests := []struct {
		tool, input string
		want        hooks.Approval
	}{
		{"bash", `{"command":"git status"}`, hooks.Approval{Allowed: true, Reason: "why (read-only git)", Policy: Policy}},
		{"bash", `{"command":"git status --short"}`, hooks.Approval{Allowed: true, Reason: "why (read-only git)", Policy: Policy}},
		{"bash", `{"command":"git push"}`, hooks.Approval{Pending: true, Policy: "ask"}},
		{"bash", `{"command":"rm -rf /"}`, hooks.Approval{Reason: "why (denied by a saved approval in a.toml)", Policy: Policy}},
		{"bash", `{"cmd":"git status"}`, hooks.Approval{Pending: true, Policy: "ask"}},
		{"bash", `not json`, hooks.Approval{Pending: true, Policy: "ask"}},
		{"rebash", `{"command":"git status"}`, hooks.Approval{Pending: true, Policy: "ask"}},
		{"write_file", `{"mode":420}`, hooks.Approval{Allowed: true, Reason: "why (approved by a saved approval in a.toml)", Policy: Policy}},
	}
	for _, tt := range tests {
		got := policy(t.Context(), hooks.ApprovalRequest{Tool: tt.tool, Input: json.RawMessage(tt.input), Reason: "why"})
		if got != tt.want {
			t.Errorf("%s %s: %+v, want %+v", tt.tool, tt.input, got, tt.want)
		}
	}
	if asked != 4 {
		t.Errorf("the next policy was asked %d times, want 4", asked)
	}
}

// TestLoad reads the layers that may hold saved approvals, not the
// workspace's; a malformed file adds nothing.
func TestLoad(t *testing.T) {
	t.Parallel()
	write := func(data string) string {
		dir := t.TempDir()
		if data != "" {
			if err := os.WriteFile(filepath.Join(dir, FileName), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	rule := "[[approval]]\ntool = \"bash\"\n"
	layers := []layer.Layer{
		{Name: ".aerie", Kind: layer.KindProject, Dir: write(rule)},
		{Name: "spec[0]", Kind: layer.KindSpec, Dir: write(rule)},
		{Name: "bad", Kind: layer.KindNamespace, Dir: write("[[approval]]\n")},
		{Name: "none", Kind: layer.KindPlatform, Dir: write("")},
		{Name: "home", Kind: layer.KindHome, Dir: write(rule + rule)},
	}
	if n := Load(layers, nil).Len(); n != 3 {
		t.Errorf("%d rules, want 3 (spec 1 + home 2; project not honoured, malformed skipped)", n)
	}
	if (Store{}).Then(nil) == nil {
		t.Error("an empty store has no policy")
	}
}

// FuzzParse: Parse never panics, and what it accepts decides without
// panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"[[approval]]\ntool = \"bash\"\ninput = { command = \"git .*\" }\n",
		"[[approval]]\ntool = \"(\"\n",
		"[[approval]]\ntool = \"x\"\ndecision = \"deny\"\nreason = \"r\"\n",
		"approval = 3",
		"[[approval]]\ntool = \"x\"\ninput = { a = 1 }\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := Parse(data, "f.toml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.toml: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		s := Store{rules: rules}
		s.Decide(hooks.ApprovalRequest{Tool: "bash", Input: json.RawMessage(`{"command":"git status","a":1}`)})
	})
}
