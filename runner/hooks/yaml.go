package hooks

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/layer"
)

// nodeBudget bounds the YAML nodes one file may expand to. Aliases let a
// small file name the same node many times over; the budget keeps such a
// file from costing more than a large honest one.
const nodeBudget = 100_000

// ParseYAML reads a hooks/*.yaml file:
//
//	hooks:
//	  PreToolUse:
//	    - matcher: bash
//	      hooks:
//	        - type: command
//	          script: guard.sh
//	          args: [--strict]
//	          timeout: 10
//	          on_failure: block
//
// JSON is YAML, so a Claude or Codex hooks.json parses too; its top-level
// description is accepted and ignored, and its other features are refused
// by name (ParseClaude reads such a file as the other agent means it).
// workdir is the agent's working directory, where the commands
// run. A file with any problem yields no hooks.
//
// A script runs in place, from the layer: layer directories are mounted
// where the executor sees them at the same path, so unlike OpenVaala
// aerie need not copy it to a cache first, and an edit takes effect at
// the next run just the same.
func ParseYAML(data []byte, src Source, workdir string) (hooks []Hook, probs []layer.Problem) {
	return parseYAML(data, src, workdir, nil, nil, nil, nil)
}

// parseYAML is ParseYAML checking scripts through root, when it is the
// open directory src.Root, rather than opening it for each script, and
// compiling matchers through res. scripts, when not nil, keeps the checks
// of scripts read through root, for the other files of the layer: a
// script their hooks share is read once. parts, when not nil, reads the
// file as a Claude or Codex hooks.json (see ParseClaude) and collects its
// parts.
func parseYAML(
	data []byte, src Source, workdir string, root *layer.Dir, res *regexps, scripts map[string]scriptCheck,
	parts *[]Part,
) (hooks []Hook, probs []layer.Problem) {
	ps := &problems{src: src}
	defer func() {
		if r := recover(); r != nil {
			hooks, probs = nil, []layer.Problem{{
				Layer: src.Layer.Name, File: src.File, Reason: fmt.Sprintf("cannot parse YAML: internal error: %v", r),
			}}
		}
	}()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // an empty file declares no hooks
		}
		ps.add("", "invalid YAML: %v", strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, ps.list
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		ps.add("", "more than one YAML document; a hooks file holds one")
		return nil, ps.list
	}
	y := &yamlParser{ps: ps, src: src, workdir: workdir, budget: nodeBudget, res: res, parts: parts}
	if root != nil && root.Path() == src.Root {
		y.root, y.scripts = root, scripts
	}
	top := y.deref(&doc)
	if top != nil && top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = y.deref(top.Content[0])
	}
	if top == nil || isNull(top) {
		return nil, nil
	}
	if top.Kind != yaml.MappingNode {
		ps.add("", "line %d: must be a mapping with a hooks field", top.Line)
		return nil, ps.list
	}
	var out []Hook
	y.fields(top, "", func(key string, v *yaml.Node, field string) {
		switch key {
		case hooksKey:
			out = y.events(v, "hooks")
		case "description":
			if !y.isString(v) {
				y.add(field, v, "must be a string")
			}
		default:
			y.add(field, v, "unknown field; a hooks file has hooks (and an optional description)")
		}
	})
	if len(ps.list) > 0 {
		return nil, ps.list
	}
	return out, nil
}

// DecodeYAMLEvents reads a map of events to hook groups, the value of a
// hooks field: that of a hooks/*.yaml file or of a plugin manifest. field
// names the node in problems ("hooks"). For a plugin, src.Dir and src.Root
// are the plugin's directory and src.Confined is set.
func DecodeYAMLEvents(node *yaml.Node, field string, src Source, workdir string) (hooks []Hook, probs []layer.Problem) {
	ps := &problems{src: src}
	defer func() {
		if r := recover(); r != nil {
			hooks, probs = nil, []layer.Problem{{
				Layer: src.Layer.Name, File: src.File, Field: field,
				Reason: fmt.Sprintf("cannot read hooks: internal error: %v", r),
			}}
		}
	}()
	y := &yamlParser{ps: ps, src: src, workdir: workdir, budget: nodeBudget}
	out := y.events(node, field)
	if len(ps.list) > 0 {
		return nil, ps.list
	}
	return out, nil
}

type yamlParser struct {
	ps      *problems
	src     Source
	workdir string
	budget  int
	spent   bool
	// root, when set, is src.Root open.
	root *layer.Dir
	// res compiles the matchers.
	res *regexps
	// scripts, when set, are the checks of scripts read through root.
	scripts map[string]scriptCheck
	// parts, when set, makes the file a Claude or Codex hooks.json: its
	// parts are collected there, and what aerie does not run skips the
	// part rather than refusing the file (see ParseClaude).
	parts *[]Part
	// notes are what the hook being read has that aerie ignores.
	notes []string
}

