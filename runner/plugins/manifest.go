// Package plugins discovers, loads and installs plugins: directories that
// bundle skills, hooks and MCP servers under one name.
//
// A plugin describes itself with one manifest at its root, the first of:
//
//	.aerie-plugin/plugin.yaml      native: name, version, description, skills, hooks, mcp_servers
//	.openvaala-plugin/plugin.yaml  the same format, an alias read after .aerie-plugin
//	.codex-plugin/plugin.json      Codex: name, version, description, skills only
//	.claude-plugin/plugin.json     Claude: name, version, description, skills only
//
// Codex and Claude plugins are used as they ship, and their manifests are
// never modified: their skills load by default, and their agents, commands
// and MCP servers (.mcp.json, handed to runner/mcp as Plugin.ClaudeMCP)
// when the components name them. A plugin's name is lowercase letters, digits and single hyphens,
// equal to its directory's name, and never "skill" (which would make
// /skill:<name> ambiguous).
//
// Plugins live in the plugins/ directory of each extension layer; those
// installed with aerie plugin install live in $AERIE_HOME/plugins/<name>
// (the home layer's plugins/ directory) with an .aerie-install.yaml that
// records where they came from and whether they are enabled. A plugin can
// also be installed from a marketplace, a Claude or Codex catalog of plugins
// (marketplace.go parses it, markets.go adds, updates and removes
// marketplaces and installs their entries); the record then names the
// marketplace and the entry, and carries the manifest an entry gives a
// plugin that has none of its own (Claude's strict: false). When two layers
// hold a plugin of the same name the nearest wins.
//
// Load turns the layers into the enabled plugins' contributions — skill
// roots namespaced by the plugin's name, hook declarations, MCP server
// declarations with ${AERIE_PLUGIN_ROOT} substituted — and a report of every
// plugin directory found and what became of it. A broken manifest in a layer
// the user controls is an error naming the file and the field; in a project
// layer it is skipped with that reason, like every other project artifact.
package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/layer"
)

// Format is the kind of manifest a plugin was read from.
type Format string

// Manifest formats, in the order they are looked for.
const (
	FormatAerie     Format = "aerie"
	FormatOpenVaala Format = "openvaala"
	FormatCodex     Format = "codex"
	FormatClaude    Format = "claude"
)

// ManifestFile is one manifest location, relative to a plugin's root.
type ManifestFile struct {
	Path   string
	Format Format
}

// ManifestFiles are the manifests a plugin may ship, in precedence order:
// the first present one is used and the others are ignored.
var ManifestFiles = []ManifestFile{
	{".aerie-plugin/plugin.yaml", FormatAerie},
	{".openvaala-plugin/plugin.yaml", FormatOpenVaala},
	{".codex-plugin/plugin.json", FormatCodex},
	{".claude-plugin/plugin.json", FormatClaude},
}

// MaxManifestSize bounds a manifest read: plugins come from places anyone
// can publish to.
const MaxManifestSize = 1 << 20

// DefaultSkillsDir is where a plugin's skills are found unless its manifest
// says otherwise (native) or in addition to what it lists (Codex, Claude).
const DefaultSkillsDir = "skills"

