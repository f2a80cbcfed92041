package plugins

import (
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/pluginroot"
)

// Transport is how an MCP server is reached.
type Transport string

// Transports of mcp_servers entries.
const (
	TransportStdio Transport = "stdio"
	TransportHTTP  Transport = "http"
	TransportSSE   Transport = "sse"
)

// Defaults of mcp_servers entries, from the spec.
const (
	DefaultStartupTimeoutSeconds = 30
	DefaultToolTimeoutSeconds    = 300
)

// MCPServer is one MCP server a plugin declares: the fields of
// mcp_servers/<id>.yaml without executors, since a plugin's servers run on
// the local executor only. After Load, ${AERIE_PLUGIN_ROOT} and
// ${OPENVAALA_PLUGIN_ROOT} are replaced in Command, Args and Env, and Env
// carries both variables. Other values are used as written.
type MCPServer struct {
	// ID names the server; its tools are mcp__<id>__<tool>. Letters,
	// digits, - and _, never __.
	ID string `yaml:"id" json:"id"`
	// Type is stdio, http or sse.
	Type Transport `yaml:"type" json:"type"`
	// Command, Args and Env start a stdio server; Env is added on top of
	// the inherited environment.
	Command string            `yaml:"command,omitempty" json:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty" json:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// URL and Headers reach an http or sse server.
	URL     string            `yaml:"url,omitempty" json:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Tools are the server's tool names to offer the model; empty means all.
	Tools []string `yaml:"tools,omitempty" json:"tools,omitempty"`
	// Required makes a connection failure fail the turn; otherwise the
	// server's tools are skipped with a warning.
	Required bool `yaml:"required,omitempty" json:"required,omitempty"`
	// Disabled keeps the declaration but does not use the server.
	Disabled bool `yaml:"disabled,omitempty" json:"disabled,omitempty"`
	// StartupTimeoutSeconds bounds one connection attempt (default 30).
	StartupTimeoutSeconds int `yaml:"startup_timeout_seconds,omitempty" json:"startup_timeout_seconds"`
	// ToolTimeoutSeconds bounds one tool call (default 300).
	ToolTimeoutSeconds int `yaml:"tool_timeout_seconds,omitempty" json:"tool_timeout_seconds"`

	// Plugin is the name of the plugin that declares the server.
	Plugin string `yaml:"-" json:"plugin"`
	// File is the manifest that declares it, for reports.
	File string `yaml:"-" json:"file"`
}

// place returns the server with root substituted and the root variables in
// its environment (an explicit env entry of the same name wins).
func (s MCPServer) place(plugin, file, root string) MCPServer {
	s.Plugin, s.File = plugin, file
	if s.Type != TransportStdio {
		return s
	}
	s.Command = pluginroot.Expand(s.Command, root, pluginroot.Native)
	if s.Args != nil {
		s.Args = pluginroot.ExpandEach(s.Args, root, pluginroot.Native)
	}
	s.Env = pluginroot.Env(s.Env, root, pluginroot.Native)
	return s
}

// MCPSource is one declaration of a Claude or Codex plugin's MCP servers:
// its file (a .mcp.json, or the manifest for servers it declares itself)
// and the JSON.
type MCPSource struct {
	File string `json:"file"`
	Data []byte `json:"-"`
}

// SkillRoot is a directory of skills (or a single skill's directory) that a
// plugin contributes. Its skills are named Namespace + ":" + skill.
type SkillRoot struct {
	Dir       string `json:"dir"`
	Namespace string `json:"namespace"`
}

// Plugin is an enabled plugin's contribution.
type Plugin struct {
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Root is the plugin's absolute directory.
	Root string `json:"root"`
	// Format and Manifest say which manifest was read.
	Format   Format `json:"format"`
	Manifest string `json:"manifest"`
	// Layer is the layer whose plugins/ directory holds it.
	Layer string `json:"layer"`
	// Skills are the existing skill directories, in search order.
	Skills []SkillRoot `json:"skills,omitempty"`
	// Hooks are the native manifest's hooks, or a Claude or Codex plugin's
	// hooks/hooks.json when its components include hooks; they run after
	// the layers' hooks. A plugin of a project layer has none.
	Hooks []hooks.Hook `json:"hooks,omitempty"`
	// MCPServers are the native manifest's servers, after substitution;
	// in a project layer, its http and sse servers only.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
	// Agents and Commands are a Claude or Codex plugin's agents/*.md and
	// commands/*.md, when its components include them.
	Agents   []Agent   `json:"agents,omitempty"`
	Commands []Command `json:"commands,omitempty"`
	// ClaudeMCP are a Claude or Codex plugin's MCP server declarations,
	// in Claude's format, when its components include "mcp": runner/mcp
	// reads them (its .mcp.json translation), since their ${VAR} resolve
	// where the session runs.
	ClaudeMCP []MCPSource `json:"claude_mcp,omitempty"`
	// Project says the plugin is in a project layer: the repository
	// wrote it.
	Project bool `json:"project,omitempty"`
	// Install is the provenance of a plugin installed with aerie plugin
	// install; nil otherwise.
	Install *Install `json:"install,omitempty"`
}
