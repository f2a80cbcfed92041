// Package hooks runs lifecycle hooks: commands the user, the platform or a
// project attaches to fixed points of a session — a tool call about to run
// or just run, a prompt submitted, the agent about to stop, a session or a
// subagent starting and ending — that can block the action, rewrite a
// tool's input, add context for the model or keep the loop going.
//
// One engine serves two file formats, each with its own rules:
//
//   - hooks.toml (the Osprey format): the nearest layer's file wins;
//     matchers are anchored regular expressions over the complete tool
//     name; commands run through sh -c; the default timeout is 600 s; a
//     hook that fails (malformed output, an exit other than 0 and 2, a
//     timeout) is logged and the action goes on; "ask" goes to the
//     session's approval policy.
//   - hooks/*.yaml (the OpenVaala format): every file of every layer
//     applies; a matcher is a list of exact names or an unanchored regular
//     expression, with aliases for other agents' tool names; command runs
//     through bash -c, script + args names a file; the default timeout is
//     60 s; a failing hook allows, or blocks with on_failure: block.
//
// A Claude Code or Codex hooks.json (a plugin's hooks/hooks.json) is read
// as a YAML file is, but as the other agent means it (ParseClaude): what
// aerie does not have skips that hook, with the reason, instead of
// refusing the file.
//
// All speak the same JSON protocol: an event object on standard input, a
// verdict as exit code plus standard output (see Verdict). Hooks run
// through the executor, in process groups torn down on timeout, so a hook
// never outlives its deadline and never sees the runner's secrets.
//
// A project layer's hook file runs only with a trust pin (see Load), and
// its trust is checked again before each run when Load's Trust is a
// Guarder: a file or script changed since loading is skipped, with the
// reason in the verdict's Run.
//
// The agent loop uses the engine in two ways. Tools are wrapped with Wrap,
// which fires PreToolUse and PostToolUse around every call; the loop
// itself calls SessionStart, UserPromptSubmit, Stop, SubagentStart,
// SubagentStop, PreCompact and SessionEnd at those points and acts on the
// returned Verdict: add its Context for the model, end the turn when Stop
// is set, and for a blocked Stop continue with its Reason as the next user
// message. Every verdict with the hook runs behind it also goes to
// Options.Observe, for the journal.
package hooks

import (
	"fmt"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/layer"
)

// Event names a point in the session where hooks run.
type Event string

// The events. Osprey's hooks.toml defines the first five; OpenVaala's
// YAML adds UserPromptSubmit and the subagent events; PreCompact is Claude
// Code's, before a conversation compaction. aerie accepts all nine in both
// formats.
const (
	SessionStart     Event = "SessionStart"
	SessionEnd       Event = "SessionEnd"
	PreToolUse       Event = "PreToolUse"
	PostToolUse      Event = "PostToolUse"
	Stop             Event = "Stop"
	UserPromptSubmit Event = "UserPromptSubmit"
	SubagentStart    Event = "SubagentStart"
	SubagentStop     Event = "SubagentStop"
	PreCompact       Event = "PreCompact"
)

// Events lists every event, in the order of a session.
var Events = []Event{
	SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, SubagentStart, SubagentStop, PreCompact, SessionEnd,
}

// The names both hook file formats share: the key of a list of hooks, the
// key of a hook's command line and the type of a hook that runs one, the
// only type.
const (
	hooksKey    = "hooks"
	commandKey  = "command"
	commandType = "command"
	typeKey     = "type"
	matcherKey  = "matcher"
)

func knownEvent(name string) (Event, bool) {
	for _, e := range Events {
		if string(e) == name {
			return e, true
		}
	}
	return "", false
}

func eventNames() string {
	names := make([]string, len(Events))
	for i, e := range Events {
		names[i] = string(e)
	}
	return strings.Join(names, ", ")
}

// matched reports whether the event's hooks are selected by their
// matchers: tool events match the tool name, SessionStart the source, the
// subagent events the agent type, PreCompact the trigger (manual or auto).
// Other events run every hook.
func (e Event) matched() bool {
	switch e {
	case PreToolUse, PostToolUse, SessionStart, SubagentStart, SubagentStop, PreCompact:
		return true
	}
	return false
}

