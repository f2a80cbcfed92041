package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/layer"
)

// Type is how aerie talks to a server.
type Type string

// The server types.
const (
	// TypeStdio servers are processes started by the executor, spoken to
	// over their standard input and output.
	TypeStdio Type = "stdio"
	// TypeHTTP servers speak the streamable HTTP transport.
	TypeHTTP Type = "http"
	// TypeSSE servers speak the older HTTP + server-sent events transport.
	TypeSSE Type = "sse"
)

// The defaults of the spec.
const (
	DefaultStartupTimeout = 30 * time.Second
	DefaultToolTimeout    = 300 * time.Second
)

// ExecutorLocal is the executor every server runs on by default: the
// session's own.
const ExecutorLocal = "local"

// Server is one declared MCP server.
type Server struct {
	// ID names the server; its tools are offered as mcp__<id>__<tool>.
	ID   string `json:"id"`
	Type Type   `json:"type"`
	// Command, Args and Env start a stdio server: Env is added on top of
	// the inherited (secret-free) environment. Values are used as
	// written.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL and Headers reach an http or sse server.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Executors are where the server runs; [local] by default.
	Executors []string `json:"executors,omitempty"`
	// Tools are the tool names, as the server calls them, offered to the
	// model; nil offers all.
	Tools []string `json:"tools,omitempty"`
	// Required makes a connection failure fail the turn instead of
	// skipping the server's tools.
	Required bool `json:"required,omitempty"`
	// Disabled keeps the declaration without using the server.
	Disabled bool `json:"disabled,omitempty"`
	// StartupTimeout bounds one connection attempt, ToolTimeout one call.
	StartupTimeout time.Duration `json:"startup_timeout"`
	ToolTimeout    time.Duration `json:"tool_timeout"`

	// Layer and File say where the server was declared.
	Layer layer.Layer `json:"layer"`
	File  string      `json:"file"`
	// Plugin is the plugin that declared the server, if any, and
	// PluginRoot its directory.
	Plugin     string `json:"plugin,omitempty"`
	PluginRoot string `json:"plugin_root,omitempty"`
	// Resolved is what a Claude or Codex plugin's declaration read from
	// the environment (AddClaudePlugin): its values are in the fields
	// above, and masked in every error and result of the server.
	Resolved Resolved `json:"resolved,omitzero"`
}

// idPattern is the spec's rule for an id: letters, digits, - and _ (and
// no "__", checked apart, which keeps mcp__<id>__<tool> unambiguous).
var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })

// ValidID reports whether id is a valid server id.
func ValidID(id string) bool { return idPattern().MatchString(id) && !strings.Contains(id, "__") }

// Source says where a declaration comes from.
type Source struct {
	Layer layer.Layer
	// File is the declaring file, named in problems.
	File string
	// Plugin is set for an entry of a plugin manifest, which has no
	// executors field and no file name to match.
	Plugin string
	// Executors are the executor ids besides "local" that servers may
	// run on.
	Executors []string
}

// The fields of a declaration, which the decoder, its checks and the
// importers name.
const (
	fieldID             = "id"
	fieldType           = "type"
	fieldCommand        = "command"
	fieldArgs           = "args"
	fieldEnv            = "env"
	fieldURL            = "url"
	fieldHeaders        = "headers"
	fieldExecutors      = "executors"
	fieldTools          = "tools"
	fieldRequired       = "required"
	fieldDisabled       = "disabled"
	fieldStartupTimeout = "startup_timeout_seconds"
	fieldToolTimeout    = "tool_timeout_seconds"
)

// yamlMapTag is the YAML tag of a mapping.
const yamlMapTag = "!!map"

// knownFields are the fields of a declaration, in the spec's order.
var knownFields = []string{
	fieldID, fieldType, fieldCommand, fieldArgs, fieldEnv, fieldURL, fieldHeaders, fieldExecutors,
	fieldTools, fieldRequired, fieldDisabled, fieldStartupTimeout, fieldToolTimeout,
}

// nodeBudget bounds the YAML nodes one declaration may expand to through
// aliases.
const nodeBudget = 10_000

