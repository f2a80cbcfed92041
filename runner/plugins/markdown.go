package plugins

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/skills"
)

// Agent is one agents/<name>.md of a Claude plugin: a subagent type that
// spawn_agent offers as <plugin>:<name>.
type Agent struct {
	// Name is the agent type, <plugin>:<name>.
	Name string `json:"name"`
	// Description says when to spawn it.
	Description string `json:"description,omitempty"`
	// Tools are aerie's names of the tools its frontmatter's tools field
	// names; nil when the field is absent (the spawning agent's tools).
	Tools []string `json:"tools,omitempty"`
	// Unmapped are the names of tools field that aerie has no tool for.
	Unmapped []string `json:"unmapped,omitempty"`
	// Model is the frontmatter's model, as written. aerie runs every
	// subagent on the session's model.
	Model string `json:"model,omitempty"`
	// Prompt is the body: the subagent's system prompt.
	Prompt string `json:"-"`
	// File is the agent's file.
	File string `json:"file"`
}

// Command is one commands/<name>.md of a Claude plugin: a prompt the user
// sends as /<plugin>:<name> ARGUMENTS.
type Command struct {
	// Name is the command, <plugin>:<name>.
	Name string `json:"name"`
	// Description and ArgumentHint say what it does and takes.
	Description  string `json:"description,omitempty"`
	ArgumentHint string `json:"argument_hint,omitempty"`
	// AllowedTools are aerie's names of the tools allowed-tools names,
	// which the command's turn is narrowed to; nil when the field is
	// absent (every tool).
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// Unmapped are the names of allowed-tools that aerie has no tool for.
	Unmapped []string `json:"unmapped,omitempty"`
	// Body is the prompt template.
	Body string `json:"-"`
	// Root is the plugin's directory, File the command's file.
	Root string `json:"-"`
	File string `json:"file"`
	// Project is set for a plugin of a project layer, whose !`cmd` lines
	// do not run: the repository, not the session's submitter, wrote them.
	Project bool `json:"project,omitempty"`
}

// markdown is a Claude agent or command file: its frontmatter's string
// fields and lists, and its body.
type markdown struct {
	file   string
	fields map[string]*yaml.Node
	body   string
}

