package extensions

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aerie-run/aerie/runner/layer"
)

// ToolsetsFile is the layered toolsets file; the nearest one wins.
const ToolsetsFile = "toolsets.toml"

// Toolset errors, for errors.Is.
var (
	// ErrNoToolsets means a toolset was requested and no usable
	// toolsets.toml was found.
	ErrNoToolsets = errors.New("no toolsets.toml")
	// ErrUnknownToolset means a requested or included toolset is not
	// defined.
	ErrUnknownToolset = errors.New("unknown toolset")
)

// Toolset is one [toolsets.<name>] table.
type Toolset struct {
	// Tools are built-in and custom tool names.
	Tools []string `toml:"tools" json:"tools,omitempty"`
	// Includes name other toolsets whose tools are added.
	Includes []string `toml:"includes" json:"includes,omitempty"`
	// Exclude names tools removed after the union.
	Exclude []string `toml:"exclude" json:"exclude,omitempty"`
}

type toolsetsDoc struct {
	Toolsets map[string]Toolset `toml:"toolsets"`
}

// ParseToolsets parses a toolsets.toml. Unknown keys are errors. An
// include of an undefined toolset is not: it is reported when the toolset
// is used, naming the toolset that includes it, as the spec says.
func ParseToolsets(path string, doc []byte) (map[string]Toolset, error) {
	var d toolsetsDoc
	if err := layer.DecodeTOML(path, doc, &d); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(d.Toolsets) {
		ts := d.Toolsets[name]
		if strings.TrimSpace(name) == "" {
			return nil, layer.Placed(path, doc, layer.FieldErrorf("toolsets", "a toolset has an empty name"))
		}
		for _, f := range []struct {
			key  string
			list []string
		}{{"tools", ts.Tools}, {"includes", ts.Includes}, {"exclude", ts.Exclude}} {
			if slices.Contains(f.list, "") {
				return nil, layer.Placed(path, doc, layer.FieldErrorf("toolsets."+name+"."+f.key, "contains an empty name"))
			}
		}
	}
	if d.Toolsets == nil {
		d.Toolsets = map[string]Toolset{}
	}
	return d.Toolsets, nil
}

// Toolsets are the named toolsets of a session, from the nearest
// toolsets.toml. A nil *Toolsets means none was found.
type Toolsets struct {
	// Path is the file the toolsets come from.
	Path string
	sets map[string]Toolset
	// err is why the nearest file was skipped; sets is then empty.
	err error
}

// NewToolsets returns the toolsets sets, as if read from path.
func NewToolsets(path string, sets map[string]Toolset) *Toolsets {
	return &Toolsets{Path: path, sets: sets}
}

// Names returns the defined toolsets' names, sorted.
func (t *Toolsets) Names() []string {
	if t == nil {
		return nil
	}
	return sortedKeys(t.sets)
}