// ParseFile reads a mcp_servers/<id>.yaml file. fileID is the file's name
// without .yaml, which the id must equal. A declaration with any problem
// is not returned.
func ParseFile(data []byte, fileID string, src Source) (srv Server, probs []layer.Problem) {
	ps := &problems{src: src}
	defer func() {
		if r := recover(); r != nil {
			srv, probs = Server{}, []layer.Problem{ps.problem("", fmt.Sprintf("cannot parse YAML: internal error: %v", r))}
		}
	}()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			ps.add("", "the file is empty; declare the server's id and type")
		} else {
			ps.add("", "invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return Server{}, ps.list
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		ps.add("", "more than one YAML document; a file declares one server")
		return Server{}, ps.list
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	srv = decode(top, src, ps)
	if len(ps.list) == 0 && srv.ID != fileID {
		ps.add(fieldID, "%q does not match the file name %s.yaml; rename one of them", srv.ID, fileID)
	}
	if len(ps.list) > 0 {
		return Server{}, ps.list
	}
	return srv, nil
}

// ParseEntry reads one declaration from a YAML node — an entry of a
// plugin manifest's mcp_servers list. A declaration with any problem is
// not returned.
func ParseEntry(n *yaml.Node, src Source) (Server, []layer.Problem) {
	ps := &problems{src: src}
	srv := decode(n, src, ps)
	if len(ps.list) > 0 {
		return Server{}, ps.list
	}
	return srv, nil
}

// problems collects the problems of one declaration.
type problems struct {
	src    Source
	list   []layer.Problem
	budget int
}

func (ps *problems) problem(field, reason string) layer.Problem {
	return layer.Problem{Layer: ps.src.Layer.Name, File: ps.src.File, Field: field, Reason: reason}
}

func (ps *problems) add(field, format string, args ...any) {
	ps.list = append(ps.list, ps.problem(field, fmt.Sprintf(format, args...)))
}

// decode decodes a declaration, adding what is wrong with it to ps. It
// applies the defaults and checks every rule but the match of id and
// file name.
func decode(n *yaml.Node, src Source, ps *problems) Server {
	if ps.budget == 0 {
		ps.budget = nodeBudget
	}
	srv := Server{Layer: src.Layer, File: src.File, Plugin: src.Plugin}
	n = ps.deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		line := 0
		if n != nil {
			line = n.Line
		}
		ps.add("", "line %d: a server is a mapping of fields (id, type, ...)", line)
		return srv
	}
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := ps.deref(n.Content[i]), ps.deref(n.Content[i+1])
		if k == nil || v == nil {
			return srv
		}
		key := k.Value
		if k.Kind != yaml.ScalarNode {
			ps.add("", "line %d: field names are strings", k.Line)
			continue
		}
		if _, dup := seen[key]; dup {
			ps.add(key, "appears twice (line %d)", k.Line)
			continue
		}
		seen[key] = v
		if !slices.Contains(knownFields, key) {
			ps.add(key, "unknown field (line %d); the fields are %s", k.Line, strings.Join(knownFields, ", "))
			continue
		}
		if key == fieldExecutors && src.Plugin != "" {
			ps.add(key, "not allowed in a plugin: a plugin's servers run on local; "+
				"declare the server in mcp_servers/%s.yaml to run it elsewhere", "<id>")
			continue
		}
		switch key {
		case fieldID:
			srv.ID = ps.str(key, v)
		case fieldType:
			srv.Type = Type(ps.str(key, v))
		case fieldCommand:
			srv.Command = ps.str(key, v)
		case fieldArgs:
			srv.Args = ps.list_(key, v)
		case fieldEnv:
			srv.Env = ps.mapping(key, v)
		case fieldURL:
			srv.URL = ps.str(key, v)
		case fieldHeaders:
			srv.Headers = ps.mapping(key, v)
		case fieldExecutors:
			srv.Executors = ps.list_(key, v)
		case fieldTools:
			srv.Tools = ps.list_(key, v)
			if srv.Tools == nil {
				srv.Tools = []string{}
			}
		case fieldRequired:
			srv.Required = ps.boolean(key, v)
		case fieldDisabled:
			srv.Disabled = ps.boolean(key, v)
		case fieldStartupTimeout:
			srv.StartupTimeout = ps.seconds(key, v)
		case fieldToolTimeout:
			srv.ToolTimeout = ps.seconds(key, v)
		}
	}
	validate(&srv, seen, src, ps)
	return srv
}