var (
	namePattern  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`) })
	mcpIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })
)

// ReservedName cannot name a plugin: /skill:<name> is the prompt syntax
// for attaching a skill.
const ReservedName = "skill"

// CheckName reports why name cannot name a plugin, or nil.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("name is empty; use lowercase letters, digits and single hyphens")
	case name == ReservedName:
		return fmt.Errorf("name %q is reserved; choose another name", name)
	case !namePattern().MatchString(name):
		return fmt.Errorf("name %q must be lowercase letters, digits and single hyphens, like code-review", name)
	}
	return nil
}

// Manifest is what a plugin manifest declares, before it is placed in a
// directory: paths are as written, relative to the plugin root.
type Manifest struct {
	Format      Format
	Name        string
	Version     string
	Description string
	// Skills are the skill paths, relative to the plugin root and cleaned.
	// A native manifest gives one (default "skills"); Codex and Claude
	// manifests give "skills" followed by the paths they list.
	Skills []string
	// Hooks is the native manifest's hooks node, decoded by Load against
	// the plugin's directory; nil when absent.
	Hooks *yaml.Node
	// MCPServers are the native manifest's servers, before substitution.
	MCPServers []MCPServer
	// MCPFiles are the files of Claude-format servers (.mcp.json) a Codex
	// or Claude manifest's mcpServers names, cleaned; MCPInline is the
	// servers it declares itself, as JSON. Neither includes the plugin's
	// .mcp.json, which is read whatever the manifest says.
	MCPFiles  []string
	MCPInline []byte
}

// ParseManifest parses a manifest of the given format. file names it in
// errors, which are layer.Problems: the file, the field ("" for the whole
// file, "mcp_servers[1].url") and what is wrong. A manifest is parsed
// apart from its layer (an install reads one from its source), so their
// Layer is empty.
func ParseManifest(format Format, file string, data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, layer.Problem{File: file, Reason: fmt.Sprintf("manifest is larger than %d bytes", MaxManifestSize)}
	}
	switch format {
	case FormatAerie, FormatOpenVaala:
		return parseNative(format, file, data)
	case FormatCodex, FormatClaude:
		return parseJSON(format, file, data)
	}
	return nil, layer.Problem{File: file, Reason: fmt.Sprintf("unknown manifest format %q", format)}
}

// The manifests' keys that more than one step of their parsing names, and
// YAML's tag of a null value.
const (
	fieldName       = "name"
	fieldVersion    = "version"
	fieldType       = "type"
	fieldID         = "id"
	fieldURL        = "url"
	fieldMCPServers = "mcp_servers"
	fieldCommand    = "command"
	fieldHooks      = "hooks"
	fieldSource     = "source"
	fieldPath       = "path"
	jsonNull        = "null"
	tagNull         = "!!null"
)

// nativeFields are the keys a native manifest may have; any other is an
// error, so that a misspelt mcp_servers is not silently ignored.
var nativeFields = map[string]bool{
	fieldName: true, fieldVersion: true, "description": true, "skills": true, fieldHooks: true, fieldMCPServers: true,
}

func parseNative(format Format, file string, data []byte) (m *Manifest, err error) {
	fail := func(field string, n *yaml.Node, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		if n != nil && n.Line > 0 {
			msg = fmt.Sprintf("line %d: %s", n.Line, msg)
		}
		return layer.Problem{File: file, Field: field, Reason: msg}
	}
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, layer.Problem{File: file, Reason: fmt.Sprintf("cannot read manifest: %v", r)}
		}
	}()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, layer.Problem{File: file, Reason: fmt.Sprintf("invalid YAML: %v", err)}
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fail("", nil, "the manifest must be a YAML mapping with at least a name")
	}
	root := doc.Content[0]
	m = &Manifest{Format: format, Skills: []string{DefaultSkillsDir}}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := k.Value
		if !nativeFields[key] {
			return nil, fail(key, k, "unknown field; the fields are name, version, description, skills, hooks, mcp_servers")
		}
		if seen[key] {
			return nil, fail(key, k, "field given twice")
		}
		seen[key] = true
		if v.Kind == yaml.AliasNode {
			return nil, fail(key, v, "aliases are not allowed in a plugin manifest")
		}
		switch key {
		case fieldName, fieldVersion, "description":
			s, ok := scalarString(v)
			if !ok {
				return nil, fail(key, v, "must be a string")
			}
			switch key {
			case fieldName:
				m.Name = s
			case fieldVersion:
				m.Version = s
			default:
				m.Description = s
			}
		case "skills":
			paths, err := skillPaths(v)
			if err != nil {
				return nil, fail(key, v, "%v", err)
			}
			m.Skills = paths
		case fieldHooks:
			if v.Kind == yaml.ScalarNode && v.Tag == tagNull {
				continue
			}
			if v.Kind != yaml.MappingNode {
				return nil, fail(key, v, "must be a mapping of events to hook groups, as in hooks/*.yaml")
			}
			m.Hooks = v
		case fieldMCPServers:
			servers, err := decodeServers(file, v)
			if err != nil {
				return nil, err
			}
			m.MCPServers = servers
		}
	}
	if !seen[fieldName] {
		return nil, fail(fieldName, nil, "name is required")
	}
	if err := CheckName(m.Name); err != nil {
		return nil, fail(fieldName, nil, "%v", err)
	}
	return m, nil
}

func scalarString(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == tagNull {
		return "", false
	}
	return n.Value, true
}

// skillPaths reads a skills value: one path or a list of paths.
func skillPaths(n *yaml.Node) ([]string, error) {
	var raw []string
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == tagNull {
			return []string{DefaultSkillsDir}, nil
		}
		raw = []string{n.Value}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			s, ok := scalarString(c)
			if !ok {
				return nil, errors.New("must be a path or a list of paths")
			}
			raw = append(raw, s)
		}
	default:
		return nil, errors.New("must be a path or a list of paths")
	}
	out := make([]string, 0, len(raw))
	for _, p := range raw {
		c, err := cleanRel(p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// cleanRel cleans a manifest path that must stay inside the plugin.
func cleanRel(p string) (string, error) {
	if p == "" {
		return "", errors.New("a path is empty")
	}
	if path.IsAbs(p) || strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("path %q must be relative to the plugin root", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the plugin directory", p)
	}
	return c, nil
}

// serverFields are an mcp_servers entry's keys: those of
// mcp_servers/<id>.yaml without executors (plugin servers run locally).
var serverFields = map[string]bool{
	fieldID: true, fieldType: true, fieldCommand: true, "args": true, "env": true, fieldURL: true, "headers": true,
	"tools": true, "required": true, "disabled": true, "startup_timeout_seconds": true, "tool_timeout_seconds": true,
}

func decodeServers(file string, n *yaml.Node) ([]MCPServer, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == tagNull {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, layer.Problem{File: file, Field: fieldMCPServers,
			Reason: fmt.Sprintf("line %d: must be a list of servers", n.Line)}
	}
	var out []MCPServer
	ids := map[string]int{}
	for i, e := range n.Content {
		field := fmt.Sprintf("%s[%d]", fieldMCPServers, i)
		fail := func(sub string, at *yaml.Node, format string, args ...any) error {
			f := field
			if sub != "" {
				f += "." + sub
			}
			return layer.Problem{File: file, Field: f, Reason: fmt.Sprintf("line %d: ", at.Line) + fmt.Sprintf(format, args...)}
		}
		if e.Kind != yaml.MappingNode {
			return nil, fail("", e, "must be a mapping with id and type")
		}
		for j := 0; j+1 < len(e.Content); j += 2 {
			k := e.Content[j]
			if k.Value == "executors" {
				return nil, fail(k.Value, k, "a plugin's MCP servers run locally; "+
					"to run one elsewhere, add mcp_servers/<id>.yaml with the same id")
			}
			if !serverFields[k.Value] {
				return nil, fail(k.Value, k, "unknown field")
			}
			if e.Content[j+1].Kind == yaml.AliasNode {
				return nil, fail(k.Value, k, "aliases are not allowed in a plugin manifest")
			}
		}
		var s MCPServer
		if err := e.Decode(&s); err != nil {
			return nil, fail("", e, "%v", err)
		}
		if err := s.validate(); err != nil {
			return nil, fail(err.field, e, "%s", err.reason)
		}
		if prev, dup := ids[s.ID]; dup {
			return nil, fail(fieldID, e, "id %q is already declared by mcp_servers[%d]", s.ID, prev)
		}
		ids[s.ID] = i
		s.applyDefaults()
		out = append(out, s)
	}
	return out, nil
}

type fieldErr struct{ field, reason string }

func (s *MCPServer) validate() *fieldErr {
	switch {
	case s.ID == "":
		return &fieldErr{fieldID, "id is required"}
	case !mcpIDPattern().MatchString(s.ID) || strings.Contains(s.ID, "__"):
		return &fieldErr{fieldID, fmt.Sprintf("id %q must be letters, digits, - and _ only, without __", s.ID)}
	}
	switch s.Type {
	case TransportStdio:
		if s.Command == "" {
			return &fieldErr{fieldCommand, "command is required for a stdio server"}
		}
		if s.URL != "" || s.Headers != nil {
			return &fieldErr{fieldURL, "url and headers are for http and sse servers, not stdio"}
		}
	case TransportHTTP, TransportSSE:
		if s.Command != "" || s.Args != nil || s.Env != nil {
			return &fieldErr{fieldCommand, "command, args and env are for stdio servers, not " + string(s.Type)}
		}
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return &fieldErr{fieldURL, fmt.Sprintf("url %q must be an http(s) URL", s.URL)}
		}
	case "":
		return &fieldErr{fieldType, "type is required: stdio, http or sse"}
	default:
		return &fieldErr{fieldType, fmt.Sprintf("type %q must be stdio, http or sse", s.Type)}
	}
	if s.StartupTimeoutSeconds < 0 {
		return &fieldErr{"startup_timeout_seconds", "must be positive"}
	}
	if s.ToolTimeoutSeconds < 0 {
		return &fieldErr{"tool_timeout_seconds", "must be positive"}
	}
	return nil
}

func (s *MCPServer) applyDefaults() {
	if s.StartupTimeoutSeconds == 0 {
		s.StartupTimeoutSeconds = DefaultStartupTimeoutSeconds
	}
	if s.ToolTimeoutSeconds == 0 {
		s.ToolTimeoutSeconds = DefaultToolTimeoutSeconds
	}
}

// jsonManifest is the part of a Codex or Claude manifest aerie reads.
type jsonManifest struct {
	Name        *string         `json:"name"`
	Version     json.RawMessage `json:"version"`
	Description json.RawMessage `json:"description"`
	Skills      json.RawMessage `json:"skills"`
	MCPServers  json.RawMessage `json:"mcpServers"`
}

func parseJSON(format Format, file string, data []byte) (*Manifest, error) {
	fail := func(field, format string, args ...any) error {
		return layer.Problem{File: file, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	var j jsonManifest
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fail("", "invalid JSON: %v", err)
	}
	if j.Name == nil {
		return nil, fail(fieldName, "name is required")
	}
	if err := CheckName(*j.Name); err != nil {
		return nil, fail(fieldName, "%v", err)
	}
	m := &Manifest{Format: format, Name: *j.Name}
	var err error
	if m.Version, err = optString(j.Version); err != nil {
		return nil, fail(fieldVersion, "%v", err)
	}
	if m.Description, err = optString(j.Description); err != nil {
		return nil, fail("description", "%v", err)
	}
	// The default skills directory is searched first, then the listed
	// paths, each once.
	m.Skills = []string{DefaultSkillsDir}
	var listed []string
	if len(j.Skills) > 0 && string(j.Skills) != jsonNull {
		var one string
		if json.Unmarshal(j.Skills, &one) == nil {
			listed = []string{one}
		} else if err := json.Unmarshal(j.Skills, &listed); err != nil {
			return nil, fail("skills", "must be a path or a list of paths")
		}
	}
	for _, p := range listed {
		c, err := cleanRel(p)
		if err != nil {
			return nil, fail("skills", "%v", err)
		}
		if !contains(m.Skills, c) {
			m.Skills = append(m.Skills, c)
		}
	}
	if err := m.jsonServers(j.MCPServers); err != nil {
		return nil, fail("mcpServers", "%v", err)
	}
	return m, nil
}

// jsonServers reads a Codex or Claude manifest's mcpServers: the path of
// a .mcp.json, a list of them, or the servers themselves (an object, in
// .mcp.json's format).
func (m *Manifest) jsonServers(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == jsonNull {
		return nil
	}
	if raw[0] == '{' {
		m.MCPInline = raw
		return nil
	}
	var paths []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		paths = []string{one}
	} else if err := json.Unmarshal(raw, &paths); err != nil {
		return errors.New("must be the path of a .mcp.json, a list of paths, or an object of servers")
	}
	for _, p := range paths {
		c, err := cleanRel(p)
		if err != nil {
			return err
		}
		if c != MCPFile && !contains(m.MCPFiles, c) {
			m.MCPFiles = append(m.MCPFiles, c)
		}
	}
	return nil
}

// MCPFile is where a Claude or Codex plugin declares its MCP servers.
const MCPFile = ".mcp.json"

func optString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == jsonNull {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("must be a string")
	}
	return s, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
