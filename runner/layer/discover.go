package layer

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// ProjectDirs returns the names of project layer directories, in the
// order they are searched at one level: .aerie is aerie's own name and
// .osprey is read as an alias, so that repositories prepared for the
// reference tool work unchanged. Both are layers (and both may hold a
// project config.toml); at one level .aerie comes first.
func ProjectDirs() []string { return []string{".aerie", ".osprey"} }

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
		for _, name := range ProjectDirs() {
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
