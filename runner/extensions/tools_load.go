package extensions

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/aerie-run/aerie/runner/layer"
)

// ToolsDir is the directory of custom tool manifests in a layer.
const ToolsDir = "tools"

// MaxManifests caps the manifests loaded from one tools/ directory, in
// name order; the rest are reported as skipped. The directory is listed up
// to layer.MaxDirEntries entries.
const MaxManifests = 1024

// ToolOptions say how custom tools are loaded.
type ToolOptions struct {
	// Builtins are the built-in tool names, which custom tools cannot
	// shadow.
	Builtins []string
	// Pins decide the trust of tools that need it; nil trusts none of
	// them.
	Pins *layer.Pins
	// Commands runs the tools.
	Commands Commands
	// Executors are the session's executors besides the default, which a
	// manifest may name (executor = "NAME"): its tool runs there.
	Executors []NamedCommands
	// Env is their environment; empty means the executor's default.
	Env []string
}

// LoadTools loads the custom tools of src's layers, nearest first. For
// each name, the first manifest that is valid and trusted wins; farther
// copies are shadowed. The error means src is unusable.
func LoadTools(src layer.Source, opts ToolOptions) ([]*Tool, []layer.Artifact, error) {
	v, err := src.Open()
	if err != nil {
		return nil, nil, err
	}
	defer v.Close()
	ts, arts := loadTools(v, opts)
	return ts, arts, nil
}

// loadConcurrency bounds the layers read at once. Reading is mostly
// system calls (os.Root resolves paths one component at a time), which
// overlap well even on few cores.
const loadConcurrency = 8

// eachLayer calls fn on every readable layer of v, at most
// loadConcurrency at once, and returns the results in layer order (the
// zero T for a layer that cannot be read).
func eachLayer[T any](v *layer.View, fn func(lv layer.Opened) T) []T {
	out := make([]T, len(v.Layers))
	sem := make(chan struct{}, loadConcurrency)
	var wg sync.WaitGroup
	for i, lv := range v.Layers {
		if lv.Err != nil {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = fn(lv)
		})
	}
	wg.Wait()
	return out
}

// layerTools is what one layer's tools/ directory yielded, before
// precedence is applied.
type layerTools struct {
	arts  []layer.Artifact
	tools []*Tool // parallel to arts; nil unless active
}

func loadTools(v *layer.View, opts ToolOptions) ([]*Tool, []layer.Artifact) {
	// Every layer is read on its own (concurrently); precedence needs
	// only names and statuses, and is applied afterwards in layer order.
	perLayer := eachLayer(v, func(lv layer.Opened) layerTools { return loadLayerTools(lv, opts) })

	var (
		out     []*Tool
		arts    []layer.Artifact
		winners = map[string]int{} // tool name → index in arts
	)
	for _, lt := range perLayer {
		for j, a := range lt.arts {
			if a.Status != layer.StatusSkipped && a.Type == TypeTool && a.Name != "" {
				if w, ok := winners[a.Name]; ok {
					a.Shadow(&arts[w])
				} else if a.Status == layer.StatusActive {
					winners[a.Name] = len(arts)
					out = append(out, lt.tools[j])
				}
			}
			arts = append(arts, a)
		}
	}
	return out, arts
}

// loadLayerTools loads every manifest of one layer's tools/ directory.
func loadLayerTools(lv layer.Opened, opts ToolOptions) layerTools {
	var lt layerTools
	add := func(a layer.Artifact, t *Tool) {
		lt.arts = append(lt.arts, a)
		lt.tools = append(lt.tools, t)
	}
	names, more, err := lv.Files.ReadDir(ToolsDir)
	if layer.Absent(err) {
		return lt
	}
	if err != nil {
		a := layer.NewArtifact(TypeTool, lv, ToolsDir)
		a.Skip(fmt.Errorf("read tools directory: %w", err))
		add(a, nil)
		return lt
	}
	// A sidecar is read only when the listing has it: most tools have
	// none, and a failed open costs as much as a read.
	sidecars := map[string]bool{}
	for _, n := range names {
		if strings.HasSuffix(n, layer.ProvenanceSuffix) {
			sidecars[n] = true
		}
	}
	manifests := slices.DeleteFunc(names, func(n string) bool {
		return strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".toml")
	})
	if len(manifests) > MaxManifests || more {
		a := layer.NewArtifact(TypeTool, lv, ToolsDir)
		a.Skip(fmt.Errorf("only the first %d manifests in name order (of the first %d directory entries) are loaded; "+
			"split the tools over fewer files or layers", MaxManifests, layer.MaxDirEntries))
		add(a, nil)
		manifests = manifests[:min(len(manifests), MaxManifests)]
	}
	for _, name := range manifests {
		add(loadTool(lv, ToolsDir+"/"+name, sidecars[name+layer.ProvenanceSuffix], opts))
	}
	return lt
}