// scriptCheck is a script's absolute path and why it cannot be used ("" when it can).
type scriptCheck struct{ abs, reason string }

func (y *yamlParser) add(field string, n *yaml.Node, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if n != nil && n.Line > 0 {
		msg = fmt.Sprintf("line %d: %s", n.Line, msg)
	}
	y.ps.add(field, "%s", msg)
}

// deref follows aliases and charges the budget; nil once it is spent.
func (y *yamlParser) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			return nil
		}
		n = n.Alias
	}
	y.budget--
	if y.budget < 0 {
		if !y.spent {
			y.spent = true
			y.ps.add("", "the file expands to more than %d YAML nodes; split it or drop the aliases", nodeBudget)
		}
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func (y *yamlParser) isString(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!str"
}

// fields calls fn for each key of the mapping n, refusing non-string and
// duplicate keys.
func (y *yamlParser) fields(n *yaml.Node, field string, fn func(key string, v *yaml.Node, field string)) {
	seen := make(map[string]bool)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := y.deref(n.Content[i]), y.deref(n.Content[i+1])
		if k == nil || v == nil {
			return
		}
		if k.Kind != yaml.ScalarNode {
			y.add(field, k, "keys must be plain names")
			continue
		}
		f := k.Value
		if field != "" {
			f = field + "." + k.Value
		}
		if seen[k.Value] {
			y.add(f, k, "appears twice")
			continue
		}
		seen[k.Value] = true
		fn(k.Value, v, f)
	}
}

// seq returns the items of the sequence n.
func (y *yamlParser) seq(n *yaml.Node) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		return nil, false
	}
	items := make([]*yaml.Node, 0, len(n.Content))
	for _, c := range n.Content {
		c = y.deref(c)
		if c == nil {
			return nil, false
		}
		items = append(items, c)
	}
	return items, true
}

func (y *yamlParser) events(n *yaml.Node, field string) []Hook {
	n = y.deref(n)
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		y.add(field, n, "must be a mapping of events to hook groups, such as PreToolUse:")
		return nil
	}
	var out []Hook
	y.fields(n, field, func(name string, v *yaml.Node, f string) {
		ev, ok := knownEvent(name)
		if !ok && y.parts != nil {
			y.part(unknownClaudeEvent(name))
			return
		}
		if !ok {
			y.add(f, v, "unknown event %q; the events are %s", name, eventNames())
			return
		}
		if isNull(v) {
			return
		}
		groups, ok := y.seq(v)
		if !ok {
			y.contain(Part{Field: partField(f), Event: name}, func() {
				y.add(f, v, "must be a list of groups, each with hooks (and an optional matcher)")
			})
			return
		}
		for i, g := range groups {
			out = append(out, y.group(ev, fmt.Sprintf("%s[%d]", f, i), g)...)
		}
	})
	return out
}

func (y *yamlParser) group(ev Event, field string, g *yaml.Node) []Hook {
	var (
		m     Matcher
		hooks []*yaml.Node
	)
	if !y.contain(Part{Field: partField(field), Event: string(ev), Matcher: rawMatcher(g)}, func() {
		m, hooks = y.groupFields(field, g)
	}) {
		return nil
	}
	var out []Hook
	for j, h := range hooks {
		f := fmt.Sprintf("%s.hooks[%d]", field, j)
		p := Part{Field: partField(f), Event: string(ev), Matcher: m.String()}
		var (
			hook Hook
			ok   bool
		)
		y.notes = nil
		if y.contain(p, func() { hook, ok = y.hook(ev, m, f, h) }) && ok {
			p.Reason = strings.Join(y.notes, "; ")
			y.part(p)
			out = append(out, hook)
		}
	}
	return out
}

// rawMatcher is the matcher of the group g as written, for its part.
func rawMatcher(g *yaml.Node) string {
	if g.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(g.Content); i += 2 {
		if k, v := g.Content[i], g.Content[i+1]; k.Value == matcherKey && v.Kind == yaml.ScalarNode && !isNull(v) {
			return v.Value
		}
	}
	return ""
}

