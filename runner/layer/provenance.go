package layer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ProvenanceSuffix names an artifact's provenance sidecar: the artifact's
// file name with this suffix, in the same directory
// (tools/word_count.toml.provenance.json).
const ProvenanceSuffix = ".provenance.json"

// ProvenanceState says who wrote an artifact.
type ProvenanceState string

// Provenance states, as the spec names them.
const (
	// ProvenanceAgent: extension_manage wrote the artifact on the agent's
	// behalf; its sidecar is well formed.
	ProvenanceAgent ProvenanceState = "agent"
	// ProvenanceLegacy: there is no sidecar — an artifact a person put
	// there.
	ProvenanceLegacy ProvenanceState = "legacy"
	// ProvenanceUnknown: the sidecar is there but cannot be read or
	// understood.
	ProvenanceUnknown ProvenanceState = "unknown"
)

// OriginAgent is the only origin extension_manage writes.
const OriginAgent = "agent"

// Provenance is what an artifact's sidecar says about it.
type Provenance struct {
	// State is agent, legacy or unknown.
	State ProvenanceState `json:"state"`
	// Origin is who authored the artifact ("agent").
	Origin string `json:"origin,omitempty"`
	// OperationID identifies the extension_manage call that wrote it.
	OperationID string `json:"operation_id,omitempty"`
	// Digest is the artifact's digest when it was written ("sha256:…").
	Digest string `json:"digest,omitempty"`
	// ActivationBoundary is where the change takes effect, as the manager
	// recorded it (for example "next_turn").
	ActivationBoundary string `json:"activation_boundary,omitempty"`
	// DigestMismatch means the artifact's bytes no longer match Digest:
	// it was edited after the manager wrote it.
	DigestMismatch bool `json:"digest_mismatch,omitempty"`
	// Sidecar is the sidecar's path, when there is one.
	Sidecar string `json:"sidecar,omitempty"`
	// Reason explains an unknown state.
	Reason string `json:"reason,omitempty"`
}

// sidecar is the file format. Every field but activation_boundary is
// required; unknown fields are refused so that a sidecar from a newer
// format is "unknown" rather than half-understood.
type sidecar struct {
	Origin             string `json:"origin"`
	OperationID        string `json:"operation_id"`
	Digest             string `json:"digest"`
	ActivationBoundary string `json:"activation_boundary"`
}

// ParseProvenance parses a sidecar's bytes. A malformed sidecar is an
// error; the caller reports the artifact's provenance as unknown.
func ParseProvenance(doc []byte) (Provenance, error) {
	var sc sidecar
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return Provenance{}, fmt.Errorf("parse provenance: %w", err)
	}
	if dec.More() {
		return Provenance{}, errors.New("parse provenance: trailing data after the JSON object")
	}
	switch {
	case sc.Origin == "":
		return Provenance{}, errors.New("parse provenance: origin is missing")
	case sc.OperationID == "":
		return Provenance{}, errors.New("parse provenance: operation_id is missing")
	case !IsDigest(sc.Digest):
		return Provenance{}, fmt.Errorf("parse provenance: digest %q is not sha256:<64 lowercase hex digits>", sc.Digest)
	}
	p := Provenance{
		State: ProvenanceAgent, Origin: sc.Origin, OperationID: sc.OperationID,
		Digest: sc.Digest, ActivationBoundary: sc.ActivationBoundary,
	}
	if sc.Origin != OriginAgent {
		p.State = ProvenanceUnknown
		p.Reason = fmt.Sprintf("unknown origin %q", sc.Origin)
	}
	return p, nil
}

// readProvenance reads the sidecar of the artifact name in f. data, when
// not nil, is the artifact's bytes, compared with the recorded digest.
func readProvenance(f files, name string, data []byte) Provenance {
	return readProvenanceOf(f, name, func() []byte { return data })
}

// readProvenanceOf is readProvenance with the artifact's bytes read only
// when there is a sidecar to compare them with: most artifacts have
// none. data returns nil when they cannot be read.
func readProvenanceOf(f files, name string, data func() []byte) Provenance {
	sc := name + ProvenanceSuffix
	doc, err := f.readFile(sc, MaxProvenanceBytes)
	if Absent(err) {
		return Provenance{State: ProvenanceLegacy}
	}
	if err != nil {
		return Provenance{State: ProvenanceUnknown, Sidecar: f.pathOf(sc), Reason: SanitizeReason(err.Error())}
	}
	p, err := ParseProvenance(doc)
	p.Sidecar = f.pathOf(sc)
	if err != nil {
		return Provenance{State: ProvenanceUnknown, Sidecar: p.Sidecar, Reason: SanitizeReason(err.Error())}
	}
	if b := data(); b != nil && p.Digest != Digest(b) {
		p.DigestMismatch = true
	}
	return p
}

// fileDigest returns the digest of the file name in f, "" when it cannot
// be read.
func fileDigest(f files, name string) string {
	b, err := f.readFile(name, MaxArtifactBytes)
	if err != nil {
		return ""
	}
	return Digest(b)
}

// ReadProvenance returns the provenance of the artifact file at path (an
// absolute path inside l.Dir), reading its sidecar through an os.Root at
// the layer.
func ReadProvenance(l Layer, path string) Provenance {
	return ReadProvenances(l, []string{path})[0]
}

// ReadProvenances is ReadProvenance of each of paths, with the layer
// opened once.
func ReadProvenances(l Layer, paths []string) []Provenance {
	out := make([]Provenance, len(paths))
	if l.Dir == "" {
		for i := range out {
			out[i] = Provenance{State: ProvenanceLegacy}
		}
		return out
	}
	var (
		root    *Dir
		rootErr error
	)
	for i, path := range paths {
		rel, ok := relInside(l.Dir, path)
		if !ok {
			out[i] = Provenance{State: ProvenanceUnknown, Reason: fmt.Sprintf("%s is outside the layer %s", path, l.Dir)}
			continue
		}
		if root == nil && rootErr == nil {
			if root, rootErr = OpenDir(l.Dir); rootErr == nil {
				defer root.Close()
			}
		}
		if rootErr != nil {
			out[i] = Provenance{State: ProvenanceUnknown, Reason: SanitizeReason(rootErr.Error())}
			continue
		}
		f := rootFiles{root: root, dir: l.Dir, prefix: "."}
		name := filepath.ToSlash(rel)
		out[i] = readProvenanceOf(f, strings.TrimPrefix(name, "./"), func() []byte {
			data, err := f.readFile(name, MaxArtifactBytes)
			if err != nil {
				return nil
			}
			return data
		})
	}
	return out
}

// AgentSidecar returns the sidecar extension_manage writes beside an
// artifact it wrote on the agent's behalf: origin agent, the operation's
// id, the digest of content and where the change takes effect.
// ParseProvenance reads it back.
func AgentSidecar(operationID string, content []byte, boundary string) []byte {
	b, err := json.Marshal(sidecar{
		Origin:             OriginAgent,
		OperationID:        operationID,
		Digest:             Digest(content),
		ActivationBoundary: boundary,
	})
	if err != nil {
		panic(fmt.Sprintf("encode provenance sidecar: %v", err)) // four strings always encode
	}
	return append(b, '\n')
}
