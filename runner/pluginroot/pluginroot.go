// Package pluginroot is the one home of a plugin's root directory as its
// declarations see it: the variables that name it (aerie's
// AERIE_PLUGIN_ROOT, the OpenVaala alias and Claude Code's
// CLAUDE_PLUGIN_ROOT), their ${VAR} placeholders, and the environment a
// plugin's processes get them in. It imports nothing of aerie's, so that
// runner/plugins, runner/mcp, runner/hooks and runner/session share it.
package pluginroot

import "strings"

// The variables that carry a plugin's directory.
const (
	// Var is aerie's name.
	Var = "AERIE_PLUGIN_ROOT"
	// VarOpenVaala is the OpenVaala alias of Var.
	VarOpenVaala = "OPENVAALA_PLUGIN_ROOT"
	// VarClaude is Claude Code's name, for a Claude or Codex plugin.
	VarClaude = "CLAUDE_PLUGIN_ROOT"
)

// Native are the variables of an aerie plugin, aerie's name first.
var Native = []string{Var, VarOpenVaala}

// Claude are the variables of a Claude or Codex plugin: Claude's name,
// then aerie's, which such a plugin's processes get as well.
var Claude = []string{VarClaude, Var, VarOpenVaala}

// Expand returns s with ${NAME} of each of names replaced by root; nothing
// else is expanded, and root is not expanded again.
func Expand(s, root string, names []string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	pairs := make([]string, 0, 2*len(names))
	for _, n := range names {
		pairs = append(pairs, "${"+n+"}", root)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// Environ is names set to root, as KEY=VALUE entries in their order.
func Environ(root string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n + "=" + root
	}
	return out
}

// Env returns env (nil is empty) with each of names set to root unless env
// sets it itself, and each value of env expanded as Expand does: a
// process's environment, whose explicit entries win.
func Env(env map[string]string, root string, names []string) map[string]string {
	out := make(map[string]string, len(env)+len(names))
	for _, n := range names {
		out[n] = root
	}
	for k, v := range env {
		out[k] = Expand(v, root, names)
	}
	return out
}

// ExpandEach returns a new slice of ss, each expanded as Expand does;
// never nil.
func ExpandEach(ss []string, root string, names []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Expand(s, root, names)
	}
	return out
}