// Resolve returns the tool names of the toolset name, sorted: its tools
// and, recursively, those of the toolsets it includes, each set's
// exclusions removed after its union. An include cycle stops at the first
// toolset seen again.
func (t *Toolsets) Resolve(name string) ([]string, error) {
	if t == nil {
		return nil, fmt.Errorf("toolset %q: %w was found in the extension layers; define it in .aerie/%s or $AERIE_HOME/%s",
			name, ErrNoToolsets, ToolsetsFile, ToolsetsFile)
	}
	if t.err != nil {
		return nil, fmt.Errorf("toolset %q: %w is usable: %s was skipped: %v", name, ErrNoToolsets, t.Path, t.err)
	}
	if _, ok := t.sets[name]; !ok {
		avail := "none are defined"
		if names := t.Names(); len(names) > 0 {
			avail = "available: " + strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("%w %q (%s in %s)", ErrUnknownToolset, name, avail, t.Path)
	}
	set, err := t.resolve(name, map[string]bool{}, map[string]map[string]bool{})
	if err != nil {
		return nil, err
	}
	return sortedKeys(set), nil
}

// resolve unions the toolset name with the sets it includes, depth first.
// path holds the sets being resolved above it, so an include of one of
// them is a cycle and stops there. done holds the sets already resolved,
// so a set included along two branches is resolved once and counted in
// both (a set merged twice is not a cycle).
func (t *Toolsets) resolve(
	name string, path map[string]bool, done map[string]map[string]bool,
) (map[string]bool, error) {
	if set, ok := done[name]; ok {
		return set, nil
	}
	path[name] = true
	defer delete(path, name)
	ts := t.sets[name]
	out := make(map[string]bool, len(ts.Tools))
	for _, tool := range ts.Tools {
		out[tool] = true
	}
	for _, inc := range ts.Includes {
		if path[inc] {
			continue // a cycle: it stops at the first repeated set
		}
		if _, ok := t.sets[inc]; !ok {
			return nil, fmt.Errorf("toolset %q includes %w %q (in %s)", name, ErrUnknownToolset, inc, t.Path)
		}
		sub, err := t.resolve(inc, path, done)
		if err != nil {
			return nil, err
		}
		for tool := range sub {
			out[tool] = true
		}
		for _, ex := range ts.Exclude {
			delete(out, ex)
		}
	}
	for _, ex := range ts.Exclude {
		delete(out, ex)
	}
	done[name] = out
	return out, nil
}

// Apply selects from available (tool names, in the order offered to the
// model) those in the toolset name, keeping their order. missing lists the
// toolset's names that are not available — an inactive custom tool, a
// typo — for a warning.
func (t *Toolsets) Apply(name string, available []string) (selected, missing []string, err error) {
	names, err := t.Resolve(name)
	if err != nil {
		return nil, nil, err
	}
	for _, tool := range available {
		if _, ok := slices.BinarySearch(names, tool); ok {
			selected = append(selected, tool)
		}
	}
	for _, tool := range names {
		if !slices.Contains(available, tool) {
			missing = append(missing, tool)
		}
	}
	return selected, missing, nil
}

// LoadToolsets reads the nearest toolsets.toml of src. A malformed nearest
// file is skipped without trying a farther copy: requesting a toolset then
// fails with its error. The result is nil when no layer has the file.
func LoadToolsets(src layer.Source) (*Toolsets, []layer.Artifact, error) {
	v, err := src.Open()
	if err != nil {
		return nil, nil, err
	}
	defer v.Close()
	t, arts := loadToolsets(v)
	return t, arts, nil
}

func loadToolsets(v *layer.View) (*Toolsets, []layer.Artifact) {
	var (
		t       *Toolsets
		arts    []layer.Artifact
		decider = -1
	)
	for _, lv := range v.Layers {
		if lv.Err != nil {
			continue
		}
		if !lv.Files.There(ToolsetsFile) {
			continue
		}
		a := layer.NewArtifact(TypeToolsets, lv, ToolsetsFile)
		a.Name = ToolsetsFile
		if decider >= 0 {
			a.Digest = lv.Files.Digest(ToolsetsFile)
			a.Shadow(&arts[decider])
			arts = append(arts, a)
			continue
		}
		decider = len(arts)
		doc, err := lv.Files.ReadFile(ToolsetsFile, layer.MaxArtifactBytes)
		var sets map[string]Toolset
		if err == nil {
			a.Digest = layer.Digest(doc)
			a.SetProvenance(lv.Files.Provenance(ToolsetsFile, doc))
			sets, err = ParseToolsets(a.Path, doc)
		}
		if err != nil {
			err = layer.ExplainEscape(err)
			a.Skip(fmt.Errorf("read %s: %w; a farther %s is not used in its place", ToolsetsFile, err, ToolsetsFile))
			t = &Toolsets{Path: a.Path, err: err}
		} else {
			a.Status, t = layer.StatusActive, &Toolsets{Path: a.Path, sets: sets}
		}
		arts = append(arts, a)
	}
	return t, arts
}
