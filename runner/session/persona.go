package session

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/transcript"
)

// applyPersona loads the persona opts names from the layers and makes it
// the run's: its prompt the base prompt, its toolset the toolset when none
// was asked for, its name the session's persona setting. It returns the
// persona and its files for the report.
func applyPersona(opts *Options) (extensions.Persona, []layer.Artifact, error) {
	x := &opts.Extensions
	src := layer.Source{Layers: x.Layers, Workspace: x.Workspace, WorkDir: x.Dir}
	p, arts, err := extensions.LoadPersona(src, opts.Persona)
	if err != nil {
		if errors.Is(err, extensions.ErrUnknownPersona) {
			err = fmt.Errorf("%w; define it in %s/<name>.toml in a layer, or leave the persona empty for the default",
				err, extensions.PersonasDir)
		}
		return p, arts, &ConfigError{Err: err}
	}
	if p.Prompt != "" {
		x.System = p.Prompt
	}
	if opts.Toolset == "" {
		opts.Toolset = p.Toolset
	}
	opts.Model.Settings.Persona = p.Name
	if p.Name == extensions.DefaultPersona {
		// Stored as the spec says it: empty is the default persona.
		opts.Model.Settings.Persona = ""
	}
	return p, arts, nil
}

// recordedLayers are the run's layers with the digest of what each holds
// now, read as the loaders read them. A layer that changed since whoever
// listed it took its digest (a ConfigMap edited after the controller read
// it) is logged: the recorded digest is of what this run reads.
func recordedLayers(opts Options) []layer.Layer {
	layers, changed, errs := layer.WithDigests(opts.Extensions.workspace(), opts.Extensions.Layers)
	for _, l := range changed {
		opts.Logger.Warn("an extension layer changed after its digest was taken; recording what is there now",
			"layer", l.Name, "kind", l.Kind, "source", l.Source, "digest", l.Digest)
	}
	for _, err := range errs {
		opts.Logger.Warn("no digest for an extension layer", "err", err)
	}
	return layers
}

// layersEntry is the journal's record of the layers a run used.
func layersEntry(layers []layer.Layer) transcript.Layers {
	rec := transcript.Layers{Layers: make([]transcript.Layer, 0, len(layers))}
	for _, l := range layers {
		src := l.Source
		if src == "" && l.Dir != "" {
			src = filepath.Clean(l.Dir)
		}
		name := l.Name
		if name == "" {
			name = cmp.Or(src, "unnamed")
		}
		rec.Layers = append(rec.Layers, transcript.Layer{
			Name: name, Kind: cmp.Or(string(l.Kind), "unknown"), Source: src, Digest: l.Digest,
		})
	}
	return rec
}
