package hooks

import (
	"path/filepath"

	"github.com/aerie-run/aerie/runner/layer"
)

// TypeHooks is the extensions report's type for hook files.
const TypeHooks layer.Type = "hooks"

// Artifacts describes the hook files for the extensions report: each with
// its layer, status, trust, sanitized reason and shadowed copies, and for a
// project file without a valid pin,
// the pin that would trust it as it is now (computed over the same file and
// executables the trust check covers).
func (l Loaded) Artifacts(workspace string) []layer.Artifact {
	arts := make([]layer.Artifact, 0, len(l.Files))
	for _, f := range l.Files {
		a := layer.Artifact{
			Type:       TypeHooks,
			Name:       filepath.Base(f.Path),
			Layer:      f.Layer.Name,
			LayerKind:  f.Layer.Kind,
			Path:       f.Path,
			Status:     f.Status,
			Shadowed:   f.Shadowed,
			ShadowedBy: f.ShadowedBy,
			// Reasons quote the files (a YAML error quotes the value at
			// fault), which the workspace controls.
			Reason: layer.SanitizeReason(f.Reason),
		}
		if f.Layer.Kind == layer.KindHome {
			// Files extension_manage wrote carry their provenance: as Load
			// read it, or now for a file it did not get that far with.
			var p layer.Provenance
			if f.prov != nil {
				p = *f.prov
			} else {
				p = layer.ReadProvenance(f.Layer, f.Path)
			}
			a.Provenance, a.ActivationBoundary = &p, p.ActivationBoundary
		}
		switch f.Status {
		case layer.StatusActive:
			// Trusted for a file that needed a pin, empty for one that
			// did not.
			a.Trust = f.Trust
		case layer.StatusInactive:
			// Untrusted or modified, as custom tools are reported.
			a.Trust = f.Trust
			if a.Trust == "" {
				a.Trust = layer.Untrusted
			}
			if pin, err := layer.ComputePin(workspace, f.Layer, f.Path, f.Executables); err == nil {
				a.Pin = &pin
			}
		}
		// The digest of the bytes Load read, or of the file now when it
		// read none.
		a.Digest = f.digest
		if a.Digest == "" {
			a.Digest = fileDigest(workspace, f)
		}
		arts = append(arts, a)
	}
	return arts
}

// fileDigest is the digest of a hook file, read as Load reads it: through
// an os.Root (the workspace's for a project layer), bounded, without
// blocking on a FIFO, and never through a link out of the layer. "" when
// it cannot be read.
func fileDigest(workspace string, f File) string {
	rel, ok := relLocal(f.Layer.Dir, f.Path)
	if !ok {
		return ""
	}
	root, err := openLayer(f.Layer, workspace)
	if err != nil {
		return ""
	}
	defer root.Close()
	rd, err := readBounded(root, rel, MaxFileSize)
	if err != nil {
		return ""
	}
	return rd.digest()
}