// validate checks the rules that involve more than one field, and
// applies the defaults.
func validate(srv *Server, seen map[string]*yaml.Node, src Source, ps *problems) {
	validateID(srv, seen, ps)
	switch srv.Type {
	case TypeStdio:
		validateStdio(srv, seen, ps)
	case TypeHTTP, TypeSSE:
		validateRemote(srv, seen, ps)
	case "":
		if seen[fieldType] == nil {
			ps.add(fieldType, "missing; one of stdio, http, sse")
		}
	default:
		ps.add(fieldType, "%q: one of stdio, http, sse", srv.Type)
	}
	validateExecutors(srv, seen, src, ps)
	if srv.StartupTimeout == 0 {
		srv.StartupTimeout = DefaultStartupTimeout
	}
	if srv.ToolTimeout == 0 {
		srv.ToolTimeout = DefaultToolTimeout
	}
}

// The fields of each transport, which the other transport refuses.
var (
	stdioFields = []string{fieldCommand, fieldArgs, fieldEnv}
	httpFields  = []string{fieldURL, fieldHeaders}
)

// validateID checks the server's id.
func validateID(srv *Server, seen map[string]*yaml.Node, ps *problems) {
	switch {
	case seen[fieldID] == nil:
		ps.add(fieldID, "missing; name the server with letters, digits, - and _")
	case srv.ID == "": // str reported it
	case !idPattern().MatchString(srv.ID):
		ps.add(fieldID, "%q: use only letters, digits, - and _", srv.ID)
	case strings.Contains(srv.ID, "__"):
		ps.add(fieldID, "%q contains \"__\", which separates the id from the tool name in mcp__<id>__<tool>", srv.ID)
	}
}

// validateStdio checks the fields of a stdio server.
func validateStdio(srv *Server, seen map[string]*yaml.Node, ps *problems) {
	for _, f := range httpFields {
		if seen[f] != nil {
			ps.add(f, "not allowed for a stdio server (only for http and sse)")
		}
	}
	if seen[fieldCommand] == nil {
		ps.add(fieldCommand, "missing; a stdio server needs the program that runs it")
	}
	for _, name := range slices.Sorted(maps.Keys(srv.Env)) {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			ps.add("env."+name, "not a valid variable name")
		} else if strings.ContainsRune(srv.Env[name], 0) {
			ps.add("env."+name, "contains a NUL byte")
		}
	}
	for i, a := range srv.Args {
		if strings.ContainsRune(a, 0) {
			ps.add(fmt.Sprintf("args[%d]", i), "contains a NUL byte")
		}
	}
	if strings.ContainsRune(srv.Command, 0) {
		ps.add(fieldCommand, "contains a NUL byte")
	}
}

