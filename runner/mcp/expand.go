package mcp

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/pluginroot"
)

// A Claude or Codex plugin's servers (its .mcp.json, or the mcpServers of
// its manifest) are written in Claude's syntax, where ${VAR} and
// ${VAR:-default} in command, args, env, url and headers expand to
// environment variables: that is how such a plugin takes its credentials.
// aerie's own declarations use values as written (the spec's rule); only
// the plugins' go through Variables.

// Variables resolve the ${VAR} of a Claude or Codex plugin's servers.
// Every value read is a credential as far as aerie knows: it is used only
// where the declaration puts it (a stdio server's own process, an http
// server's requests from the runner), and masked in what aerie reports.
type Variables struct {
	// Getenv reads a variable; "" counts as unset, so that ${VAR:-default}
	// falls back as in the shell. Nil reads none.
	Getenv func(string) string
	// Restricted limits the names that resolve to Secrets: in a pod, only
	// the variables the session's secrets fill (runconfig.Config.Secrets)
	// are read from the runner's environment, which holds aerie's own
	// credentials too. Locally (aerie run) every variable resolves.
	Restricted bool
	Secrets    []string
	// Denied, when set, is why no variable resolves for these
	// declarations (a plugin of a project layer: the repository wrote
	// it); defaults still apply.
	Denied string
	// NoStdio, when set, is why no stdio server of these declarations
	// runs (a plugin of a project layer: the repository chose the
	// command); its other servers are used.
	NoStdio string
}

// Deny returns v resolving no variable, for the reason given.
func (v Variables) Deny(reason string) Variables { return Variables{Denied: reason} }

// LocalVariables resolve from the environment of aerie run.
func LocalVariables(getenv func(string) string) Variables { return Variables{Getenv: getenv} }

// PodVariables resolve only the names of secrets, from getenv (the
// runner's environment, where the pod's spec put them).
func PodVariables(getenv func(string) string, secrets []string) Variables {
	return Variables{Getenv: getenv, Restricted: true, Secrets: slices.Clone(secrets)}
}

// Resolved is what one declaration read through Variables: the names, in
// the order first read, and their values, which only the declaration's
// own use may see. It prints as its names.
type Resolved struct {
	Names  []string `json:"names,omitempty"`
	Values []string `json:"-"`
	// Uses say where each was put: "${TOKEN} in headers.Authorization".
	Uses []string `json:"uses,omitempty"`
}

func (r *Resolved) add(name, value string) {
	if !slices.Contains(r.Names, name) {
		r.Names = append(r.Names, name)
		r.Values = append(r.Values, value)
	}
}

// String implements fmt.Stringer: the names, never the values.
func (r Resolved) String() string { return "[" + strings.Join(r.Names, " ") + "]" }

// GoString implements fmt.GoStringer, for %#v: the names only.
func (r Resolved) GoString() string { return fmt.Sprintf("mcp.Resolved{Names: %#v}", r.Names) }

// Mask replaces every value r read in s with ${NAME}: what an error or a
// problem quotes from a declaration shows the variable, never its value.
func (r Resolved) Mask(s string) string { return maskValues(s, r.Names, r.Values, 1) }

// minResultMask is the shortest value masked in a tool's result: a
// server's answer is its own data, and masking a short value there (a
// "1", a "true") would garble it; a credential is longer.
const minResultMask = 8

// maskResult masks the values in a server's answer, a backstop for a
// server that echoes its credential.
func (r Resolved) maskResult(s string) string { return maskValues(s, r.Names, r.Values, minResultMask) }

// maskValues replaces, longest first, each value of at least min bytes
// in s with ${its name}.
func maskValues(s string, names, values []string, minLen int) string {
	if len(values) == 0 || s == "" {
		return s
	}
	order := make([]int, len(values))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(values[b]) - len(values[a]) })
	for _, i := range order {
		if len(values[i]) >= minLen {
			s = strings.ReplaceAll(s, values[i], "${"+names[i]+"}")
		}
	}
	return s
}