// parseMarkdown reads the frontmatter and body of an agent or command
// file. A file without frontmatter is all body. Problems name file and
// the field.
func parseMarkdown(file string, data []byte) (md markdown, err error) {
	defer func() {
		// yaml.v3 has panicked on hostile input before.
		if r := recover(); r != nil {
			md, err = markdown{}, layer.Problem{File: file,
				Reason: fmt.Sprintf("cannot parse the frontmatter: internal error: %v", r)}
		}
	}()
	md = markdown{file: file, fields: map[string]*yaml.Node{}}
	block, body, ok := skills.SplitFrontmatter(data)
	if !ok {
		md.body = strings.TrimSpace(string(data))
		return md, nil
	}
	md.body = strings.TrimSpace(string(body))
	var doc yaml.Node
	if err := yaml.Unmarshal(block, &doc); err != nil {
		// Claude Code reads a frontmatter that is not YAML line by line,
		// and the official plugins rely on it: an unquoted description
		// with ": " in it.
		if fields, ok := plainFields(block); ok {
			md.fields = fields
			return md, nil
		}
		return md, layer.Problem{File: file, Reason: "invalid YAML in the frontmatter (after its first line): " +
			strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind == 0 {
		return md, nil // empty frontmatter
	}
	if top.Kind != yaml.MappingNode {
		return md, layer.Problem{File: file,
			Reason: fmt.Sprintf("line %d: the frontmatter must be a mapping of fields", fileLine(top))}
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if _, dup := md.fields[k.Value]; dup {
			return md, layer.Problem{File: file, Field: k.Value, Reason: fmt.Sprintf("line %d: appears twice", fileLine(k))}
		}
		md.fields[k.Value] = v
	}
	return md, nil
}

// fileLine is the line of the file a frontmatter node is on: the
// frontmatter starts on the file's second line.
func fileLine(n *yaml.Node) int { return n.Line + 1 }

// plainFields reads a frontmatter of "key: value" lines, each value the
// rest of its line (quotes around it dropped), as Claude Code does with a
// frontmatter that is not YAML. ok is false when a line is not of that
// shape.
func plainFields(block []byte) (map[string]*yaml.Node, bool) {
	fields := map[string]*yaml.Node{}
	for i, line := range strings.Split(string(block), "\n") {
		line = strings.TrimRight(line, " \t\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok || !plainKey(key) {
			return nil, false
		}
		if _, dup := fields[key]; dup {
			return nil, false
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
			val = val[1 : len(val)-1]
		}
		fields[key] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: val, Line: i + 1}
	}
	return fields, true
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// str returns the string field key, "" when absent. Numbers and booleans
// are taken as written (Claude reads YAML scalars as strings).
func (md markdown) str(key string) (string, error) {
	v, ok := md.fields[key]
	if !ok || v.Tag == "!!null" {
		return "", nil
	}
	if v.Kind != yaml.ScalarNode {
		return "", layer.Problem{File: md.file, Field: key, Reason: fmt.Sprintf("line %d: must be a string", fileLine(v))}
	}
	return strings.TrimSpace(v.Value), nil
}

// tools reads the tool list key, a YAML list or a comma-separated string,
// as aerie's tool names: each entry's Claude name (a permission pattern
// in parentheses, as in Bash(git status:*), is dropped: the tool is
// allowed whole) mapped through hooks.ToolNames. present is false when
// the field is absent; unmapped are the names aerie has no tool for.
func (md markdown) tools(key string) (names, unmapped []string, present bool, err error) {
	v, ok := md.fields[key]
	if !ok || v.Tag == "!!null" {
		return nil, nil, false, nil
	}
	var items []string
	switch v.Kind {
	case yaml.ScalarNode:
		// A list written on a line read as plain text: ["Read", "Grep"].
		list := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(v.Value), "["), "]")
		for it := range strings.SplitSeq(list, ",") {
			items = append(items, strings.Trim(strings.TrimSpace(it), `"'`))
		}
	case yaml.SequenceNode:
		for _, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				return nil, nil, true, layer.Problem{File: md.file, Field: key,
					Reason: fmt.Sprintf("line %d: each item must be a tool name", fileLine(it))}
			}
			items = append(items, it.Value)
		}
	default:
		return nil, nil, true, layer.Problem{File: md.file, Field: key,
			Reason: fmt.Sprintf("line %d: must be a list of tool names or a comma-separated string", fileLine(v))}
	}
	seen := map[string]bool{}
	names = []string{}
	for _, it := range items {
		it = strings.TrimSpace(it)
		if i := strings.IndexByte(it, '('); i > 0 {
			it = strings.TrimSpace(it[:i])
		}
		if it == "" {
			continue
		}
		mapped, ok := hooks.ToolNames(it)
		if !ok {
			if !seen[it] {
				seen[it] = true
				unmapped = append(unmapped, it)
			}
			continue
		}
		for _, n := range mapped {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names, unmapped, true, nil
}

// componentName is the name of the agent or command in file of plugin:
// plugin:<name>, the name its file's base name without .md.
func componentName(plugin, file string) string {
	return plugin + ":" + strings.TrimSuffix(path.Base(file), ".md")
}

// ParseAgent reads an agents/<name>.md of plugin. Its frontmatter's name
// names the agent (the file's name when absent); the body, its system
// prompt, must not be empty.
func ParseAgent(plugin, file string, data []byte) (Agent, error) {
	md, err := parseMarkdown(file, data)
	if err != nil {
		return Agent{}, err
	}
	a := Agent{Name: componentName(plugin, file), Prompt: md.body, File: file}
	name, err := md.str("name")
	if err != nil {
		return Agent{}, err
	}
	if name != "" {
		if !extensions.ValidPersonaName(name) {
			return Agent{}, layer.Problem{File: file, Field: "name", Reason: fmt.Sprintf(
				"%q is not a valid agent name: use letters, digits, '_', '.' and '-', such as code-reviewer", name)}
		}
		a.Name = plugin + ":" + name
	}
	if a.Description, err = md.str("description"); err != nil {
		return Agent{}, err
	}
	if a.Model, err = md.str("model"); err != nil {
		return Agent{}, err
	}
	names, unmapped, present, err := md.tools("tools")
	if err != nil {
		return Agent{}, err
	}
	if present {
		a.Tools, a.Unmapped = names, unmapped
	}
	if a.Prompt == "" {
		return Agent{}, layer.Problem{File: file,
			Reason: "the body is empty; write the agent's system prompt after the frontmatter"}
	}
	return a, nil
}

// ParseCommand reads a commands/<name>.md of plugin, whose root is the
// plugin's directory.
func ParseCommand(plugin, root, file string, data []byte) (Command, error) {
	md, err := parseMarkdown(file, data)
	if err != nil {
		return Command{}, err
	}
	c := Command{Name: componentName(plugin, file), Body: md.body, Root: root, File: file}
	if !extensions.ValidPersonaName(strings.TrimPrefix(c.Name, plugin+":")) {
		return Command{}, layer.Problem{File: file, Reason: "the file name is not a valid command name: " +
			"use letters, digits, '_', '.' and '-', such as review-pr.md"}
	}
	if c.Description, err = md.str("description"); err != nil {
		return Command{}, err
	}
	if c.ArgumentHint, err = md.str("argument-hint"); err != nil {
		return Command{}, err
	}
	names, unmapped, present, err := md.tools("allowed-tools")
	if err != nil {
		return Command{}, err
	}
	if present {
		c.AllowedTools, c.Unmapped = names, unmapped
	}
	if c.Body == "" {
		return Command{}, layer.Problem{File: file,
			Reason: "the body is empty; write the command's prompt after the frontmatter"}
	}
	return c, nil
}

// readMarkdown reads the *.md files of the directory dir of the plugin at
// rel (root on disk), in name order, through parse, and reports each:
// active with parse's note, or skipped with its problem.
func readMarkdown(fsys fs.FS, rel, root, dir string, c Component,
	parse func(file string, data []byte) (name, note string, err error),
) []ComponentState {
	des, err := fs.ReadDir(fsys, path.Join(rel, dir))
	if err != nil {
		return []ComponentState{{Component: c, Path: filepath.Join(root, dir), Status: layer.StatusSkipped,
			Reason: fmt.Sprintf("cannot read the directory: %v", err)}}
	}
	var out []ComponentState
	for _, de := range des {
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".md") {
			continue
		}
		file := filepath.Join(root, dir, de.Name())
		s := ComponentState{Component: c, Path: file, Status: layer.StatusActive}
		data, err := readLimited(fsys, path.Join(rel, dir, de.Name()))
		if err != nil {
			err = layer.Problem{File: file, Reason: err.Error()}
		} else {
			s.Name, s.Reason, err = parse(file, data)
		}
		if err != nil {
			s.Status, s.Reason = layer.StatusSkipped, layer.SanitizeReason(err.Error())
		}
		out = append(out, s)
	}
	return out
}

