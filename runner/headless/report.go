package headless

import (
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/skills"
)

// Types of the extensions report for skills and MCP server declarations.
const (
	TypeSkill     layer.Type = "skill"
	TypeMCPServer layer.Type = "mcp_server"
)

// SkillArtifacts describes the skills discovery found, for the report:
// each with its root as its layer, the root's layer kind, the digest of
// its SKILL.md and a sanitized reason (a malformed skill's quotes the
// file). With digests, a SKILL.md discovery read only as far as its
// frontmatter is read now for its digest; without, it has none, and the
// report costs no read.
func SkillArtifacts(set *skills.Set, digests bool) []layer.Artifact {
	if set == nil {
		return nil
	}
	arts := make([]layer.Artifact, 0, len(set.Entries))
	for _, e := range set.Entries {
		a := layer.Artifact{
			Type: TypeSkill, Name: e.Name, Layer: e.Root, LayerKind: e.Kind, Path: e.Path,
			Status: layer.Status(e.Status), Digest: e.Digest, Reason: layer.SanitizeReason(e.Reason),
		}
		if digests {
			a.Digest = e.FileDigest()
		}
		arts = append(arts, a)
	}
	return arts
}

// MCPArtifacts describes the MCP server declarations found, for the
// report, in its terms: an untrusted declaration is inactive with trust
// untrusted, as a custom tool is, with the pin that would trust it, and a
// disabled one inactive; reasons are sanitized, since they quote the
// declarations.
func MCPArtifacts(cfg mcp.Config, workspace string) []layer.Artifact {
	arts := make([]layer.Artifact, 0, len(cfg.Files))
	for _, f := range cfg.Files {
		a := layer.Artifact{
			Type: TypeMCPServer, Name: f.ID, Layer: f.Layer.Name, LayerKind: f.Layer.Kind, Path: f.Path,
			Status: layer.Status(f.Status), Reason: layer.SanitizeReason(f.Reason),
		}
		switch f.Status {
		case mcp.StatusUntrusted:
			a.Status, a.Trust = layer.StatusInactive, layer.Untrusted
			// The pin that would trust it as it is now, over the same
			// files the trust check covers.
			if pin, err := layer.ComputePin(workspace, f.Layer, f.Path, f.Executables); err == nil {
				a.Pin = &pin
			}
		case mcp.StatusDisabled:
			a.Status = layer.StatusInactive
			if a.Reason == "" {
				a.Reason = "disabled: true in its declaration"
			}
		}
		arts = append(arts, a)
	}
	return arts
}
