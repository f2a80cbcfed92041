package headless

import (
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/skills"
)

// Types of the extensions report for skills and MCP server declarations.
const (
	TypeSkill     extensions.Type = "skill"
	TypeMCPServer extensions.Type = "mcp_server"
)

// SkillArtifacts describes the skills discovery found, for the report.
func SkillArtifacts(set *skills.Set) []extensions.Artifact {
	if set == nil {
		return nil
	}
	arts := make([]extensions.Artifact, 0, len(set.Entries))
	for _, e := range set.Entries {
		arts = append(arts, extensions.Artifact{Type: TypeSkill, Name: e.Name, Layer: e.Root, Path: e.Path, Status: extensions.Status(e.Status), Reason: e.Reason})
	}
	return arts
}

// MCPArtifacts describes the MCP server declarations found, for the report.
func MCPArtifacts(cfg mcp.Config) []extensions.Artifact {
	arts := make([]extensions.Artifact, 0, len(cfg.Files))
	for _, f := range cfg.Files {
		arts = append(arts, extensions.Artifact{Type: TypeMCPServer, Name: f.ID, Layer: f.Layer.Name, LayerKind: f.Layer.Kind, Path: f.Path, Status: extensions.Status(f.Status), Reason: f.Reason})
	}
	return arts
}