// canBlock reports whether a hook can stop what the event announces.
// SessionStart, SubagentStart, PreCompact and SessionEnd can only be
// observed.
func (e Event) canBlock() bool {
	switch e {
	case PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop:
		return true
	}
	return false
}

// Format is the file format a hook was declared in; it decides how the
// hook's failures, plain-text output and "ask" answers are treated.
type Format string

const (
	// FormatTOML is hooks.toml, the Osprey format.
	FormatTOML Format = "toml"
	// FormatYAML is hooks/*.yaml (and a plugin manifest's hooks), the
	// OpenVaala format.
	FormatYAML Format = "yaml"
)

// Default timeouts of the two formats.
const (
	DefaultTOMLTimeout = 600 * time.Second
	DefaultYAMLTimeout = 60 * time.Second
)

// OutputLimit is how much of a hook's standard output, and of its standard
// error, is read; the rest is discarded.
const OutputLimit = 64 << 10

// OnFailure says what a failing YAML hook means for the action.
type OnFailure string

const (
	// FailAllow lets the action go on (the default).
	FailAllow OnFailure = "allow"
	// FailBlock blocks it, with the failure as the reason.
	FailBlock OnFailure = "block"
)

// Hook is one command bound to an event.
type Hook struct {
	// ID names the hook in verdicts, logs and reports: its file and its
	// place in it, "/…/hooks/go.yaml#PreToolUse[0].hooks[1]".
	ID string `json:"id"`
	// Event is when the hook runs.
	Event Event `json:"event"`
	// Format is the format the hook was declared in.
	Format Format `json:"format"`
	// Matcher selects the tool calls (tool events), the session start
	// sources (SessionStart), the subagent types (subagent events) or the
	// compaction triggers (PreCompact) the hook runs for. Other events
	// ignore it.
	Matcher Matcher `json:"matcher"`
	// Command is the shell command line, run as Shell -c Command in the
	// agent's working directory. A script hook's command is the quoted
	// script path followed by its quoted arguments.
	Command string `json:"command"`
	// Shell is "sh" for hooks.toml and "bash" for YAML hooks.
	Shell string `json:"shell"`
	// Timeout bounds one run; the process group is torn down after it.
	Timeout time.Duration `json:"timeout"`
	// OnFailure is what a failure of the hook means (YAML hooks only;
	// hooks.toml hooks always allow).
	OnFailure OnFailure `json:"on_failure,omitempty"`
	// Executables are the files the hook runs that trust pins cover: the
	// path-bearing first token of a command, or a script. Relative paths
	// are resolved against the working directory (commands) or the file
	// (scripts). A token with shell expansions is kept as written.
	Executables []string `json:"executables,omitempty"`
	// Source is where the hook was declared.
	Source Source `json:"source"`
}

// Source is where hooks come from: a hook file in a layer, or a plugin
// manifest.
type Source struct {
	// Layer is the layer holding the file.
	Layer layer.Layer `json:"layer"`
	// File is the absolute path of the file.
	File string `json:"file"`
	// Dir is the directory a relative script is resolved from: the YAML
	// file's directory, or a plugin's root.
	Dir string `json:"dir,omitempty"`
	// Root, with Confined, is the directory scripts must stay inside.
	Root string `json:"root,omitempty"`
	// Confined restricts scripts to relative paths inside Root, checked
	// without following symbolic links out of it: a project layer's or a
	// plugin's script is part of what is trusted, and the check must not
	// read files elsewhere on the runner's machine.
	Confined bool `json:"confined,omitempty"`
	// Env is added to the environment of every hook from this source,
	// KEY=VALUE, such as AERIE_PLUGIN_ROOT for a plugin's hooks.
	Env []string `json:"env,omitempty"`
	// Home expands a leading ~/ in scripts; the runner's home directory
	// when empty.
	Home string `json:"-"`

	// guard checks the file's trust again before each run of its hooks;
	// nil when it needs none (or Load's Trust cannot check again).
	guard *layer.Guard
}

// problems collects the problems of one file.
type problems struct {
	src  Source
	list []layer.Problem
}

func (ps *problems) add(field, format string, args ...any) {
	ps.list = append(ps.list, layer.Problem{
		Layer: ps.src.Layer.Name, File: ps.src.File, Field: field, Reason: fmt.Sprintf(format, args...),
	})
}
