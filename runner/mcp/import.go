package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/pluginroot"
)

// Other agents declare MCP servers in formats of their own: Claude
// Code's .mcp.json and Claude Desktop's claude_desktop_config.json,
// Codex's [mcp_servers] tables. aerie does not read them as its own
// configuration: ImportClaude and ImportCodex translate them into
// aerie's declarations, for a person to review and write to
// mcp_servers/<id>.yaml (see Declaration), and say precisely why an
// entry cannot be translated. The one exception is a Claude or Codex
// plugin whose components include "mcp": Config.AddClaudePlugin reads its
// .mcp.json with the same translation, expanding ${VAR} as Claude does
// (see Variables).

// expansion finds ${VAR} and ${VAR:-default}, which those formats expand
// and aerie, using values as written, does not.
var expansion = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)
})

// claudeFields are the fields of a Claude server entry aerie
// translates.
var claudeFields = []string{"type", "command", "args", "env", "url", "headers"} //nolint:goconst // Claude's own keys

// ImportClaude translates the servers of a Claude .mcp.json or
// claude_desktop_config.json: either {"mcpServers": {<id>: {...}}} or
// the entries at the top level. An entry's type defaults to stdio, as
// in Claude. Top-level keys starting with "_" (comments) are ignored.
// An entry with any problem is not returned; problems name it by its
// path in the file ("mcpServers.github.headers.Authorization").
func ImportClaude(data []byte, file string) (servers []Server, probs []layer.Problem) {
	ps := &problems{src: Source{File: file}, budget: nodeBudget}
	defer func() {
		if r := recover(); r != nil {
			servers, probs = nil, []layer.Problem{ps.problem("", fmt.Sprintf("cannot parse JSON: internal error: %v", r))}
		}
	}()
	claudeEntries(data, ps, func(e claudeEntry) {
		e.values(func(n *yaml.Node, path string) { literal(n, path, ps) })
		if srv, ok := e.translate(ps); ok {
			servers = append(servers, srv)
		}
	})
	return servers, ps.list
}

// claudeEntry is one server entry of a Claude .mcp.json.
type claudeEntry struct {
	id, path string
	// node is the declaration in aerie's fields (id first, the type
	// added when the entry has none); nil when the entry is not an
	// object.
	node *yaml.Node
	// first is the index in the problems of the entry's first one.
	first int
}

// values calls f with the value of each field the entry declares, and
// its path in the file.
func (e claudeEntry) values(f func(n *yaml.Node, path string)) {
	if e.node == nil {
		return
	}
	for i := 2; i+1 < len(e.node.Content); i += 2 {
		f(e.node.Content[i+1], e.path+"."+e.node.Content[i].Value)
	}
}

// translate decodes the entry with aerie's rules; ok when the entry has
// no problem.
func (e claudeEntry) translate(ps *problems) (Server, bool) {
	if e.node == nil {
		return Server{}, false
	}
	srv := translate(e.node, e.path, ps)
	return srv, len(ps.list) == e.first
}

// problems are the entry's problems.
func (e claudeEntry) problems(ps *problems) []layer.Problem { return ps.list[e.first:] }

// claudeFile returns the mapping of server entries in a Claude .mcp.json
// and the prefix of their paths in it, adding the file's problems to ps.
func claudeFile(data []byte, ps *problems) (*yaml.Node, string, bool) {
	top, ok := decodeOne(data, ps)
	if !ok {
		return nil, "", false
	}
	entries := field(top, "mcpServers")
	if entries == nil {
		return top, "", true
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		if k := top.Content[i].Value; k != "mcpServers" && !strings.HasPrefix(k, "_") {
			ps.add(k, "not read: only mcpServers declares servers")
		}
	}
	top = ps.deref(entries)
	if top == nil || top.Kind != yaml.MappingNode {
		ps.add("mcpServers", "must be an object of servers by id")
		return nil, "", false
	}
	return top, "mcpServers.", true
}

// claudeEntries calls each with the server entries of a Claude .mcp.json
// in order, adding to ps the problems of the file and, before each call,
// those of the entry's fields that aerie cannot translate.
func claudeEntries(data []byte, ps *problems, each func(claudeEntry)) {
	top, prefix, ok := claudeFile(data, ps)
	if !ok {
		return
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := ps.deref(top.Content[i]), ps.deref(top.Content[i+1])
		if k == nil || v == nil {
			break
		}
		id := k.Value
		if strings.HasPrefix(id, "_") && v.Kind == yaml.ScalarNode {
			continue // a comment
		}
		e := claudeEntry{id: id, path: prefix + id, first: len(ps.list)}
		if v.Kind != yaml.MappingNode {
			ps.add(e.path, "must be an object declaring a server")
			each(e)
			continue
		}
		e.node = &yaml.Node{Kind: yaml.MappingNode, Tag: yamlMapTag, Content: []*yaml.Node{str(fieldID), str(id)}}
		hasType := false
		for j := 0; j+1 < len(v.Content); j += 2 {
			fk, fv := v.Content[j], v.Content[j+1]
			if !slices.Contains(claudeFields, fk.Value) {
				ps.add(e.path+"."+fk.Value, "cannot be translated: aerie declares servers with %s only",
					strings.Join(claudeFields, ", "))
				continue
			}
			hasType = hasType || fk.Value == "type"
			e.node.Content = append(e.node.Content, fk, fv)
		}
		if !hasType {
			e.node.Content = append(e.node.Content, str(fieldType), str(string(TypeStdio)))
		}
		each(e)
	}
}