// groupFields reads the group g at field: its matcher and its hooks.
func (y *yamlParser) groupFields(field string, g *yaml.Node) (Matcher, []*yaml.Node) {
	if g.Kind != yaml.MappingNode {
		y.add(field, g, "must be a mapping with hooks (and an optional matcher)")
		return Matcher{}, nil
	}
	var (
		m     Matcher
		hooks *yaml.Node
	)
	y.fields(g, field, func(key string, v *yaml.Node, f string) {
		switch key {
		case matcherKey:
			if isNull(v) {
				return
			}
			if v.Kind != yaml.ScalarNode {
				y.add(f, v, "must be a string: a list of names such as bash|apply_patch, or a regular expression")
				return
			}
			var err error
			if m, err = y.res.compileYAML(v.Value); err != nil {
				y.add(f, v, "%v", err)
			}
		case hooksKey:
			hooks = v
		default:
			y.add(f, v, "unknown field; a group has matcher and hooks")
		}
	})
	if hooks == nil || isNull(hooks) {
		y.add(field, g, "missing hooks: a group needs a list of hooks")
		return m, nil
	}
	items, ok := y.seq(hooks)
	if !ok {
		y.add(field+".hooks", hooks, "must be a list of hooks")
		return m, nil
	}
	return m, items
}

// unsupported explains fields of other agents' hook formats that aerie
// does not implement; ignoring them would change what the hook does.
var unsupported = map[string]string{
	"if":            "conditional hooks (if) are not supported; use a matcher, or test the input in the command",
	"async":         "asynchronous hooks are not supported; hooks run to completion before the action",
	"asyncRewake":   "asynchronous hooks (asyncRewake) are not supported; hooks run to completion before the action",
	"rewakeMessage": "asynchronous hooks (rewakeMessage) are not supported",
	"rewakeSummary": "asynchronous hooks (rewakeSummary) are not supported",
	"statusMessage": "statusMessage is not supported",
	"once":          "once is not supported",
	"shell":         "shell is not supported: command runs with bash -c",
	"prompt":        "prompt hooks are not supported: only type command",
	"model":         "prompt and agent hooks are not supported: only type command",
}

func (y *yamlParser) hook(ev Event, m Matcher, field string, h *yaml.Node) (Hook, bool) {
	hook := Hook{
		ID: y.src.File + "#" + strings.TrimPrefix(field, "hooks."), Event: ev, Format: FormatYAML, Matcher: m,
		Shell: "bash", Timeout: DefaultYAMLTimeout, OnFailure: FailAllow, Source: y.src,
	}
	if h.Kind != yaml.MappingNode {
		y.add(field, h, "must be a mapping with type and command or script")
		return hook, false
	}
	if y.parts != nil && !y.claudeType(field, h) {
		return hook, false
	}
	before := len(y.ps.list)
	var (
		typ, command, script *yaml.Node
		args                 []string
		argsNode             *yaml.Node
	)
	y.fields(h, field, func(key string, v *yaml.Node, f string) {
		switch key {
		case typeKey:
			typ = v
		case commandKey:
			command = v
		case "script":
			script = v
		case "args":
			argsNode = v
			args = y.stringList(f, v)
		case "timeout":
			if d, ok := y.timeout(f, v); ok {
				hook.Timeout = d
			}
		case "on_failure":
			switch {
			case !y.isString(v) || (v.Value != string(FailAllow) && v.Value != string(FailBlock)):
				y.add(f, v, "must be allow or block")
			case ev != PreToolUse && ev != UserPromptSubmit:
				y.add(f, v, "is only valid for PreToolUse and UserPromptSubmit hooks")
			default:
				hook.OnFailure = OnFailure(v.Value)
			}
		default:
			if why, ok := ignoredClaude[key]; ok && y.parts != nil {
				y.notes = append(y.notes, why)
			} else if why, ok := skippedClaude[key]; ok && y.parts != nil {
				y.add(f, v, "%s", why)
			} else if why, ok := unsupported[key]; ok {
				y.add(f, v, "%s", why)
			} else {
				y.add(f, v, "unknown field; a hook has type, command or script, args, timeout and on_failure")
			}
		}
	})
	switch {
	case typ == nil:
		y.add(field+".type", h, "missing: write type: command")
	case !y.isString(typ) || typ.Value != commandType:
		y.add(field+".type", typ, "%q is not supported: only type command", typ.Value)
	}
	y.hookCommand(&hook, field, h, command, script, argsNode, args)
	return hook, len(y.ps.list) == before
}

// stringList reads the list of strings v of field f.
func (y *yamlParser) stringList(f string, v *yaml.Node) []string {
	items, ok := y.seq(v)
	if !ok {
		y.add(f, v, "must be a list of strings")
		return nil
	}
	var list []string
	for _, a := range items {
		if a.Kind != yaml.ScalarNode || isNull(a) {
			y.add(f, a, "must be a list of strings")
			return list
		}
		list = append(list, a.Value)
	}
	return list
}

