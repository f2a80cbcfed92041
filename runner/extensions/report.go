package extensions

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Type is a kind of artifact. Other packages (hooks, skills, plugins, MCP)
// report their artifacts with types of their own.
type Type string

// The artifact types this package loads.
const (
	TypeLayer            Type = "layer"
	TypeTrust            Type = "trust"
	TypeTool             Type = "tool"
	TypeSystemPrompt     Type = "system_prompt"
	TypeAppendSystem     Type = "append_system"
	TypeInstructions     Type = "instructions"
	TypeToolDescriptions Type = "tool_descriptions"
	TypeToolsets         Type = "toolsets"
)

// Status is an artifact's lifecycle state.
type Status string

// Artifact statuses.
const (
	// StatusActive artifacts are in use.
	StatusActive Status = "active"
	// StatusInactive artifacts are valid but not used: executables
	// without trust.
	StatusInactive Status = "inactive"
	// StatusShadowed artifacts lose to a nearer one of the same name.
	StatusShadowed Status = "shadowed"
	// StatusSkipped artifacts could not be used: unreadable, malformed,
	// too large, in the wrong layer.
	StatusSkipped Status = "skipped"
	// StatusPendingReload artifacts changed after the session loaded its
	// extensions; they take effect at the next turn boundary. Set by the
	// session's reload coordinator, never by discovery.
	StatusPendingReload Status = "pending_reload"
)

// Copy names another copy of an artifact.
type Copy struct {
	Layer string `json:"layer"`
	Path  string `json:"path"`
}

// Artifact is one entry of the extensions report: a file found in a
// layer (or named by the environment), and what became of it.
type Artifact struct {
	Type Type `json:"type"`
	// Name is the artifact's name: a tool's name, the file's name for
	// the others.
	Name string `json:"name,omitempty"`
	// Layer and LayerKind say where it was found; empty for a file named
	// by the environment.
	Layer     string `json:"layer,omitempty"`
	LayerKind Kind   `json:"layer_kind,omitempty"`
	// Path is the file: absolute, or "bundled:<name>".
	Path   string `json:"path"`
	Status Status `json:"status"`
	// Trust is set for executable artifacts.
	Trust TrustStatus `json:"trust,omitempty"`
	// Digest is "sha256:…" over the file's bytes, when they were read
	// whole.
	Digest string `json:"digest,omitempty"`
	// Provenance is what the artifact's sidecar says.
	Provenance *Provenance `json:"provenance,omitempty"`
	// ActivationBoundary is where the artifact takes effect, from its
	// provenance.
	ActivationBoundary string `json:"activation_boundary,omitempty"`
	// Shadowed lists the farther copies this artifact shadows.
	Shadowed []Copy `json:"shadowed,omitempty"`
	// ShadowedBy is the path of the artifact that shadows this one.
	ShadowedBy string `json:"shadowed_by,omitempty"`
	// Reason says why the artifact is not active (and, for some active
	// ones, a note), sanitized: no control characters, no credentials,
	// bounded length.
	Reason string `json:"reason,omitempty"`
	// Pin is the trust pin that would trust the artifact as it is now.
	Pin *Pin `json:"pin,omitempty"`

	// Err is the full error behind a skipped artifact, for the log.
	Err error `json:"-"`
	// private is copied from the layer: a skipped artifact there is a
	// problem for whoever runs the session.
	private bool
}

// newArtifact starts an artifact of type t for the file name in lv.
func newArtifact(t Type, lv layerView, name string) Artifact {
	a := Artifact{Type: t, Layer: lv.Name, LayerKind: lv.Kind, private: lv.Private()}
	if lv.files != nil {
		a.Path = lv.files.path(name)
	}
	return a
}

// skip marks a skipped with err.
func (a *Artifact) skip(err error) {
	a.Status, a.Err, a.Reason = StatusSkipped, err, SanitizeReason(err.Error())
}

// setProvenance records p, and its activation boundary.
func (a *Artifact) setProvenance(p Provenance) {
	a.Provenance = &p
	a.ActivationBoundary = p.ActivationBoundary
}

// shadow marks a as shadowed by w, and lists a among w's copies.
func (a *Artifact) shadow(w *Artifact) {
	a.Status, a.ShadowedBy, a.Reason = StatusShadowed, w.Path, "shadowed by "+w.Path
	w.Shadowed = append(w.Shadowed, Copy{Layer: a.Layer, Path: a.Path})
}

