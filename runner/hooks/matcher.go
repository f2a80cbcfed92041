package hooks

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Matcher decides which names a hook group applies to. The zero Matcher
// matches everything.
type Matcher struct {
	pattern string
	// names is a YAML list of exact names; re a regular expression.
	// Neither: everything matches.
	names map[string]bool
	re    *regexp.Regexp
	// aliases makes a name match through the names other agents give
	// the same tool (YAML only).
	aliases bool
}

// String returns the pattern as written.
func (m Matcher) String() string { return m.pattern }

// MarshalJSON writes the pattern as written.
func (m Matcher) MarshalJSON() ([]byte, error) { return json.Marshal(m.pattern) }

// All reports whether the matcher matches every name.
func (m Matcher) All() bool { return m.names == nil && m.re == nil }

// Match reports whether the matcher selects name. A YAML matcher also
// selects name when it selects one of name's aliases, so that Bash
// selects bash.
func (m Matcher) Match(name string) bool {
	if m.All() {
		return true
	}
	if m.match(name) {
		return true
	}
	if m.aliases {
		for _, alias := range aliasesOf[name] {
			if m.match(alias) {
				return true
			}
		}
	}
	return false
}

func (m Matcher) match(name string) bool {
	if m.names != nil {
		return m.names[name]
	}
	return m.re.MatchString(name)
}

// aliasesOf maps aerie's tool names to the names hooks written for other
// agents use for them. The OpenVaala spec maps Write and Edit to
// apply_patch; aerie also has Osprey's write_file and edit_file, which
// write files just as well, so a guard written for Write or Edit covers
// them too rather than leaving them as a way around it. The rest are
// Claude Code's names for the tools aerie has too, which Claude plugins'
// hooks, agents and commands name.
var aliasesOf = map[string][]string{
	"bash":           {"Bash"},
	"process":        {"BashOutput", "KillShell"},
	"apply_patch":    {"Write", "Edit", "MultiEdit"},
	"write_file":     {"Write"},
	"edit_file":      {"Edit", "MultiEdit"},
	"read_file":      {"Read"},
	"grep":           {"Grep"},
	"find_files":     {"Glob"},
	"list_directory": {"LS"},
	"spawn_agent":    {"Agent", "Task"},
	"skill":          {"Skill"},
}

// aliasedBy inverts aliasesOf: another agent's tool name → aerie's names
// for it, sorted.
var aliasedBy = sync.OnceValue(func() map[string][]string {
	out := map[string][]string{}
	for name, aliases := range aliasesOf {
		for _, a := range aliases {
			out[a] = append(out[a], name)
		}
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out
})

// ToolNames returns aerie's names for the tool another agent calls name
// (Claude Code's Read is read_file; its Edit is edit_file and
// apply_patch), through the aliases hook matchers use, so that a Claude
// plugin's tools list means the same tools as its hooks' matchers. An
// aerie name, or any name without an alias (mcp__server__tool), is itself;
// ok is false when name is another agent's that aerie has no tool for.
func ToolNames(name string) (names []string, ok bool) {
	if names, ok := aliasedBy()[name]; ok {
		return slices.Clone(names), true
	}
	if name == "" || name[0] >= 'A' && name[0] <= 'Z' {
		// Claude's tool names are capitalized; aerie's never are.
		return nil, false
	}
	return []string{name}, true
}

// compileTOML compiles a hooks.toml matcher: an anchored regular
// expression over the complete name. Empty matches everything, as a
// missing matcher does.
func compileTOML(pattern string) (Matcher, error) {
	if pattern == "" {
		return Matcher{}, nil
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return Matcher{}, fmt.Errorf("invalid regular expression %q: %v", pattern, regexpReason(err))
	}
	return Matcher{pattern: pattern, re: re}, nil
}

// compileYAML compiles a YAML matcher: empty or * matches everything; a
// pattern of letters, digits, _, - and | is a list of exact names;
// anything else is an unanchored regular expression.
func compileYAML(pattern string) (Matcher, error) { return (*regexps)(nil).compileYAML(pattern) }

// compileYAML is compileYAML through c.
func (c *regexps) compileYAML(pattern string) (Matcher, error) {
	if pattern == "" || pattern == "*" {
		return Matcher{pattern: pattern}, nil
	}
	if isNameList(pattern) {
		names := make(map[string]bool)
		for n := range strings.SplitSeq(pattern, "|") {
			if n != "" {
				names[n] = true
			}
		}
		return Matcher{pattern: pattern, names: names, aliases: true}, nil
	}
	re, err := c.compile(pattern)
	if err != nil {
		return Matcher{}, fmt.Errorf("invalid regular expression %q: %v", pattern, regexpReason(err))
	}
	return Matcher{pattern: pattern, re: re, aliases: true}, nil
}

// regexps remembers the regular expressions one Load compiled: the same
// matcher ("mcp__.*", "Write|Edit") recurs across the files of every
// layer, and a *regexp.Regexp is safe for concurrent use. A nil *regexps
// remembers nothing.
type regexps struct {
	mu sync.Mutex
	m  map[string]*regexp.Regexp
}

// compile is regexp.Compile, remembering what compiled.
func (c *regexps) compile(expr string) (*regexp.Regexp, error) {
	if c == nil {
		return regexp.Compile(expr)
	}
	c.mu.Lock()
	re, ok := c.m[expr]
	c.mu.Unlock()
	if ok {
		return re, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[string]*regexp.Regexp)
	}
	c.m[expr] = re
	c.mu.Unlock()
	return re, nil
}

func isNameList(p string) bool {
	for _, r := range p {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '|':
		default:
			return false
		}
	}
	return true
}

// regexpReason drops the "error parsing regexp: " prefix the regexp
// package puts before its reason.
func regexpReason(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}
