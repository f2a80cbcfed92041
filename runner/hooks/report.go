package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/aerie-run/aerie/runner/extensions"
)

// TypeHooks is the extensions report's type for hook files.
const TypeHooks extensions.Type = "hooks"

// Artifacts describes the hook files for the extensions report: each with
// its layer, status and reason, and for a project file without a valid pin,
// the pin that would trust it as it is now (computed over the same file and
// executables the trust check covers).
func (l Loaded) Artifacts(workspace string) []extensions.Artifact {
	arts := make([]extensions.Artifact, 0, len(l.Files))
	for _, f := range l.Files {
		a := extensions.Artifact{
			Type:      TypeHooks,
			Name:      filepath.Base(f.Path),
			Layer:     f.Layer.Name,
			LayerKind: f.Layer.Kind,
			Path:      f.Path,
			Reason:    f.Reason,
		}
		if f.Layer.Kind == extensions.KindHome {
			// Files extension_manage wrote carry their provenance.
			p := extensions.ReadProvenance(f.Layer, f.Path)
			a.Provenance, a.ActivationBoundary = &p, p.ActivationBoundary
		}
		switch f.Status {
		case StatusActive:
			a.Status = extensions.StatusActive
			if f.Layer.NeedsTrust() || a.Provenance != nil && a.Provenance.State != extensions.ProvenanceLegacy {
				a.Trust = extensions.Trusted
			}
		case StatusShadowed:
			a.Status = extensions.StatusShadowed
		case StatusUntrusted:
			a.Status = extensions.StatusInactive
			a.Trust = extensions.Untrusted
			if pin, err := extensions.ComputePin(workspace, f.Layer, f.Path, f.Executables); err == nil {
				a.Pin = &pin
			}
		default:
			a.Status = extensions.StatusSkipped
		}
		if b, err := os.ReadFile(f.Path); err == nil && len(b) <= MaxFileSize {
			sum := sha256.Sum256(b)
			a.Digest = "sha256:" + hex.EncodeToString(sum[:])
		}
		arts = append(arts, a)
	}
	return arts
}
