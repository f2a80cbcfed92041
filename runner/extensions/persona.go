package extensions

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aerie-run/aerie/runner/layer"
)

// PersonasDir holds a layer's personas, one personas/<name>.toml each:
//
//	# personas/reviewer.toml
//	description = "Reviews a change without editing it."   # optional
//	prompt = """You are a careful reviewer. …"""           # the base system prompt
//	toolset = "readonly"                                   # optional default toolset
//
// A persona replaces the default persona's base prompt, which SYSTEM.md and
// AERIE_SYSTEM_PROMPT_FILE replace in turn and APPEND_SYSTEM.md files and
// project instructions extend, as they do the default. Its toolset applies
// when the session names none (an AgentSession's spec.toolset wins).
const PersonasDir = "personas"

// DefaultPersona is the name of the built-in persona, also meant by an
// empty name; a personas/default.toml in a layer replaces it.
const DefaultPersona = "default"

// ValidPersonaName reports whether name may name a persona: 1 to 63
// letters, digits, '_', '.' or '-', starting with a letter or digit — the
// pattern of an AgentSession's spec.persona,
// ^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$. A loop, not that regexp: compiling
// its bounded repetition at every start of aerie cost more than a load of
// the personas.
func ValidPersonaName(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for i := range len(name) {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// TypePersona is the report's type for persona files.
const TypePersona layer.Type = "persona"

// ErrUnknownPersona means a persona was asked for that no layer defines.
var ErrUnknownPersona = errors.New("unknown persona")

// ErrInvalidPersonaName means a persona was asked for by a name no
// persona file can have.
var ErrInvalidPersonaName = errors.New("invalid persona name")

// Persona is a loaded persona.
type Persona struct {
	// Name is the persona's name.
	Name string `json:"name"`
	// Description says what the persona is for.
	Description string `json:"description,omitempty"`
	// Prompt is the persona's base system prompt.
	Prompt string `json:"-"`
	// Toolset is the toolset the persona selects, if any.
	Toolset string `json:"toolset,omitempty"`
	// Path is the file it was read from.
	Path string `json:"path"`
}

// personaDoc is a persona file.
type personaDoc struct {
	Description string `toml:"description"`
	Prompt      string `toml:"prompt"`
	Toolset     string `toml:"toolset"`
}

// ParsePersona parses a persona file. path is used in errors only.
// Unknown keys are errors.
func ParsePersona(path string, doc []byte) (Persona, error) {
	var d personaDoc
	if err := layer.DecodeTOML(path, doc, &d); err != nil {
		return Persona{}, err
	}
	switch {
	case strings.TrimSpace(d.Prompt) == "":
		return Persona{}, layer.Placed(path, doc, layer.FieldErrorf("prompt", "missing: the persona's base system prompt"))
	case d.Toolset != "" && strings.TrimSpace(d.Toolset) != d.Toolset:
		return Persona{}, layer.Placed(path, doc,
			layer.FieldErrorf("toolset", "%q has blank space around the name", d.Toolset))
	}
	return Persona{Description: d.Description, Prompt: text([]byte(d.Prompt)), Toolset: d.Toolset, Path: path}, nil
}

// LoadPersona finds the persona called name in src's layers: the first
// valid personas/<name>.toml, nearest layer first. A file that cannot be
// read or parsed is skipped with its reason — and in a layer the session's
// submitter controls it is an error, as every problem there is. No file
// at all is ErrUnknownPersona, except for the default persona (or an
// empty name), which then is the zero Persona with Name "default": the
// caller's built-in prompt stands.
//
// The artifacts list every file found, for the extensions report.
func LoadPersona(src layer.Source, name string) (Persona, []layer.Artifact, error) {
	if name == "" {
		name = DefaultPersona
	}
	if !ValidPersonaName(name) {
		return Persona{}, nil, fmt.Errorf(
			"persona %q: %w: want 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit",
			name, ErrInvalidPersonaName)
	}
	v, err := src.Open()
	if err != nil {
		return Persona{}, nil, err
	}
	defer v.Close()
	file := PersonasDir + "/" + name + ".toml"
	var (
		arts  []layer.Artifact
		found *Persona
		errs  []error
	)
	for _, lv := range v.Layers {
		if lv.Err != nil {
			continue
		}
		if !lv.Files.There(file) {
			continue
		}
		a := layer.NewArtifact(TypePersona, lv, file)
		a.Name = name
		if found != nil {
			a.Status, a.ShadowedBy, a.Reason = layer.StatusShadowed, found.Path, "shadowed by "+found.Path
			arts = append(arts, a)
			continue
		}
		doc, err := lv.Files.ReadFile(file, layer.MaxArtifactBytes)
		var p Persona
		if err == nil {
			a.Digest = layer.Digest(doc)
			p, err = ParsePersona(a.Path, doc)
		}
		if err != nil {
			err = fmt.Errorf("read persona: %w", layer.ExplainEscape(err))
			a.Skip(err)
			if a.Problem() {
				errs = append(errs, err)
			}
			arts = append(arts, a)
			continue
		}
		p.Name = name
		found = &p
		a.Status = layer.StatusActive
		arts = append(arts, a)
	}
	if len(errs) > 0 {
		return Persona{}, arts, fmt.Errorf("persona %q: %w", name, errors.Join(errs...))
	}
	if found != nil {
		return *found, arts, nil
	}
	if name == DefaultPersona {
		return Persona{Name: DefaultPersona}, arts, nil
	}
	where := fmt.Sprintf("%s in the layers %s", file, quoteList(layerNames(src.Layers)))
	if len(arts) > 0 {
		return Persona{}, arts, fmt.Errorf("persona %q: %w: no valid %s", name, ErrUnknownPersona, where)
	}
	return Persona{}, arts, fmt.Errorf("persona %q: %w: no %s", name, ErrUnknownPersona, where)
}

// PersonaNames returns the names of the personas the layers of src hold
// (personas/<name>.toml with a valid name), sorted, each once: what an
// unknown persona's error can offer instead. Layers that cannot be read
// are passed over.
func PersonaNames(src layer.Source) ([]string, error) {
	v, err := src.Open()
	if err != nil {
		return nil, err
	}
	defer v.Close()
	seen := map[string]bool{}
	for _, lv := range v.Layers {
		if lv.Err != nil {
			continue
		}
		files, _, err := lv.Files.ReadDir(PersonasDir)
		if err != nil {
			continue
		}
		for _, f := range files {
			if name, ok := strings.CutSuffix(f, ".toml"); ok && ValidPersonaName(name) {
				seen[name] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
