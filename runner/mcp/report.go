package mcp

import "github.com/aerie-run/aerie/runner/layer"

// TypeServer is the report's type for MCP server declarations.
const TypeServer layer.Type = "mcp_server"

// Artifacts describes the declarations for the report: each with its
// layer, status, trust and digest, and a sanitized reason, since reasons quote the
// declarations. An inactive declaration that wants a pin carries the pin
// that would trust it as it is now, computed over the same files the trust
// check covers, as a custom tool's does.
func (c Config) Artifacts(workspace string) []layer.Artifact {
	arts := make([]layer.Artifact, 0, len(c.Files))
	for _, f := range c.Files {
		a := layer.Artifact{
			Type: TypeServer, Name: f.ID, Layer: f.Layer.Name, LayerKind: f.Layer.Kind, Path: f.Path,
			Status: f.Status, Trust: f.Trust, Digest: f.Digest, Reason: layer.SanitizeReason(f.Reason),
		}
		if f.Status == layer.StatusInactive && f.Trust != "" && f.Trust != layer.Trusted {
			if pin, err := layer.ComputePin(workspace, f.Layer, f.Path, f.Executables); err == nil {
				a.Pin = &pin
			}
		}
		arts = append(arts, a)
	}
	return arts
}