// codexFields maps the fields of a Codex [mcp_servers.<id>] table to
// aerie's; those mapped to "" cannot be translated, for the reason in
// codexRefused.
var codexFields = map[string]string{
	"command": fieldCommand, "args": fieldArgs, "env": fieldEnv, "url": fieldURL, "http_headers": fieldHeaders,
	"enabled": fieldDisabled, "required": fieldRequired, "enabled_tools": fieldTools,
	"startup_timeout_sec": fieldStartupTimeout, "startup_timeout_ms": fieldStartupTimeout,
	"tool_timeout_sec": fieldToolTimeout,
}

var codexRefused = map[string]string{
	"cwd":              "aerie starts a stdio server in the working directory",
	"env_http_headers": "aerie reads no header from the runner's environment; write the values in headers",
	"disabled_tools":   "aerie has no list of tools to hide; list the tools to offer in tools",
	"env_vars": "aerie passes no variable of the runner's by name; " +
		"values are used as written, so write them in env",
	"bearer_token_env_var": "aerie reads no token from the runner's environment; " +
		"write the Authorization header in headers",
}

// ImportCodex translates the [mcp_servers.<id>] tables of a Codex
// config.toml; the rest of the file is not read. A server is stdio when
// it has a command and http (streamable) when it has a url. A table
// with any problem is not returned; problems name it by its path
// ("mcp_servers.docs.cwd").
func ImportCodex(data []byte, file string) (servers []Server, probs []layer.Problem) {
	ps := &problems{src: Source{File: file}, budget: nodeBudget}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		ps.add("", "invalid TOML: %v", err)
		return nil, ps.list
	}
	raw, ok := doc["mcp_servers"]
	if !ok {
		return nil, nil
	}
	tables, ok := raw.(map[string]any)
	if !ok {
		ps.add("mcp_servers", "must be a table of servers by id")
		return nil, ps.list
	}
	for _, id := range slices.Sorted(maps.Keys(tables)) {
		path := "mcp_servers." + id
		t, ok := tables[id].(map[string]any)
		if !ok {
			ps.add(path, "must be a table declaring a server")
			continue
		}
		before := len(ps.list)
		entry := &yaml.Node{Kind: yaml.MappingNode, Tag: yamlMapTag, Content: []*yaml.Node{str(fieldID), str(id)}}
		typ := ""
		for _, k := range slices.Sorted(maps.Keys(t)) {
			v := t[k]
			fpath := path + "." + k
			if reason, refused := codexRefused[k]; refused {
				ps.add(fpath, "cannot be translated: %s", reason)
				continue
			}
			to, known := codexFields[k]
			if !known {
				ps.add(fpath, "cannot be translated: not a field aerie knows")
				continue
			}
			n, err := toNode(v)
			if err != nil {
				ps.add(fpath, "%v", err)
				continue
			}
			switch k {
			case "command":
				typ = string(TypeStdio)
			case "url":
				if typ == "" {
					typ = string(TypeHTTP)
				}
			case "enabled":
				b, ok := v.(bool)
				if !ok {
					ps.add(fpath, "must be true or false")
					continue
				}
				n = scalar(strconv.FormatBool(!b), "!!bool")
			case "startup_timeout_ms":
				ms, ok := number(v)
				if !ok {
					ps.add(fpath, "must be a number of milliseconds")
					continue
				}
				n = scalar(strconv.FormatFloat(ms/1000, 'g', -1, 64), "!!float")
			}
			literal(n, fpath, ps)
			entry.Content = append(entry.Content, str(to), n)
		}
		if typ == "" {
			ps.add(path, "declares neither a command nor a url")
			continue
		}
		entry.Content = append(entry.Content, str(fieldType), str(typ))
		srv := translate(entry, path, ps)
		if len(ps.list) == before {
			servers = append(servers, srv)
		}
	}
	return servers, ps.list
}

