package extensions

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
)

// ProjectDirs are the names of project layer directories, in the order
// they are searched at one level: .aerie is aerie's own name and .osprey
// is read as an alias, so that repositories prepared for the reference
// tool work unchanged. Both are layers; at one level .aerie comes first.
var ProjectDirs = []string{".aerie", ".osprey"}

//go:embed bundled
var bundledFS embed.FS

// bundledRoot is the bundled layer's content.
var bundledRoot = func() fs.FS {
	sub, err := fs.Sub(bundledFS, "bundled")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	return sub
}()

// Bundled returns the layer of artifacts embedded in the binary. Its Dir
// is empty: the artifacts are read in place, never written out, which is
// why the layer holds only text artifacts (see the package doc).
func Bundled() Layer {
	return Layer{Name: "bundled", Kind: KindBundled, Digest: bundledDigest()}
}

var bundledDigest = sync.OnceValue(func() string {
	d, err := digestFS(bundledRoot)
	if err != nil {
		panic(fmt.Sprintf("digest bundled layer: %v", err)) // embedded files always read
	}
	return d
})

// digestFS returns a digest of every regular file's name and bytes.
func digestFS(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
		return nil
	})
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), err
}

// DiscoverOptions says where local discovery looks.
type DiscoverOptions struct {
	// WorkDir is where the upward search for project layers starts.
	WorkDir string
	// Workspace is the boundary the search never goes above; it must
	// contain WorkDir. Empty means WorkDir itself, so that a stray .aerie
	// in a parent directory (a home directory, /tmp) is never picked up
	// without an explicit boundary. FindWorkspace gives the usual one.
	Workspace string
	// Home is $AERIE_HOME (runner/config.Home). Empty, or a directory
	// that does not exist, means no home layer.
	Home string
}

// Discover returns the local layers, nearest first: the project .aerie/
// and .osprey/ directories from the working directory up to the
// workspace root, then $AERIE_HOME, then the bundled layer.
func Discover(opts DiscoverOptions) ([]Layer, error) {
	ws := opts.Workspace
	if ws == "" {
		ws = opts.WorkDir
	}
	layers, err := ProjectLayers(ws, opts.WorkDir)
	if err != nil {
		return nil, err
	}
	if opts.Home != "" {
		home, err := filepath.Abs(opts.Home)
		if err != nil {
			return nil, fmt.Errorf("resolve home %s: %w", opts.Home, err)
		}
		if fi, err := os.Stat(home); err == nil && fi.IsDir() {
			// A home inside the workspace (a workspace at ~) is the user's
			// layer, not the project's: it holds the pins.
			layers = removeDir(layers, home)
			layers = append(layers, Layer{Name: "home", Dir: home, Kind: KindHome})
		}
	}
	return append(layers, Bundled()), nil
}

func removeDir(layers []Layer, dir string) []Layer {
	out := layers[:0]
	for _, l := range layers {
		if filepath.Clean(l.Dir) != dir {
			out = append(out, l)
		}
	}
	return out
}

// ProjectLayers returns the project layer directories between workDir and
// the workspace root, nearest first: at each level .aerie, then .osprey.
// The search reads through an os.Root at the workspace, so a .aerie that
// is a symbolic link out of the workspace is not a layer. Its error means
// workDir is not inside workspace.
func ProjectLayers(workspace, workDir string) ([]Layer, error) {
	ws, rel, err := within(workspace, workDir)
	if err != nil {
		return nil, fmt.Errorf("find project layers: working directory %w; run inside the workspace or widen it", err)
	}
	root, err := OpenDir(ws)
	if err != nil {
		return nil, fmt.Errorf("find project layers: %w", err)
	}
	defer root.Close()
	var layers []Layer
	for dir := rel; ; dir = filepath.Dir(dir) {
		for _, name := range ProjectDirs {
			p := filepath.Join(dir, name)
			if root.isDir(filepath.ToSlash(p)) {
				layers = append(layers, Layer{Name: filepath.ToSlash(p), Dir: filepath.Join(ws, p), Kind: KindProject})
			}
		}
		if dir == "." {
			return layers, nil
		}
	}
}