// Expand returns s with ${CLAUDE_PLUGIN_ROOT} (and ${AERIE_PLUGIN_ROOT},
// ${OPENVAALA_PLUGIN_ROOT}) replaced by root and every other ${VAR} or
// ${VAR:-default} by the variable's value, or the default when the
// variable is unset or empty, adding what it read to got. A default is
// taken as written, and a value is not expanded again. A ${VAR} that does
// not resolve and has no default is an error naming it and the fix;
// the error never holds a value.
func (v Variables) Expand(s, root string, got *Resolved) (string, error) {
	out, _, err := v.expand(s, root, got)
	return out, err
}

// expand is Expand, also returning the names of the variables s read.
func (v Variables) expand(s, root string, got *Resolved) (string, []string, error) {
	if !strings.Contains(s, "${") {
		return s, nil, nil
	}
	var missing, read []string
	out := expansion().ReplaceAllStringFunc(s, func(m string) string {
		sub := expansion().FindStringSubmatch(m)
		name, def, hasDefault := sub[1], "", sub[2] != ""
		if hasDefault {
			def = sub[2][len(":-"):]
		}
		if root != "" && slices.Contains(pluginroot.Claude, name) {
			return root
		}
		if value := v.lookup(name); value != "" {
			got.add(name, value)
			if !slices.Contains(read, name) {
				read = append(read, name)
			}
			return value
		}
		if hasDefault {
			return def
		}
		if !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return m
	})
	if len(missing) > 0 {
		return "", nil, v.unresolved(missing)
	}
	return out, read, nil
}

// expandNode expands the scalars of n in place, adding to got what they
// read and where (field, the path of n in the declaration), and to ps the
// variables that do not resolve, under path (n's in the file).
func (v Variables) expandNode(n *yaml.Node, path, field, root string, got *Resolved, ps *problems) {
	switch n.Kind {
	case yaml.ScalarNode:
		out, read, err := v.expand(n.Value, root, got)
		if err != nil {
			ps.add(path, "%v", err)
			return
		}
		n.Value = out
		for _, name := range read {
			got.Uses = append(got.Uses, "${"+name+"} in "+field)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			v.expandNode(c, fmt.Sprintf("%s[%d]", path, i), fmt.Sprintf("%s[%d]", field, i), root, got, ps)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			v.expandNode(n.Content[i+1], path+"."+k, field+"."+k, root, got, ps)
		}
	}
}

// lookup reads name, "" when it does not resolve.
func (v Variables) lookup(name string) string {
	if v.Getenv == nil || v.Denied != "" || (v.Restricted && !slices.Contains(v.Secrets, name)) {
		return ""
	}
	return v.Getenv(name)
}

// unresolved is the error of the variables that did not resolve: what
// to do about each depends on where the session runs.
func (v Variables) unresolved(names []string) error {
	reasons := make([]string, len(names))
	for i, name := range names {
		switch {
		case v.Denied != "":
			reasons[i] = fmt.Sprintf("${%s} is not resolved: %s", name, v.Denied)
		case !v.Restricted:
			reasons[i] = fmt.Sprintf("${%s} is not set in the environment of aerie run; "+
				"set %s there, or give it a default (${VAR:-value})", name, name)
		case slices.Contains(v.Secrets, name):
			reasons[i] = fmt.Sprintf("${%s} is one of the session's secrets but is empty in the runner's environment; "+
				"check the Secret key spec.secrets names for %s", name, name)
		default:
			reasons[i] = fmt.Sprintf("${%s} is not one of the session's secrets; "+
				"add {name: %s, secretKeyRef: {name: <secret>, key: <key>}} to spec.secrets, "+
				"or give it a default (${VAR:-value})", name, name)
		}
	}
	return fmt.Errorf("%s", strings.Join(reasons, "; "))
}