// translate decodes an entry built from another format with aerie's
// rules, reporting its problems under path.
func translate(entry *yaml.Node, path string, ps *problems) Server {
	sub := &problems{src: ps.src, budget: nodeBudget}
	srv := decode(entry, ps.src, sub)
	for _, p := range sub.list {
		if p.Field == "" {
			p.Field = path
		} else {
			p.Field = path + "." + p.Field
		}
		ps.list = append(ps.list, p)
	}
	return srv
}

// literal reports the ${VAR} expansions in the scalars of n, which the
// other format expands and aerie would pass on as written.
func literal(n *yaml.Node, path string, ps *problems) {
	switch n.Kind {
	case yaml.ScalarNode:
		m := expansion().FindStringSubmatch(n.Value)
		switch {
		case m == nil:
		case m[1] == "CLAUDE_PLUGIN_ROOT":
			ps.add(path, "%q relies on ${CLAUDE_PLUGIN_ROOT}, a Claude plugin's directory, which aerie does not expand; "+
				"in an aerie plugin's manifest write ${%s}", n.Value, pluginroot.Var)
		default:
			ps.add(path, "%q relies on the expansion of ${%s}, which aerie does not do (values are used as written); "+
				"write the value itself", n.Value, m[1])
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			literal(c, fmt.Sprintf("%s[%d]", path, i), ps)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			literal(n.Content[i+1], path+"."+n.Content[i].Value, ps)
		}
	}
}

// decodeOne parses data, JSON or YAML, as one document holding a
// mapping.
func decodeOne(data []byte, ps *problems) (*yaml.Node, bool) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			ps.add("", "the file is empty")
		} else {
			ps.add("", "invalid JSON: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return nil, false
	}
	top := ps.deref(&doc)
	if top != nil && top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = ps.deref(top.Content[0])
	}
	if top == nil || top.Kind != yaml.MappingNode {
		ps.add("", "must be an object of servers")
		return nil, false
	}
	return top, true
}

// field returns the value of key in the mapping n.
func field(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func str(s string) *yaml.Node { return scalar(s, "!!str") }

func scalar(s, tag string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: s}
}

// toNode turns a decoded TOML value into a YAML node.
func toNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case string:
		return str(v), nil
	case bool:
		return scalar(strconv.FormatBool(v), "!!bool"), nil
	case int64:
		return scalar(strconv.FormatInt(v, 10), "!!int"), nil
	case float64:
		return scalar(strconv.FormatFloat(v, 'g', -1, 64), "!!float"), nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range v {
			c, err := toNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		return n, nil
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: yamlMapTag}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			c, err := toNode(v[k])
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, str(k), c)
		}
		return n, nil
	}
	return nil, fmt.Errorf("a %T cannot be translated", v)
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, !math.IsNaN(v)
	}
	return 0, false
}

// Declaration renders srv as the contents of mcp_servers/<id>.yaml,
// fields in the spec's order, defaults left out.
func (srv Server) Declaration() []byte {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	n := &yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v any) {
		var vn yaml.Node
		if err := vn.Encode(v); err != nil {
			panic(fmt.Sprintf("encode %s: %v", k, err)) // strings, lists and maps of strings, bools, numbers
		}
		n.Content = append(n.Content, str(k), &vn)
	}
	add(fieldID, srv.ID)
	add(fieldType, string(srv.Type))
	if srv.Command != "" {
		add(fieldCommand, srv.Command)
	}
	if len(srv.Args) > 0 {
		add(fieldArgs, srv.Args)
	}
	if len(srv.Env) > 0 {
		add(fieldEnv, srv.Env)
	}
	if srv.URL != "" {
		add(fieldURL, srv.URL)
	}
	if len(srv.Headers) > 0 {
		add(fieldHeaders, srv.Headers)
	}
	if len(srv.Executors) > 0 && !slices.Equal(srv.Executors, []string{ExecutorLocal}) {
		add(fieldExecutors, srv.Executors)
	}
	if srv.Tools != nil {
		add(fieldTools, srv.Tools)
	}
	if srv.Required {
		add(fieldRequired, true)
	}
	if srv.Disabled {
		add(fieldDisabled, true)
	}
	if srv.StartupTimeout != 0 && srv.StartupTimeout != DefaultStartupTimeout {
		add(fieldStartupTimeout, srv.StartupTimeout.Seconds())
	}
	if srv.ToolTimeout != 0 && srv.ToolTimeout != DefaultToolTimeout {
		add(fieldToolTimeout, srv.ToolTimeout.Seconds())
	}
	if err := enc.Encode(n); err != nil {
		panic(fmt.Sprintf("encode the declaration: %v", err))
	}
	if err := enc.Close(); err != nil {
		panic(fmt.Sprintf("encode the declaration: %v", err))
	}
	return b.Bytes()
}