// loadAgents reads the plugin's agents/*.md into p.Agents.
func loadAgents(fsys fs.FS, rel string, p *Plugin) []ComponentState {
	seen := map[string]string{}
	return readMarkdown(fsys, rel, p.Root, "agents", ComponentAgents, func(file string, data []byte) (
		string, string, error,
	) {
		a, err := ParseAgent(p.Name, file, data)
		if err != nil {
			return "", "", err
		}
		if prev, ok := seen[a.Name]; ok {
			return a.Name, "", layer.Problem{File: file, Field: "name",
				Reason: fmt.Sprintf("%s already names the agent %s; rename one of them", prev, a.Name)}
		}
		seen[a.Name] = file
		p.Agents = append(p.Agents, a)
		var notes []string
		if len(a.Unmapped) > 0 {
			notes = append(notes, "runs without "+strings.Join(a.Unmapped, ", ")+": aerie has no such tool")
		}
		if a.Model != "" && a.Model != "inherit" {
			notes = append(notes, fmt.Sprintf("model %q is not used: a subagent runs on the session's model", a.Model))
		}
		return a.Name, strings.Join(notes, "; "), nil
	})
}

// loadCommands reads the plugin's commands/*.md into p.Commands.
func loadCommands(fsys fs.FS, rel string, p *Plugin, project bool) []ComponentState {
	return readMarkdown(fsys, rel, p.Root, "commands", ComponentCommands, func(file string, data []byte) (
		string, string, error,
	) {
		c, err := ParseCommand(p.Name, p.Root, file, data)
		if err != nil {
			return "", "", err
		}
		c.Project = project
		p.Commands = append(p.Commands, c)
		note := ""
		if len(c.Unmapped) > 0 {
			note = "allowed-tools " + strings.Join(c.Unmapped, ", ") + ": aerie has no such tool"
		}
		return c.Name, note, nil
	})
}
