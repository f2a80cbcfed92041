package extensions

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

// Tool description overrides.
const (
	// ToolDescriptionsFileEnv names an explicit tool-descriptions file.
	ToolDescriptionsFileEnv = "AERIE_TOOL_DESCRIPTIONS_FILE"
	// ToolDescriptionsFile is the layered file; the nearest one wins.
	ToolDescriptionsFile = "tool-descriptions.toml"
)

// Descriptions are model-facing description overrides by tool name. They
// change what the model reads, never which tools exist or what they do.
// The zero value overrides nothing.
type Descriptions struct {
	// Source is the file the overrides come from; empty when none.
	Source string
	m      map[string]string
}

// Lookup returns the override for the tool name.
func (d Descriptions) Lookup(name string) (string, bool) {
	s, ok := d.m[name]
	return s, ok
}

// Apply returns t with its description overridden, or t itself when there
// is no override for it.
func (d Descriptions) Apply(t tools.Tool) tools.Tool {
	if s, ok := d.m[t.Name()]; ok {
		return described{Tool: t, description: s}
	}
	return t
}

// described is a tool with another description.
type described struct {
	tools.Tool
	description string
}

func (d described) Description() string { return d.description }

// Unwrap returns the tool described.
func (d described) Unwrap() tools.Tool { return d.Tool }

// ParseDescriptions parses a tool-descriptions.toml: one key per tool,
// whose value is the description the model sees instead of the tool's own.
//
//	bash = "Run a shell command. Prefer the file tools for reading files."
//	word_count = """
//	Counts words. Use it before summarising long text.
//	"""
func ParseDescriptions(path string, doc []byte) (map[string]string, error) {
	var raw map[string]any
	if err := layer.DecodeTOML(path, doc, &raw); err != nil {
		return nil, err
	}
	m := make(map[string]string, len(raw))
	for _, name := range sortedKeys(raw) {
		s, ok := raw[name].(string)
		switch {
		case !ok:
			return nil, layer.Placed(path, doc,
				layer.FieldErrorf(name, "want a string (the description), got %s", tomlKind(raw[name])))
		case strings.TrimSpace(s) == "":
			return nil, layer.Placed(path, doc,
				layer.FieldErrorf(name, "the description is empty; remove the key to keep the tool's own"))
		}
		m[name] = s
	}
	return m, nil
}

// tomlKind names a decoded TOML value's type as the TOML spec does.
func tomlKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case map[string]any:
		return "a table"
	case []any:
		return "an array"
	default:
		return "a date or time"
	}
}

// LoadDescriptions selects the tool-description overrides of src: the file
// AERIE_TOOL_DESCRIPTIONS_FILE names, if it is valid; else the nearest
// layered tool-descriptions.toml, if it is valid; else the bundled
// layer's, if any. An invalid nearest file does not hand over to a farther
// one, only to the bundled descriptions.
func LoadDescriptions(src layer.Source) (Descriptions, []layer.Artifact, error) {
	v, err := src.Open()
	if err != nil {
		return Descriptions{}, nil, err
	}
	defer v.Close()
	d, arts := loadDescriptions(v)
	return d, arts, nil
}

func loadDescriptions(v *layer.View) (Descriptions, []layer.Artifact) {
	var (
		d       Descriptions
		arts    []layer.Artifact
		decider = -1 // what decided, in arts
	)
	if name := v.Getenv(ToolDescriptionsFileEnv); name != "" {
		path := name
		if !filepath.IsAbs(path) && v.Workspace != "" {
			path = filepath.Join(v.Workspace, v.WorkRel, path)
		}
		a := layer.EnvironmentArtifact(TypeToolDescriptions, ToolDescriptionsFileEnv, path)
		doc, err := readOSFile(path, layer.MaxArtifactBytes)
		var m map[string]string
		if err == nil {
			a.Digest = layer.Digest(doc)
			m, err = ParseDescriptions(path, doc)
		}
		if err != nil {
			a.Skip(fmt.Errorf("read %s: %w; using the layered %s", ToolDescriptionsFileEnv, err, ToolDescriptionsFile))
		} else {
			a.Status, d = layer.StatusActive, Descriptions{Source: path, m: m}
			decider = len(arts)
		}
		arts = append(arts, a)
	}
	// fellBack: the nearest layered file failed, so only the bundled
	// layer's may still decide.
	fellBack := false
	for _, lv := range v.Layers {
		if lv.Err != nil {
			continue
		}
		if !lv.Files.There(ToolDescriptionsFile) {
			continue
		}
		a := layer.NewArtifact(TypeToolDescriptions, lv, ToolDescriptionsFile)
		a.Name = ToolDescriptionsFile
		if decider >= 0 && !(fellBack && lv.Kind == layer.KindBundled) {
			a.Digest = lv.Files.Digest(ToolDescriptionsFile)
			a.Shadow(&arts[decider])
			if fellBack {
				a.Reason = fmt.Sprintf("not used: the nearer %s failed, and only the bundled descriptions replace it",
					arts[decider].Path)
			}
			arts = append(arts, a)
			continue
		}
		doc, err := lv.Files.ReadFile(ToolDescriptionsFile, layer.MaxArtifactBytes)
		var m map[string]string
		if err == nil {
			a.Digest = layer.Digest(doc)
			a.SetProvenance(lv.Files.Provenance(ToolDescriptionsFile, doc))
			m, err = ParseDescriptions(a.Path, doc)
		}
		switch {
		case err != nil && fellBack:
			a.Skip(fmt.Errorf("read %s: %w; using the tools' own descriptions",
				ToolDescriptionsFile, layer.ExplainEscape(err)))
		case err != nil:
			a.Skip(fmt.Errorf("read %s: %w; using the bundled descriptions (a farther %s is not used after an error)",
				ToolDescriptionsFile, layer.ExplainEscape(err), ToolDescriptionsFile))
			fellBack = true
		default:
			a.Status, d, fellBack = layer.StatusActive, Descriptions{Source: a.Path, m: m}, false
		}
		decider = len(arts)
		arts = append(arts, a)
	}
	return d, arts
}