// validateRemote checks the fields of an http or sse server.
func validateRemote(srv *Server, seen map[string]*yaml.Node, ps *problems) {
	for _, f := range stdioFields {
		if seen[f] != nil {
			ps.add(f, "not allowed for an %s server (only for stdio)", srv.Type)
		}
	}
	if seen[fieldURL] == nil {
		ps.add(fieldURL, "missing; an %s server needs its http(s) URL", srv.Type)
	} else if srv.URL != "" {
		u, err := url.Parse(srv.URL)
		switch {
		case err != nil:
			ps.add(fieldURL, "%q is not a URL: %v", srv.URL, unwrapURL(err))
		case u.Scheme != "http" && u.Scheme != "https":
			ps.add(fieldURL, "%q must be an http or https URL", srv.URL)
		case u.Host == "":
			ps.add(fieldURL, "%q has no host", srv.URL)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(srv.Headers)) {
		value := srv.Headers[name]
		if !httpguts.ValidHeaderFieldName(name) {
			ps.add("headers."+name, "not a valid header name")
		} else if !httpguts.ValidHeaderFieldValue(value) {
			ps.add("headers."+name, "the value holds characters a header may not (such as a line break)")
		}
	}
}

// validateExecutors checks the executors a server runs on, local when
// the declaration names none.
func validateExecutors(srv *Server, seen map[string]*yaml.Node, src Source, ps *problems) {
	if srv.Executors == nil {
		srv.Executors = []string{ExecutorLocal}
		return
	}
	if seen[fieldExecutors] == nil || seen[fieldExecutors].Kind != yaml.SequenceNode {
		return
	}
	if len(srv.Executors) == 0 {
		ps.add(fieldExecutors, "is empty; leave it out to run the server on local")
	}
	for i, e := range srv.Executors {
		if e != ExecutorLocal && !slices.Contains(src.Executors, e) {
			ps.add(fmt.Sprintf("executors[%d]", i), "%q is not an executor: use %s",
				e, strings.Join(append([]string{ExecutorLocal}, src.Executors...), ", "))
		}
	}
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// deref resolves aliases, spending the node budget; nil when the budget
// is spent (reported once).
func (ps *problems) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind == yaml.AliasNode {
		return nil
	}
	ps.budget -= 1 + len(n.Content)
	if ps.budget < 0 {
		if ps.budget+1+len(n.Content) >= 0 {
			ps.add("", "the file expands to too many YAML nodes (aliases?)")
		}
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// str reads a string field. A scalar of another type (a number) is
// taken as written.
func (ps *problems) str(field string, n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		ps.add(field, "must be a string (line %d)", n.Line)
		return ""
	}
	if n.Value == "" {
		ps.add(field, "is empty")
	}
	return n.Value
}

// list_ reads a list of strings, each scalar taken as written.
func (ps *problems) list_(field string, n *yaml.Node) []string {
	if n.Kind != yaml.SequenceNode {
		ps.add(field, "must be a list of strings (line %d)", n.Line)
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		c = ps.deref(c)
		if c == nil {
			return nil
		}
		if c.Kind != yaml.ScalarNode || isNull(c) {
			ps.add(fmt.Sprintf("%s[%d]", field, i), "must be a string (line %d)", c.Line)
			continue
		}
		if c.Value == "" && field != fieldArgs {
			ps.add(fmt.Sprintf("%s[%d]", field, i), "is empty")
			continue
		}
		out = append(out, c.Value)
	}
	return out
}

// mapping reads a mapping of strings to strings, values taken as
// written.
func (ps *problems) mapping(field string, n *yaml.Node) map[string]string {
	if n.Kind != yaml.MappingNode {
		ps.add(field, "must be a mapping of names to values (line %d)", n.Line)
		return nil
	}
	out := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := ps.deref(n.Content[i]), ps.deref(n.Content[i+1])
		if k == nil || v == nil {
			return nil
		}
		name := field + "." + k.Value
		if k.Kind != yaml.ScalarNode {
			ps.add(field, "names must be strings (line %d)", k.Line)
			continue
		}
		if _, dup := out[k.Value]; dup {
			ps.add(name, "appears twice (line %d)", k.Line)
			continue
		}
		if v.Kind != yaml.ScalarNode || isNull(v) {
			ps.add(name, "must be a string (line %d)", v.Line)
			continue
		}
		out[k.Value] = v.Value
	}
	return out
}

func (ps *problems) boolean(field string, n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		ps.add(field, "must be true or false (line %d)", n.Line)
		return false
	}
	return n.Value == "true" || n.Value == "True" || n.Value == "TRUE"
}

// maxSeconds keeps a timeout within what a time.Duration holds.
const maxSeconds = math.MaxInt64 / int64(time.Second)

func (ps *problems) seconds(field string, n *yaml.Node) time.Duration {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		ps.add(field, "must be a number of seconds (line %d)", n.Line)
		return 0
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if i, ierr := strconv.ParseInt(n.Value, 0, 64); ierr == nil {
		f, err = float64(i), nil
	}
	switch {
	case err != nil || math.IsNaN(f):
		ps.add(field, "%q is not a number of seconds", n.Value)
	case f <= 0:
		ps.add(field, "must be positive, not %s", n.Value)
	case f > float64(maxSeconds):
		ps.add(field, "%s seconds is too long", n.Value)
	default:
		if d := time.Duration(f * float64(time.Second)); d > 0 {
			return d
		}
		ps.add(field, "%s seconds is too short", n.Value)
	}
	return 0
}
