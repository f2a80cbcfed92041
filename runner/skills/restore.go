package skills

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aerie-run/aerie/runner/provider"
)

// The caps of the skills a compaction re-attaches, in bytes (four to a
// token, the compaction's estimate): Claude Code's, about 5,000 tokens
// for one skill and 25,000 for all of them.
const (
	RestoreSkillBytes = 20_000
	RestoreTotalBytes = 100_000
)

// Restorer finds the skills a conversation read — attached to a prompt,
// read with the skill tool, or a SKILL.md read with a file tool — and
// brings those a compaction drops back into its replacement, so that the
// agent still has them by name. What it knows comes from the messages
// alone (the replacement it wrote names the skills it carries), so a
// resumed conversation restores the same skills as the one that ran on.
type Restorer struct {
	// Set returns the skills available now; a skill read earlier that is
	// no longer available is not restored.
	Set func() *Set
	// Reads returns the absolute paths of the files a call of the file
	// tool name reads with args; nil when the tool reads none. A read of
	// a skill's SKILL.md loads that skill.
	Reads func(name string, args json.RawMessage) []string
	// SkillBytes and TotalBytes cap one skill's content and all of them;
	// zero is RestoreSkillBytes and RestoreTotalBytes.
	SkillBytes, TotalBytes int
}

// restoreStart opens the reminder a compaction's replacement carries the
// skills in.
const restoreStart = "<system-reminder>\nThe skills read before the conversation was compacted"

var (
	// attachedTag finds a skill's content in a prompt or a replacement.
	attachedTag = regexp.MustCompile(`<skill name="([^"]+)" directory=`)
	// restoredEntry finds a skill a replacement carries, or names without
	// its content, in the order it has them.
	restoredEntry = regexp.MustCompile(`(?m)<skill name="([^"]+)" directory=|^- ([^\s]+): not re-attached`)
)

// Restore returns what a compaction that replaces compacted and keeps
// tail must bring back of the skills: each skill compacted read and tail
// does not, once, the most recently read first, its content re-read and
// cut to the caps; those past the total cap are named with how to read
// them again. "" when there are none.
func (r Restorer) Restore(compacted, tail []provider.Message) string {
	set := r.Set()
	if set == nil || set.Len() == 0 {
		return ""
	}
	inTail := map[string]bool{}
	for _, n := range r.loaded(set, tail) {
		inTail[n] = true
	}
	read := r.loaded(set, compacted)
	slices.Reverse(read)
	var b strings.Builder
	var named []string
	perSkill, total := r.caps()
	left := total
	for _, name := range read {
		if inTail[name] {
			continue
		}
		sk, ok := set.Lookup(name)
		if !ok {
			continue
		}
		content, err := sk.Content()
		if err != nil {
			continue
		}
		content, cut := cutAt(content, min(perSkill, left))
		if content == "" {
			named = append(named, sk.Name)
			continue
		}
		left -= len(content)
		fmt.Fprintf(&b, "<skill name=%q directory=%q>\n%s", sk.Name, sk.Dir, content)
		if !strings.HasSuffix(content, "\n") {
			b.WriteByte('\n')
		}
		if cut {
			fmt.Fprintf(&b, "[truncated: the skill goes on; read it in full with the %s tool (name %q)]\n", ToolName, sk.Name)
		}
		b.WriteString("</skill>\n\n")
	}
	if b.Len() == 0 && len(named) == 0 {
		return ""
	}
	var out strings.Builder
	out.WriteString(restoreStart)
	out.WriteString(", the most recently read first. They still apply; follow them as before.\n\n")
	out.WriteString(b.String())
	if len(named) > 0 {
		out.WriteString("These were read too but do not fit here; read one again before you use it:\n")
		for _, n := range named {
			fmt.Fprintf(&out, "- %s: not re-attached; call the %s tool with name %q\n", n, ToolName, n)
		}
	}
	out.WriteString("</system-reminder>")
	return out.String()
}

func (r Restorer) caps() (perSkill, total int) {
	perSkill, total = r.SkillBytes, r.TotalBytes
	if perSkill <= 0 {
		perSkill = RestoreSkillBytes
	}
	if total <= 0 {
		total = RestoreTotalBytes
	}
	return min(perSkill, total), total
}

// cutAt cuts s to at most n bytes, at the end of a line where there is
// one in the second half; "" when not even a line's worth fits.
func cutAt(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	if n < 256 {
		return "", true
	}
	cut := s[:n]
	if i := strings.LastIndexByte(cut, '\n'); i >= n/2 {
		cut = cut[:i+1]
	}
	for i := 0; i < utf8.UTFMax && !utf8.ValidString(cut); i++ {
		cut = cut[:len(cut)-1] // a rune cut in two
	}
	return cut, true
}

// loaded returns the names of the skills msgs load, in the order they were
// last loaded, the earliest first. A replacement's restored skills are read
// in the order they were, before the rest of its message.
func (r Restorer) loaded(set *Set, msgs []provider.Message) []string {
	var order []string
	add := func(name string) {
		sk, ok := set.Lookup(name)
		if !ok {
			return
		}
		order = slices.DeleteFunc(order, func(n string) bool { return n == sk.Name })
		order = append(order, sk.Name)
	}
	failed := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.Content {
			if c.Type == provider.ContentToolResult && c.IsError {
				failed[c.ToolCallID] = true
			}
		}
	}
	for _, m := range msgs {
		for _, c := range m.Content {
			switch {
			case c.Type == provider.ContentToolCall && !failed[c.ToolCallID]:
				for _, n := range r.called(set, c) {
					add(n)
				}
			case c.Type == provider.ContentText && m.Role == provider.RoleUser:
				for _, n := range textLoads(c.Text) {
					add(n)
				}
			}
		}
	}
	return order
}

// called returns the skill a tool call reads: a skill tool call for its
// SKILL.md, or a file tool's read of one.
func (r Restorer) called(set *Set, c provider.Content) []string {
	if c.ToolName == ToolName {
		var a toolArgs
		if json.Unmarshal([]byte(c.Arguments), &a) != nil {
			return nil
		}
		if !readsSkill(strings.TrimSpace(a.File)) {
			return nil
		}
		return []string{strings.TrimPrefix(strings.TrimSpace(a.Name), "/")}
	}
	if r.Reads == nil {
		return nil
	}
	var out []string
	for _, p := range r.Reads(c.ToolName, json.RawMessage(c.Arguments)) {
		if filepath.Base(p) != fileName {
			continue
		}
		for _, sk := range set.Skills() {
			if sk.File() == filepath.Clean(p) {
				out = append(out, sk.Name)
			}
		}
	}
	return out
}

// textLoads returns the skills a user message's text carries, earliest
// first: those attached to a prompt, and those a replacement restored or
// named (which it lists the most recent first).
func textLoads(text string) []string {
	var out []string
	before, restored, found := strings.Cut(text, restoreStart)
	if found {
		entries := restoredEntry.FindAllStringSubmatch(restored, -1)
		names := make([]string, 0, len(entries))
		for _, sm := range entries {
			names = append(names, sm[1]+sm[2])
		}
		slices.Reverse(names)
		out = append(out, names...)
	}
	for _, sm := range attachedTag.FindAllStringSubmatch(before, -1) {
		out = append(out, sm[1])
	}
	return out
}