// FindWorkspace returns the workspace root for a local run in workDir:
// the root of the Git repository that contains it (the nearest directory
// above with a .git entry), or workDir itself outside a repository — the
// rule the OpenVaala spec gives for AGENTS.md.
func FindWorkspace(workDir string) (string, error) {
	wd, err := filepath.Abs(workDir)
	if err != nil {
		return "", fmt.Errorf("resolve working directory: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd, nil
		}
		dir = parent
	}
}

// Source is what every loader reads: the layers, nearest first, and the
// workspace they are used in. Locally the layers come from Discover; in a
// pod the controller hands the runner a list in the same shape.
type Source struct {
	// Layers are searched nearest first.
	Layers []Layer
	// Workspace is the workspace root. Project layers must be inside it;
	// they, AGENTS.md and CLAUDE.md are read through an os.Root opened
	// here. Empty means WorkDir.
	Workspace string
	// WorkDir is the agent's working directory, where the AGENTS.md scan
	// ends and a relative AERIE_SYSTEM_PROMPT_FILE starts. Empty means
	// Workspace.
	WorkDir string
	// Getenv reads AERIE_SYSTEM_PROMPT_FILE and
	// AERIE_TOOL_DESCRIPTIONS_FILE; nil is an empty environment.
	Getenv func(string) string
	// Listing, when set, is the load's listing of the layers' top
	// directories (ListLayers): names it does not show are not looked for.
	Listing *Listing
}

func (s Source) getenv(key string) string {
	if s.Getenv == nil {
		return ""
	}
	return s.Getenv(key)
}

// view is a Source opened for reading: a root on the workspace and one
// per layer directory outside it.
type view struct {
	src Source
	// wsDir is the absolute workspace root; ws is nil when it cannot be
	// opened (then wsErr says why) or when there is none.
	wsDir string
	ws    *Dir
	wsErr error
	// workRel is WorkDir relative to wsDir.
	workRel string
	layers  []layerView
	closers []*Dir
}

// layerView is one layer opened for reading. err, when set, is why the
// layer cannot be read at all.
type layerView struct {
	Layer
	files files
	err   error
}

// open opens src for reading. It fails only when WorkDir is outside the
// workspace; a layer that cannot be opened is kept with its error, for
// the report.
func (s Source) open() (*view, error) {
	v := &view{src: s}
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
			return nil, fmt.Errorf("open extensions: working directory %w", err)
		}
		v.wsDir, v.workRel = dir, rel
		if v.ws = s.Listing.Workspace(dir); v.ws != nil {
			// The listing's, which it closes.
		} else if v.ws, err = OpenDir(dir); err != nil {
			v.ws, v.wsErr = nil, err
		} else {
			v.closers = append(v.closers, v.ws)
		}
	}
	for _, l := range s.Layers {
		lv := layerView{Layer: l}
		lv.files, lv.err = v.openLayer(l)
		v.layers = append(v.layers, lv)
	}
	return v, nil
}

func (v *view) openLayer(l Layer) (files, error) {
	switch {
	case l.Kind == KindBundled && l.Dir == "":
		return fsFiles{fsys: bundledRoot, prefix: "bundled:"}, nil
	case l.Dir == "":
		return nil, errors.New("the layer has no directory")
	case !filepath.IsAbs(l.Dir):
		return nil, fmt.Errorf("layer directory %s is not absolute", l.Dir)
	case l.Kind == KindProject:
		if v.wsDir == "" {
			return nil, errors.New("a project layer needs a workspace")
		}
		if v.ws == nil {
			return nil, fmt.Errorf("open workspace: %w", v.wsErr)
		}
		_, rel, err := within(v.wsDir, l.Dir)
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

func (v *view) close() {
	for _, r := range v.closers {
		r.Close()
	}
}

// layerNames returns the layers' names for messages.
func layerNames(layers []Layer) []string {
	names := make([]string, len(layers))
	for i, l := range layers {
		names[i] = l.Name
	}
	return names
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// quoteList writes names as "a", "b".
func quoteList(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += strconv.Quote(n)
	}
	return s
}
