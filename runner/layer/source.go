package layer

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
)

// Source is what a loader reads: the layers, nearest first, and the
// workspace they are used in. Locally the layers come from Discover; in a
// pod the controller hands the runner a list in the same shape.
type Source struct {
	// Layers are searched nearest first.
	Layers []Layer
	// Workspace is the workspace root. Project layers must be inside it;
	// they, AGENTS.md and CLAUDE.md are read through a Dir opened here.
	// Empty means WorkDir.
	Workspace string
	// WorkDir is the agent's working directory, where the AGENTS.md scan
	// ends and a relative AERIE_SYSTEM_PROMPT_FILE starts. Empty means
	// Workspace.
	WorkDir string
	// Getenv reads the environment variables that name artifacts
	// (AERIE_SYSTEM_PROMPT_FILE, AERIE_TOOL_DESCRIPTIONS_FILE); nil is an
	// empty environment.
	Getenv func(string) string
	// Listing, when set, is the load's listing of the layers' top
	// directories (ListLayers): names it does not show are not looked for.
	Listing *Listing
}

// View is a Source opened for reading: a Dir on the workspace and one
// per layer directory outside it. Close releases them.
type View struct {
	// Workspace is the absolute workspace root; "" when there is none.
	Workspace string
	// WorkRel is the working directory relative to Workspace.
	WorkRel string
	// Layers are the Source's layers, opened, in order.
	Layers []Opened

	src Source
	// ws is nil when the workspace cannot be opened (then wsErr says
	// why) or when there is none.
	ws      *Dir
	wsErr   error
	closers []*Dir
}

// Opened is one layer of a View. Err, when set, is why the layer cannot
// be read at all; Files is then the zero value, which must not be used.
type Opened struct {
	Layer
	Files Files
	Err   error
}

// Open opens s for reading. It fails only when WorkDir is outside the
// workspace; a layer that cannot be opened is kept with its error, for
// the report.
func (s Source) Open() (*View, error) {
	v := &View{src: s}
	ws, wd := s.Workspace, s.WorkDir
	if ws == "" {
		ws = wd
	}
	if wd == "" {
		wd = ws
	}
	if ws != "" {
		dir, rel, err := within(ws, wd)
		if err != nil {
			return nil, fmt.Errorf("open layers: working directory %w", err)
		}
		v.Workspace, v.WorkRel = dir, rel
		if v.ws = s.Listing.Workspace(dir); v.ws != nil {
			// The listing's, which it closes.
		} else if v.ws, err = OpenDir(dir); err != nil {
			v.ws, v.wsErr = nil, err
		} else {
			v.closers = append(v.closers, v.ws)
		}
	}
	for _, l := range s.Layers {
		lv := Opened{Layer: l}
		var f files
		if f, lv.Err = v.openLayer(l); lv.Err == nil {
			lv.Files = Files{f: f}
		}
		v.Layers = append(v.Layers, lv)
	}
	return v, nil
}

// WorkspaceDir returns the workspace, open for reading; nil when there is
// none or it cannot be opened. The caller must not close it.
func (v *View) WorkspaceDir() *Dir { return v.ws }

// WorkDir returns the absolute working directory; "" without a
// workspace.
func (v *View) WorkDir() string {
	if v.Workspace == "" {
		return ""
	}
	return filepath.Join(v.Workspace, v.WorkRel)
}

// Getenv reads the environment variable key through the Source's Getenv.
func (v *View) Getenv(key string) string {
	if v.src.Getenv == nil {
		return ""
	}
	return v.src.Getenv(key)
}

func (v *View) openLayer(l Layer) (files, error) {
	switch {
	case l.Kind == KindBundled && l.Dir == "":
		return fsFiles{fsys: bundledRoot, prefix: "bundled:"}, nil
	case l.Dir == "":
		return nil, errors.New("the layer has no directory")
	case !filepath.IsAbs(l.Dir):
		return nil, fmt.Errorf("layer directory %s is not absolute", l.Dir)
	case l.Kind == KindProject:
		if v.Workspace == "" {
			return nil, errors.New("a project layer needs a workspace")
		}
		if v.ws == nil {
			return nil, fmt.Errorf("open workspace: %w", v.wsErr)
		}
		_, rel, err := within(v.Workspace, l.Dir)
		if err != nil {
			return nil, fmt.Errorf("project layer %w", err)
		}
		if sub := v.src.Listing.Dir(l); sub != nil {
			return rootFiles{root: v.ws, sub: sub, dir: l.Dir, prefix: rel, top: v.src.Listing.of(l)}, nil
		}
		sub, err := v.ws.OpenDir(filepath.ToSlash(rel))
		switch {
		case errors.Is(err, syscall.ENOTDIR):
			return nil, fmt.Errorf("%s is not a directory", l.Dir)
		case err != nil:
			return nil, err
		}
		v.closers = append(v.closers, sub)
		return rootFiles{root: v.ws, sub: sub, dir: l.Dir, prefix: rel, top: v.src.Listing.of(l)}, nil
	default:
		if r := v.src.Listing.Dir(l); r != nil {
			return rootFiles{root: r, dir: l.Dir, prefix: ".", top: v.src.Listing.of(l)}, nil
		}
		r, err := OpenDir(l.Dir)
		if err != nil {
			return nil, err
		}
		v.closers = append(v.closers, r)
		return rootFiles{root: r, dir: l.Dir, prefix: ".", top: v.src.Listing.of(l)}, nil
	}
}

// Close releases the directories the view opened.
func (v *View) Close() {
	for _, r := range v.closers {
		r.Close()
	}
}