// timeout reads the hook timeout v of field f, a number of seconds.
func (y *yamlParser) timeout(f string, v *yaml.Node) (time.Duration, bool) {
	secs, err := strconv.ParseFloat(v.Value, 64)
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") || err != nil ||
		!(secs > 0) || secs > math.MaxInt64/float64(time.Second) {
		y.add(f, v, "must be a positive number of seconds (the default is 60)")
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

// hookCommand sets what hook runs from the fields of the hook h at field:
// a command line, or a script with its arguments, exactly one of them.
func (y *yamlParser) hookCommand(hook *Hook, field string, h, command, script, argsNode *yaml.Node, args []string) {
	switch {
	case command != nil && script != nil:
		y.add(field, h, "has both command and script; write exactly one")
	case command == nil && script == nil:
		y.add(field, h, "has neither command nor script; write exactly one")
	case command != nil:
		if !y.isString(command) || command.Value == "" {
			y.add(field+".command", command, "must be a non-empty string: the command line run with bash -c")
			break
		}
		if argsNode != nil {
			y.add(field+".args", argsNode, "is only valid with script; put the arguments in the command")
			break
		}
		hook.Command = command.Value
		if y.parts != nil {
			hook.Command = expandVars(hook.Command, y.src.Env)
		}
		if exe, ok := commandExecutable(hook.Command, y.workdir, homeOf(y.src)); ok {
			hook.Executables = []string{exe}
		}
	default:
		if !y.isString(script) || script.Value == "" {
			y.add(field+".script", script, "must be a non-empty string: a path to an executable script")
			break
		}
		path, reason := y.script(script.Value)
		if reason != "" {
			y.add(field+".script", script, "%s", reason)
			break
		}
		words := make([]string, 0, 1+len(args))
		words = append(words, shellQuote(path))
		for _, a := range args {
			words = append(words, shellQuote(a))
		}
		hook.Command = strings.Join(words, " ")
		hook.Executables = []string{path}
	}
}

// script resolves and checks a script path: it must exist, start with a
// shebang and be executable. It returns the absolute path, or why the
// script cannot be used.
func (y *yamlParser) script(p string) (string, string) {
	src := y.src
	if src.Confined {
		if filepath.IsAbs(p) || strings.HasPrefix(p, "~") {
			return "", "must be a path relative to " + confinedTo(src) + ", inside it"
		}
		abs := filepath.Join(src.Dir, p)
		rel, err := filepath.Rel(src.Root, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", "must stay inside " + confinedTo(src)
		}
		root := y.root
		if root == nil {
			var err error
			if root, err = layer.OpenDir(src.Root); err != nil {
				return "", fmt.Sprintf("cannot open %s: %v", src.Root, err)
			}
			defer root.Close()
		}
		// The reasons name the script as written: it is part of the key.
		key := rel + "\x00" + p
		if c, ok := y.scripts[key]; ok {
			return c.abs, c.reason
		}
		f, err := root.Open(filepath.ToSlash(rel))
		if err != nil {
			return "", scriptOpenReason(p, err)
		}
		defer f.Close()
		reason := checkScript(p, f)
		if y.scripts != nil {
			y.scripts[key] = scriptCheck{abs, reason}
		}
		return abs, reason
	}
	var abs string
	switch {
	case strings.HasPrefix(p, "~/"):
		home := homeOf(src)
		if home == "" {
			return "", "cannot expand ~/: no home directory"
		}
		abs = filepath.Join(home, p[2:])
	case filepath.IsAbs(p):
		abs = filepath.Clean(p)
	default:
		abs = filepath.Join(src.Dir, p)
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", scriptOpenReason(p, err)
	}
	defer f.Close() //nolint:errcheck // read-only
	return abs, checkScript(p, f)
}

func confinedTo(src Source) string {
	if src.Layer.NeedsTrust() && src.Root == src.Layer.Dir {
		return "the project layer"
	}
	return "the plugin directory"
}

func scriptOpenReason(p string, err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("script %s does not exist", p)
	}
	return fmt.Sprintf("cannot open script %s: %v", p, errors.Unwrap(err))
}

// checkScript checks that the open file is an executable regular file
// starting with #!.
func checkScript(p string, f interface {
	io.Reader
	Stat() (fs.FileInfo, error)
}) string {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("cannot stat script %s: %v", p, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Sprintf("script %s is not a regular file", p)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Sprintf("script %s is not executable; chmod +x it", p)
	}
	var head [2]byte
	if n, _ := io.ReadFull(f, head[:]); n < 2 || string(head[:]) != "#!" {
		return fmt.Sprintf("script %s does not start with a shebang (#!)", p)
	}
	return ""
}

func homeOf(src Source) string {
	if src.Home != "" {
		return src.Home
	}
	h, _ := os.UserHomeDir()
	return h
}
