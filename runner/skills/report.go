package skills

import "github.com/aerie-run/aerie/runner/layer"

// TypeSkill is the report's type for skill directories.
const TypeSkill layer.Type = "skill"

// Artifacts describes the skills discovery found, for the report: each
// with its root as its layer, the root's layer kind, the digest of its
// SKILL.md and a sanitized reason (a malformed skill's quotes the file).
// With digests, a SKILL.md discovery read only as far as its frontmatter
// is read now for its digest; without, it has none, and the report costs
// no read. A nil Set has none.
func (s *Set) Artifacts(digests bool) []layer.Artifact {
	if s == nil {
		return nil
	}
	arts := make([]layer.Artifact, 0, len(s.Entries))
	for _, e := range s.Entries {
		a := layer.Artifact{
			Type: TypeSkill, Name: e.Name, Layer: e.Root, LayerKind: e.Kind, Path: e.Path,
			Status: e.Status, Digest: e.Digest, Reason: layer.SanitizeReason(e.Reason),
		}
		if digests {
			a.Digest = e.FileDigest()
		}
		arts = append(arts, a)
	}
	return arts
}