// Report is everything discovery found.
type Report struct {
	Workspace string     `json:"workspace,omitempty"`
	WorkDir   string     `json:"work_dir,omitempty"`
	Layers    []Layer    `json:"layers"`
	Artifacts []Artifact `json:"artifacts"`
}

// Problems returns the errors of artifacts skipped in private layers —
// the layers whoever runs the session controls, where a malformed file is
// a mistake to fix rather than workspace content to tolerate. A runner
// should refuse to start a session with problems.
func (r Report) Problems() []error {
	var errs []error
	for _, a := range r.Artifacts {
		if a.private && a.Status == StatusSkipped && a.Err != nil {
			errs = append(errs, fmt.Errorf("%s %s in layer %s: %w", a.Type, a.Path, a.Layer, a.Err))
		}
	}
	return errs
}

// Problem reports whether a is a problem in the sense of Problems.
func (a Artifact) Problem() bool { return a.private && a.Status == StatusSkipped && a.Err != nil }

// EnvironmentLayer is the Layer of artifacts named by environment
// variables (AERIE_SYSTEM_PROMPT_FILE, AERIE_TOOL_DESCRIPTIONS_FILE).
const EnvironmentLayer = "environment"

// fileDigest returns the digest of an artifact that is reported but not
// used, "" when it cannot be read.
func fileDigest(f files, name string) string {
	b, err := f.readFile(name, MaxArtifactBytes)
	if err != nil {
		return ""
	}
	return digest(b)
}

// digest returns "sha256:<hex>" of b.
func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

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
	// Env is the custom tools' environment; empty means the executor's
	// allow-listed, secret-free default.
	Env []string
	// Pins are trust pins the session's submitter gives besides the
	// pinnable layers' trust.toml files (an AgentSession's
	// spec.trust.pinsFrom): they are honoured with those.
	Pins []Pin
}

// Set is a session's extensions, loaded.
type Set struct {
	// Pins are the trust pins, for the hook engine and other loaders of
	// executable artifacts.
	Pins *Pins
	// Tools are the active custom tools, in layer order.
	Tools []*Tool
	// Prompt is the composed system prompt.
	Prompt Prompt
	// Descriptions are the tool-description overrides.
	Descriptions Descriptions
	// Toolsets are the named toolsets.
	Toolsets *Toolsets
	// Report lists every artifact found.
	Report Report
}

// Load reads every artifact this package knows from src. Its error means
// src itself is unusable (the working directory is outside the
// workspace); problems with artifacts are in the report.
func Load(src Source, opts Options) (*Set, error) {
	v, err := src.open()
	if err != nil {
		return nil, err
	}
	defer v.close()
	s := &Set{Report: Report{Workspace: v.wsDir, Layers: src.Layers}}
	if v.wsDir != "" {
		s.Report.WorkDir = joinRel(v.wsDir, v.workRel)
	}
	if s.Report.Layers == nil {
		s.Report.Layers = []Layer{}
	}
	add := func(arts ...Artifact) { s.Report.Artifacts = append(s.Report.Artifacts, arts...) }
	add(layerArtifacts(v)...)
	var arts []Artifact
	s.Pins, arts = loadPins(v)
	s.Pins.add(opts.Pins...)
	add(arts...)
	// The tools and the rest are independent: read them at once.
	var promptArts, descArts, toolsetArts []Artifact
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Prompt, promptArts = composePrompt(v, opts.Persona)
		s.Descriptions, descArts = loadDescriptions(v)
		s.Toolsets, toolsetArts = loadToolsets(v)
	}()
	s.Tools, arts = loadTools(v, ToolOptions{Builtins: opts.Builtins, Pins: s.Pins, Commands: opts.Commands, Env: opts.Env})
	<-done
	add(arts...)
	add(promptArts...)
	add(descArts...)
	add(toolsetArts...)
	if s.Report.Artifacts == nil {
		s.Report.Artifacts = []Artifact{}
	}
	return s, nil
}

// layerArtifacts reports the layers that cannot be read.
func layerArtifacts(v *view) []Artifact {
	var arts []Artifact
	for _, lv := range v.layers {
		if lv.err == nil {
			continue
		}
		a := Artifact{Type: TypeLayer, Name: lv.Name, Layer: lv.Name, LayerKind: lv.Kind, Path: lv.Dir, private: lv.Private()}
		a.skip(fmt.Errorf("read layer: %w", lv.err))
		arts = append(arts, a)
	}
	return arts
}

// errNoCommands is the result of running a tool loaded without an
// executor.
var errNoCommands = errors.New("custom tools were loaded without an executor")
