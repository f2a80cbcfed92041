package layer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Type is a kind of artifact. Each loader reports its artifacts with types
// of its own (extensions "tool", hooks "hooks", skills "skill", …); this
// package's are the layers and their trust pins.
type Type string

// The artifact types this package reports.
const (
	// TypeLayer is a layer that cannot be read at all.
	TypeLayer Type = "layer"
	// TypeTrust is a layer's trust.toml.
	TypeTrust Type = "trust"
)

// Status is an artifact's lifecycle state, in every loader's report.
type Status string

// Artifact statuses.
const (
	// StatusActive artifacts are in use.
	StatusActive Status = "active"
	// StatusInactive artifacts are valid but not used: executables
	// without trust (Artifact.Trust says which), and artifacts disabled by
	// their declaration or by the configuration.
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

// Artifact is one entry of the report: a file found in a layer (or named
// by the environment), and what became of it. Every loader reports its
// findings as Artifacts.
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
	// Executor is the executor a custom tool runs on, when its manifest
	// names one.
	Executor string `json:"executor,omitempty"`
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

// NewArtifact starts an artifact of type t for the file name in l, whose
// skipping (Skip) is a problem for whoever runs the session when l is
// private (Report.Problems).
func NewArtifact(t Type, l Opened, name string) Artifact {
	a := Artifact{Type: t, Layer: l.Name, LayerKind: l.Kind, private: l.Private()}
	if l.Files.f != nil {
		a.Path = l.Files.Path(name)
	}
	return a
}

// EnvironmentLayer is the Layer of artifacts named by environment
// variables (AERIE_SYSTEM_PROMPT_FILE, AERIE_TOOL_DESCRIPTIONS_FILE).
const EnvironmentLayer = "environment"

// EnvironmentArtifact starts an artifact of type t for the file at path
// named by the environment variable name: whoever runs the session named
// it, so skipping it is a problem (Report.Problems).
func EnvironmentArtifact(t Type, name, path string) Artifact {
	return Artifact{Type: t, Name: name, Layer: EnvironmentLayer, Path: path, private: true}
}

// Skip marks a skipped with err, its reason sanitized.
func (a *Artifact) Skip(err error) {
	a.Status, a.Err, a.Reason = StatusSkipped, err, SanitizeReason(err.Error())
}

// SetProvenance records p, and its activation boundary.
func (a *Artifact) SetProvenance(p Provenance) {
	a.Provenance = &p
	a.ActivationBoundary = p.ActivationBoundary
}

// Shadow marks a as shadowed by w, and lists a among w's copies.
func (a *Artifact) Shadow(w *Artifact) {
	a.Status, a.ShadowedBy, a.Reason = StatusShadowed, w.Path, "shadowed by "+w.Path
	w.Shadowed = append(w.Shadowed, Copy{Layer: a.Layer, Path: a.Path})
}

// Problem reports whether a is a problem in the sense of Report.Problems.
func (a Artifact) Problem() bool { return a.private && a.Status == StatusSkipped && a.Err != nil }

// Report is everything the loaders found.
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
		if a.Problem() {
			errs = append(errs, fmt.Errorf("%s %s in layer %s: %w", a.Type, a.Path, a.Layer, a.Err))
		}
	}
	return errs
}

// Problem is a reason a loader did not use an artifact, a part of one
// (Field), or a place it searched for them. Loaders list every one they
// meet; those in private layers are also their errors.
type Problem struct {
	// Layer is the name of the layer (or of the root searched) holding
	// the file; empty for a file parsed apart from its layer (a plugin
	// manifest, which an install reads from its source too).
	Layer string `json:"layer"`
	// File is the file, directory or link concerned: an absolute path.
	File string `json:"file"`
	// Field is the place in the file ("hooks.PreToolUse[0].matcher",
	// "args[2]"); empty for the whole file.
	Field string `json:"field,omitempty"`
	// Reason says what is wrong and how to fix it.
	Reason string `json:"reason"`
}

func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Field != "" {
		b.WriteString(": ")
		b.WriteString(p.Field)
	}
	b.WriteString(": ")
	b.WriteString(p.Reason)
	return b.String()
}

// Summary is the reason of an artifact skipped for probs (at least one),
// on one line: the first problem, and how many more there are.
func Summary(probs []Problem) string {
	r := probs[0].Reason
	if probs[0].Field != "" {
		r = probs[0].Field + ": " + r
	}
	if len(probs) > 1 {
		r = fmt.Sprintf("%s (and %d more problems)", r, len(probs)-1)
	}
	return r
}

// Digest returns the digest of an artifact's bytes as the report, trust
// checks and sidecars write it: "sha256:<64 lowercase hex digits>".
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// IsDigest reports whether s is a digest as Digest writes it.
func IsDigest(s string) bool {
	const prefix = "sha256:"
	if len(s) != len(prefix)+sha256.Size*2 || !strings.HasPrefix(s, prefix) {
		return false
	}
	for _, c := range s[len(prefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// UnreadableLayers reports the layers of v that cannot be read at all.
func UnreadableLayers(v *View) []Artifact {
	var arts []Artifact
	for _, lv := range v.Layers {
		if lv.Err == nil {
			continue
		}
		a := Artifact{Type: TypeLayer, Name: lv.Name, Layer: lv.Name, LayerKind: lv.Kind, Path: lv.Dir, private: lv.Private()}
		a.Skip(fmt.Errorf("read layer: %w", lv.Err))
		arts = append(arts, a)
	}
	return arts
}
