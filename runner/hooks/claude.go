package hooks

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/layer"
)

// Part is one hook of a Claude Code or Codex hooks.json, or a part of
// the file aerie does not run, as reports list them.
type Part struct {
	// Field is where the part is in the file: PreToolUse[0].hooks[1] for
	// a hook, PreToolUse[0] for a group, Notification for an event.
	Field string `json:"field"`
	// Event is the event the part is declared under, as written.
	Event string `json:"event"`
	// Matcher is its group's matcher, as written.
	Matcher string `json:"matcher,omitempty"`
	// Skipped is set when the part does not run; Reason says why. For a
	// hook that runs, Reason notes what of it aerie ignores.
	Skipped bool   `json:"skipped,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// ParseClaude reads a Claude Code or Codex hooks.json, which another
// agent defines and aerie runs as it is: what aerie does not have is
// reported, hook by hook, rather than refusing the file. It returns the
// hooks that run and every part of the file with what became of it.
//
//   - An event aerie does not have (Notification, PermissionRequest,
//     PostToolUseFailure, …) is skipped with its groups.
//   - A hook of a type other than command (prompt, agent, http), with a
//     field aerie cannot honour without changing what the hook means
//     (if: a condition aerie cannot evaluate, so the hook would run where
//     it was meant not to; async and asyncRewake: its verdict would block
//     where it was meant to be ignored; once; shell), or with any other
//     problem, is skipped; so is a group whose matcher does not compile.
//   - A field that only changes what a person sees (statusMessage, and
//     rewakeMessage and rewakeSummary of a hook skipped anyway) is
//     ignored, and the hook's part notes it.
//
// A hook runs as a hooks/*.yaml one does (bash -c, 60 s by default,
// Claude's matchers with their tool-name aliases, the same JSON protocol).
// In a command, ${VAR} of each variable src.Env sets (CLAUDE_PLUGIN_ROOT
// for a plugin) is replaced by its value, as Claude Code does, unless the
// value holds a character the shell would read inside double quotes; the
// variable is in the hook's environment either way. Problems are what
// refuses the whole file: it is not JSON or YAML, or it is not a mapping
// with a hooks field.
func ParseClaude(data []byte, src Source, workdir string) (hooks []Hook, parts []Part, probs []layer.Problem) {
	parts = []Part{}
	hooks, probs = parseYAML(data, src, workdir, nil, nil, nil, &parts)
	if len(probs) > 0 {
		return nil, nil, probs
	}
	return hooks, parts, nil
}

// ignoredClaude are the fields of a Claude hook that aerie ignores: they
// only change what a person sees, so the hook means the same without them.
var ignoredClaude = map[string]string{
	"statusMessage": "statusMessage is ignored: aerie shows no spinner",
	"rewakeMessage": "rewakeMessage is ignored",
	"rewakeSummary": "rewakeSummary is ignored",
}

// contain, for a hooks.json, turns the problems fn adds into the part p,
// skipped with them as its reason, and reports whether there were none.
// For another file it only calls fn: its problems refuse the file. A
// spent node budget stays a problem of the file.
func (y *yamlParser) contain(p Part, fn func()) bool {
	if y.parts == nil {
		fn()
		return true
	}
	before := len(y.ps.list)
	fn()
	if len(y.ps.list) == before || y.spent {
		return len(y.ps.list) == before
	}
	reasons := make([]string, 0, len(y.ps.list)-before)
	for _, pr := range y.ps.list[before:] {
		f := strings.TrimPrefix(strings.TrimPrefix(partField(pr.Field), p.Field), ".")
		if f == "" {
			reasons = append(reasons, pr.Reason)
			continue
		}
		reasons = append(reasons, f+": "+pr.Reason)
	}
	y.ps.list = y.ps.list[:before]
	p.Skipped, p.Reason = true, strings.Join(reasons, "; ")
	*y.parts = append(*y.parts, p)
	return false
}

// part records a part of a hooks.json that runs.
func (y *yamlParser) part(p Part) {
	if y.parts != nil {
		*y.parts = append(*y.parts, p)
	}
}

// partField is a field as parts name it, without the leading hooks.
func partField(field string) string { return strings.TrimPrefix(field, hooksKey+".") }

// unknownClaudeEvent is the part of an event aerie does not have.
func unknownClaudeEvent(name string) Part {
	return Part{Field: name, Event: name, Skipped: true,
		Reason: fmt.Sprintf("unsupported event: aerie has no event %q (its events are %s); its hooks do not run",
			name, eventNames())}
}

// expandVars replaces ${NAME} in s for each NAME=value of env whose value
// is safe inside double quotes.
func expandVars(s string, env []string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.ContainsAny(v, "\"$`\\") {
			continue
		}
		s = strings.ReplaceAll(s, "${"+k+"}", v)
	}
	return s
}

// skippedClaude are the fields of a Claude hook that aerie cannot honour,
// and why running the hook without them would change what it means.
var skippedClaude = map[string]string{
	"if": "a condition (if) aerie cannot evaluate: the hook is skipped rather than run " +
		"where it was meant not to; test the input in the command instead",
	"async": "asynchronous hooks (async) are not supported: run to completion, its verdict " +
		"would block where it was meant to be ignored",
	"asyncRewake": "asynchronous hooks (asyncRewake) are not supported: run to completion, its verdict " +
		"would act at once where it was meant to wake the agent later",
	"once":  "once is not supported: the hook would run again where it was meant to run once",
	"shell": "shell is not supported: aerie runs command with bash -c",
}

// claudeType checks the type of the Claude hook h at field: only command
// hooks run. A hook of another type is skipped with that one reason,
// rather than with the fields it has that a command hook lacks.
func (y *yamlParser) claudeType(field string, h *yaml.Node) bool {
	for i := 0; i+1 < len(h.Content); i += 2 {
		k, v := y.deref(h.Content[i]), y.deref(h.Content[i+1])
		if k == nil || v == nil || k.Value != typeKey {
			continue
		}
		if y.isString(v) && v.Value != commandType {
			y.add(field+"."+typeKey, v,
				"unsupported hook type %q: aerie runs only command hooks (not prompt, agent or http)", v.Value)
			return false
		}
	}
	return true
}
