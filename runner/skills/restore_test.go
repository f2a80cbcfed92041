package skills

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/provider"
)

// restoreSet discovers four skills in a home layer, one of them large.
func restoreSet(t *testing.T) (*Set, string) {
	t.Helper()
	dir := tree(t, map[string]string{
		"skills/alpha/SKILL.md": md("alpha", "Alpha."),
		"skills/beta/SKILL.md":  md("beta", "Beta."),
		"skills/gamma/SKILL.md": md("gamma", "Gamma."),
		"skills/big/SKILL.md":   md("big", "Big.") + strings.Repeat("a long line of the big skill\n", 2000),
	})
	set, err := Discover(Roots([]layer.Layer{{Name: "home", Dir: dir, Kind: layer.KindHome}}, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	return set, dir
}

func assistant(cs ...provider.Content) provider.Message {
	return provider.Message{Role: provider.RoleAssistant, Content: cs}
}

func results(cs ...provider.Content) provider.Message {
	return provider.Message{Role: provider.RoleUser, Content: cs}
}

var restoredName = regexp.MustCompile(`(?m)<skill name="([^"]+)"|^- ([^\s]+): not re-attached`)

// restoredNames lists the skills a restore carries or names, in order.
func restoredNames(s string) []string {
	var out []string
	for _, m := range restoredName.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

func TestRestore(t *testing.T) {
	t.Parallel()
	set, dir := restoreSet(t)
	reads := func(name string, args json.RawMessage) []string {
		if name != "read_file" {
			return nil
		}
		var a struct{ Path string }
		_ = json.Unmarshal(args, &a)
		return []string{filepath.Join(dir, a.Path)}
	}
	r := Restorer{Set: func() *Set { return set }, Reads: reads}
	compacted := []provider.Message{
		provider.UserMessage(Message("do it", []Attachment{{Skill: mustLookup(t, set, "alpha"), Content: "alpha body"}})),
		assistant(provider.ToolCall("c1", ToolName, `{"name":"beta"}`)),
		results(provider.ToolResult("c1", "Skill beta", false)),
		assistant(provider.ToolCall("c2", ToolName, `{"name":"gamma","file":"references/x.md"}`), // a file, not the skill
			provider.ToolCall("c3", ToolName, `{"name":"nope"}`)), // no such skill
		results(provider.ToolResult("c2", "x", false), provider.ToolResult("c3", "skill: not available", true)),
		assistant(provider.ToolCall("c4", "read_file", `{"path":"skills/gamma/SKILL.md"}`)),
		results(provider.ToolResult("c4", "gamma", false)),
		assistant(provider.ToolCall("c5", ToolName, `{"name":"/alpha"}`)), // alpha again: now the most recent
		results(provider.ToolResult("c5", "Skill alpha", false)),
	}
	got := r.Restore(compacted, nil)
	if want := []string{"alpha", "gamma", "beta"}; !cmp.Equal(restoredNames(got), want) {
		t.Fatalf("restored %q, want %q:\n%s", restoredNames(got), want, got)
	}
	if !strings.Contains(got, "# gamma\n\nDo the thing.\n</skill>") {
		t.Errorf("the restore does not carry gamma's content as it is now:\n%s", got)
	}

	// A skill the tail reads is in the context already.
	tail := []provider.Message{assistant(provider.ToolCall("c6", ToolName, `{"name":"gamma"}`)),
		results(provider.ToolResult("c6", "Skill gamma", false))}
	if got, want := restoredNames(r.Restore(compacted, tail)), []string{"alpha", "beta"}; !cmp.Equal(got, want) {
		t.Errorf("with gamma in the tail restored %q, want %q", got, want)
	}

	// The next compaction replaces the replacement that carries them: the
	// same skills, in the same order, come back again.
	again := r.Restore([]provider.Message{provider.UserMessage("summary\n\n" + got), provider.UserMessage("go on")}, nil)
	if again != got {
		t.Errorf("a second compaction restores\n%s\nwant\n%s", again, got)
	}
}

func TestRestoreCaps(t *testing.T) {
	t.Parallel()
	set, _ := restoreSet(t)
	read := func(names ...string) []provider.Message {
		var msgs []provider.Message
		for i, n := range names {
			id := "c" + string(rune('a'+i))
			msgs = append(msgs, assistant(provider.ToolCall(id, ToolName, `{"name":"`+n+`"}`)),
				results(provider.ToolResult(id, "ok", false)))
		}
		return msgs
	}
	compacted := read("alpha", "big", "beta")

	// The big skill is cut to its cap and says how to read the rest.
	r := Restorer{Set: func() *Set { return set }}
	got := r.Restore(compacted, nil)
	if want := []string{"beta", "big", "alpha"}; !cmp.Equal(restoredNames(got), want) {
		t.Fatalf("restored %q, want %q", restoredNames(got), want)
	}
	if len(got) > RestoreSkillBytes+2000 || !strings.Contains(got, `[truncated: the skill goes on; read it in full with the skill tool (name "big")]`) {
		t.Errorf("the big skill is not cut to its cap (%d bytes)", len(got))
	}

	// A total cap too small for the big skill names it instead, and the
	// next compaction names it again.
	r.TotalBytes = 300
	got = r.Restore(compacted, nil)
	if want := []string{"beta", "alpha", "big"}; !cmp.Equal(restoredNames(got), want) {
		t.Fatalf("restored %q, want %q:\n%s", restoredNames(got), want, got)
	}
	if !strings.Contains(got, "- big: not re-attached; call the skill tool with name \"big\"") || strings.Contains(got, "long line") {
		t.Errorf("the big skill is not named with how to read it:\n%s", got)
	}
	if again := r.Restore([]provider.Message{provider.UserMessage(got)}, nil); again != got {
		t.Errorf("a second compaction restores\n%s\nwant\n%s", again, got)
	}

	if got := r.Restore(nil, compacted); got != "" {
		t.Errorf("nothing compacted restores %q", got)
	}
	if got := (Restorer{Set: func() *Set { return nil }}).Restore(compacted, nil); got != "" {
		t.Errorf("no skills restores %q", got)
	}
}

func TestCutAt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 400) // 800 bytes
	got, cut := cutAt(long, 501)
	if !cut || len(got) != 500 || !strings.HasPrefix(long, got) {
		t.Errorf("cutAt splits a rune: %d bytes, cut %v", len(got), cut)
	}
	if got, cut := cutAt("short", 10); got != "short" || cut {
		t.Errorf("cutAt(short) = %q, %v", got, cut)
	}
	if got, cut := cutAt(long, 100); got != "" || !cut {
		t.Errorf("cutAt below a line's worth = %q, %v", got, cut)
	}
}
