package layer

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Listing is what the top directory of each layer held when a load began,
// listed once and shared by the loaders. Each of them looks for a handful
// of names there — trust.toml, SYSTEM.md, hooks.toml, tools/, skills/,
// plugins/, mcp_servers/, provenance sidecars — and most layers hold few
// of them: a name the listing does not show is not looked for, where each
// loader would otherwise pay a failed open or lstat for it.
//
// A Listing is a snapshot. A name it shows is read as before, and a file
// removed since fails to open as it would after an lstat; a file created
// since is seen at the next load. A layer that could not be listed, or
// holds more than maxListed entries, is unknown: loaders look as they
// would without a Listing. A nil *Listing knows nothing. It is safe for
// concurrent use once made.
//
// A Listing also holds each listed layer's directory open, and the
// workspace's, for the loaders to read through (Dir, Workspace) rather
// than each opening them again; Close releases them.
type Listing struct {
	// names are each listed layer's entries, by the layer's Dir.
	names map[string]map[string]struct{}
	// dirs are the listed layers' directories, by the layer's Dir: a
	// project layer's opened beneath ws.
	dirs map[string]*Dir
	// ws is the workspace, at wsDir; nil when no project layer needed it
	// or it could not be opened.
	ws    *Dir
	wsDir string
}

// maxListed bounds the entries read from one layer's top directory; a
// layer with more is left unknown rather than listed whole.
const maxListed = 4096

// ListLayers lists the top directory of every layer on disk: a project
// layer through the workspace (a Dir opened there, so that the listing
// never follows a link out of it), the others at their directory.
func ListLayers(layers []Layer, workspace string) *Listing {
	ls := &Listing{names: make(map[string]map[string]struct{}, len(layers)), dirs: make(map[string]*Dir, len(layers))}
	var wsErr error
	for _, l := range layers {
		if l.Dir == "" || !filepath.IsAbs(l.Dir) || ls.dirs[l.Dir] != nil {
			continue
		}
		var (
			d   *Dir
			err error
		)
		if l.Kind == KindProject {
			if workspace == "" {
				continue
			}
			if ls.ws == nil && wsErr == nil {
				if ls.wsDir, _, wsErr = within(workspace, workspace); wsErr == nil {
					ls.ws, wsErr = OpenDir(ls.wsDir)
				}
			}
			if wsErr != nil {
				continue
			}
			_, rel, relErr := within(ls.wsDir, l.Dir)
			if relErr != nil || rel == "." {
				continue
			}
			d, err = ls.ws.listable(filepath.ToSlash(rel))
		} else {
			d, err = openListable(l.Dir)
		}
		if err != nil {
			continue
		}
		names, err := d.names(maxListed)
		if err != nil {
			d.Close()
			continue
		}
		ls.dirs[l.Dir] = d
		set := make(map[string]struct{}, len(names))
		for _, n := range names {
			set[n] = struct{}{}
		}
		ls.names[l.Dir] = set
	}
	return ls
}

// Close releases the directories the listing holds open.
func (ls *Listing) Close() error {
	if ls == nil {
		return nil
	}
	var errs []error
	for _, d := range ls.dirs {
		errs = append(errs, d.Close())
	}
	if ls.ws != nil {
		errs = append(errs, ls.ws.Close())
	}
	return errors.Join(errs...)
}

// Dir returns l's directory, held open by the listing: opened beneath
// the workspace for a project layer. nil when the layer was not listed.
// The caller must not close it.
func (ls *Listing) Dir(l Layer) *Dir {
	if ls == nil {
		return nil
	}
	return ls.dirs[l.Dir]
}

// Workspace returns the workspace directory held open by the listing
// when dir (absolute) names it as the listing opened it; nil otherwise.
// The caller must not close it.
func (ls *Listing) Workspace(dir string) *Dir {
	if ls == nil || ls.ws == nil || filepath.Clean(dir) != ls.wsDir {
		return nil
	}
	return ls.ws
}

// Absent reports whether the listing shows that l's directory has no
// entry name (a single path element). False when it cannot tell.
func (ls *Listing) Absent(l Layer, name string) bool {
	if ls == nil {
		return false
	}
	set, ok := ls.names[l.Dir]
	if !ok {
		return false
	}
	_, there := set[name]
	return !there
}

// of returns the listing of l's directory, nil when unknown.
func (ls *Listing) of(l Layer) map[string]struct{} {
	if ls == nil {
		return nil
	}
	return ls.names[l.Dir]
}

// listable opens the directory name below d for listing as well as for
// reading beneath it: a Dir whose descriptor getdents can read. It is
// an os.Root's Dir where openat2 would not decide.
func (d *Dir) listable(name string) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, &fs.PathError{Op: opOpenat, Path: name, Err: err}
	}
	if d.fd < 0 {
		return d.OpenDir(name)
	}
	fd, redo, err := d.openBeneath(name, unix.O_RDONLY|unix.O_DIRECTORY)
	if redo {
		return d.OpenDir(name)
	}
	if err != nil {
		return nil, &fs.PathError{Op: opOpenat, Path: name, Err: err}
	}
	return &Dir{path: path.Join(d.path, name), top: d.top, fd: fd}, nil
}

// openListable is OpenDir with a descriptor getdents can read.
func openListable(p string) (*Dir, error) {
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	if !probeOpenat2(fd) {
		unix.Close(fd)
		return OpenDir(p)
	}
	return &Dir{path: p, top: p, fd: fd}, nil
}

// errTooMany means a directory holds more entries than asked for.
var errTooMany = errors.New("too many entries")

// names returns the names in d's own directory (without "." and ".."),
// unsorted, failing with errTooMany beyond max. d must have been opened
// by listable or openListable, and is listed once: the names are read
// from its descriptor with bare system calls, getdents until the end.
func (d *Dir) names(max int) ([]string, error) {
	if d.fd < 0 {
		return d.namesOS(".", max)
	}
	var (
		buf   [8192]byte
		names []string
	)
	for {
		n, err := ignoringEINTR(func() (int, error) { return unix.Getdents(d.fd, buf[:]) })
		if err != nil {
			return nil, &fs.PathError{Op: opReaddirent, Path: d.path, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
		if len(names) > max {
			return nil, errTooMany
		}
	}
}

// namesOS is names through the os.Root.
func (d *Dir) namesOS(name string, max int) ([]string, error) {
	f, err := d.openDir(name)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	names, err := f.Readdirnames(max + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(names) > max {
		return nil, errTooMany
	}
	return names, nil
}
