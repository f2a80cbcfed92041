package extensions

import (
	"errors"

	"github.com/aerie-run/aerie/runner/layer"
)

// The artifact types this package loads.
const (
	TypeTool             layer.Type = "tool"
	TypeSystemPrompt     layer.Type = "system_prompt"
	TypeAppendSystem     layer.Type = "append_system"
	TypeInstructions     layer.Type = "instructions"
	TypeToolDescriptions layer.Type = "tool_descriptions"
	TypeToolsets         layer.Type = "toolsets"
)

// Options are what Load needs besides the Source.
type Options struct {
	// Builtins are the names of the built-in tools, which custom tools
	// cannot shadow.
	Builtins []string
	// Persona is the persona's base prompt, used when neither the
	// environment nor a SYSTEM.md replaces it.
	Persona string
	// Commands runs custom tools; nil loads them for the report only
	// (running one is then an error result).
	Commands Commands
	// Executors are the session's executors besides the default, which
	// a manifest may name (executor = "NAME").
	Executors []NamedCommands
	// Env is the custom tools' environment; empty means the executor's
	// allow-listed, secret-free default.
	Env []string
	// Pins are trust pins the session's submitter gives besides the
	// pinnable layers' trust.toml files (an AgentSession's
	// spec.trust.pinsFrom): they are honoured with those.
	Pins []layer.Pin
}

// Set is a session's extensions, loaded.
type Set struct {
	// Pins are the trust pins, for the hook engine and other loaders of
	// executable artifacts.
	Pins *layer.Pins
	// Tools are the active custom tools, in layer order.
	Tools []*Tool
	// Prompt is the composed system prompt.
	Prompt Prompt
	// Descriptions are the tool-description overrides.
	Descriptions Descriptions
	// Toolsets are the named toolsets.
	Toolsets *Toolsets
	// Report lists every artifact found: the layers that cannot be read,
	// the trust files, and this package's artifacts.
	Report layer.Report
}

// Load reads every artifact this package knows from src, and the trust
// pins. Its error means src itself is unusable (the working directory is
// outside the workspace); problems with artifacts are in the report.
func Load(src layer.Source, opts Options) (*Set, error) {
	v, err := src.Open()
	if err != nil {
		return nil, err
	}
	defer v.Close()
	s := &Set{Report: layer.Report{Workspace: v.Workspace, Layers: src.Layers}}
	if v.Workspace != "" {
		s.Report.WorkDir = v.WorkDir()
	}
	if s.Report.Layers == nil {
		s.Report.Layers = []layer.Layer{}
	}
	add := func(arts ...layer.Artifact) { s.Report.Artifacts = append(s.Report.Artifacts, arts...) }
	add(layer.UnreadableLayers(v)...)
	var arts []layer.Artifact
	s.Pins, arts = layer.ReadPins(v, opts.Pins...)
	add(arts...)
	// The tools and the rest are independent: read them at once.
	var promptArts, descArts, toolsetArts []layer.Artifact
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Prompt, promptArts = composePrompt(v, opts.Persona)
		s.Descriptions, descArts = loadDescriptions(v)
		s.Toolsets, toolsetArts = loadToolsets(v)
	}()
	s.Tools, arts = loadTools(v, ToolOptions{
		Builtins: opts.Builtins, Pins: s.Pins, Commands: opts.Commands, Executors: opts.Executors, Env: opts.Env,
	})
	<-done
	add(arts...)
	add(promptArts...)
	add(descArts...)
	add(toolsetArts...)
	if s.Report.Artifacts == nil {
		s.Report.Artifacts = []layer.Artifact{}
	}
	return s, nil
}

// errNoCommands is the result of running a tool loaded without an
// executor.
var errNoCommands = errors.New("custom tools were loaded without an executor")