// loadTool reads, parses and checks the manifest name of lv. The
// artifact is skipped (malformed), inactive (untrusted) or active, in
// which case the tool is returned.
func loadTool(lv layer.Opened, name string, sidecar bool, opts ToolOptions) (layer.Artifact, *Tool) {
	a := layer.NewArtifact(TypeTool, lv, name)
	a.Name = strings.TrimSuffix(filepath.Base(name), ".toml")
	doc, err := lv.Files.ReadFile(name, layer.MaxArtifactBytes)
	if err != nil {
		a.Skip(fmt.Errorf("read manifest: %w", layer.ExplainEscape(err)))
		return a, nil
	}
	a.Digest = layer.Digest(doc)
	if sidecar {
		a.SetProvenance(lv.Files.Provenance(name, doc))
	} else {
		a.SetProvenance(layer.Provenance{State: layer.ProvenanceLegacy})
	}
	m, err := ParseManifest(a.Path, doc)
	if err != nil {
		a.Skip(err)
		return a, nil
	}
	a.Name = m.Name
	switch {
	case slices.Contains(opts.Builtins, m.Name):
		a.Skip(fmt.Errorf("%s is a built-in tool, and custom tools cannot shadow built-ins; rename it", m.Name))
		return a, nil
	case lv.Dir == "":
		a.Skip(errors.New("executable artifacts cannot be bundled: the bundled layer has no directory to run them from"))
		return a, nil
	}
	cmds, err := opts.commandsOf(m.Executor)
	if err != nil {
		a.Skip(layer.Placed(a.Path, doc, err))
		return a, nil
	}
	a.Executor = m.Executor
	t := NewTool(lv.Layer, a.Path, m, cmds, opts.Env)
	verdict := opts.Pins.CheckPreread(lv.Layer, a.Path, []string{t.argv[0]},
		layer.Preread{Doc: doc, Provenance: a.Provenance, Open: lv.Files.OpenBase})
	a.Trust = verdict.Status
	if verdict.Status != layer.Trusted {
		a.Status, a.Reason, a.Pin = layer.StatusInactive, layer.SanitizeReason(verdict.Reason), verdict.Pin
		return a, nil
	}
	if verdict.Pinned {
		t.verify = opts.Pins.Guard(lv.Layer, a.Path, []string{t.argv[0]}).Verify
	}
	a.Status = layer.StatusActive
	if m.Sandbox {
		a.Reason = "sandbox = true is recorded but not enforced"
	}
	return a, t
}

// DefaultExecutor is the name of the session's default executor, which
// a manifest may name too: its tools run there without executor.
const DefaultExecutor = "workspace"

// NamedCommands are one of the session's executors besides the default,
// by name; Commands nil loads the tools for the report only.
type NamedCommands struct {
	Name     string
	Commands Commands
}

// commandsOf are the commands of the executor a manifest names ("" is
// the default).
func (opts ToolOptions) commandsOf(name string) (Commands, error) {
	if name == "" || name == DefaultExecutor {
		return opts.Commands, nil
	}
	names := []string{DefaultExecutor}
	for _, e := range opts.Executors {
		if e.Name == name {
			return e.Commands, nil
		}
		names = append(names, e.Name)
	}
	return nil, layer.FieldErrorf("executor",
		"%q is not an executor of the session (%s): name one of them, or leave executor out to run the tool on %s",
		name, strings.Join(names, ", "), DefaultExecutor)
}
