package skills

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aerie-run/aerie/runner/layer"
)

// MaxFileSize bounds a SKILL.md: larger files are not read, as the spec
// says.
const MaxFileSize = 1 << 20

// maxDirs bounds the directories one root's search visits, skill
// directories and links to them included, so that a root holding a huge
// tree (a checkout, a node_modules) or ten thousand planted skills cannot
// stall the start of a session. No real skill collection comes near it:
// ten times the thousand skills discovery is measured with.
const maxDirs = 10_000

// Root is one place skills are searched, recursively.
type Root struct {
	// Name identifies the root in reports: a layer's name, "workdir
	// .agents/skills", "plugin review".
	Name string `json:"name"`
	// Dir is the absolute directory searched. A missing one holds no
	// skills.
	Dir string `json:"dir"`
	// Strict makes a malformed skill an error, as in the private skills
	// directory and the built-in set; elsewhere it is skipped.
	Strict bool `json:"strict,omitempty"`
	// Confine, when set, is a directory no read may leave, through ".."
	// or a symbolic link: the workspace, for roots a repository controls,
	// so that a planted link cannot make the agent read the runner's own
	// files.
	Confine string `json:"confine,omitempty"`
	// Namespace, when set, is the plugin the root belongs to: its skills
	// are named <namespace>:<skill>.
	Namespace string `json:"namespace,omitempty"`
	// Kind is the kind of extension layer the root is in, for the report:
	// the layer's, for a layer's skills/ and a plugin's skills; project for
	// the working directory's .agents/skills and .claude/skills, which the
	// workspace holds; empty for the home directory's, which are in none.
	Kind layer.Kind `json:"kind,omitempty"`
}

// Options locate the workspace conventions around the layers.
type Options struct {
	// WorkDir is the agent's working directory; its .agents/skills and
	// .claude/skills come first. Skipped when empty.
	WorkDir string
	// Workspace is the workspace root: reads from the working directory's
	// conventions and from project layers stay inside it. WorkDir when
	// empty.
	Workspace string
	// Home is the home directory whose .agents/skills and .claude/skills
	// come last. Skipped when empty.
	Home string
	// Plugins are the skill roots of enabled plugins, in plugin-name
	// order, each with its Namespace; they come after the layers.
	Plugins []Root
	// Listing, when set, is the load's listing of the layers' top
	// directories (layer.ListLayers): a layer it shows without a skills directory
	// is not opened for it.
	Listing *layer.Listing
}

// Roots returns where skills are searched, first one first, as the spec
// orders them: the working directory's .agents/skills and .claude/skills,
// then skills/ in every layer nearest first (project layers, the
// session's spec, namespace and platform layers, $AERIE_HOME — the
// private skills directory — and the bundled built-ins), then the
// plugins' skills, then the home directory's .agents/skills and
// .claude/skills. Skills in private layers are strict (a malformed one is
// an error); the workspace's, plugins in it included, are confined to the
// workspace.
func Roots(layers []layer.Layer, opts Options) []Root {
	var roots []Root
	ws := opts.Workspace
	if ws == "" {
		ws = opts.WorkDir
	}
	if opts.WorkDir != "" {
		for _, conv := range []string{".agents/skills", ".claude/skills"} {
			roots = append(roots, Root{
				Name: "workdir " + conv, Dir: filepath.Join(opts.WorkDir, conv), Confine: ws, Kind: layer.KindProject,
			})
		}
	}
	for _, l := range layers {
		if l.Dir == "" {
			// A layer without a directory (the bundled layer, read from the
			// binary) has no skills/ on disk. Joining its empty Dir would give
			// the relative path "skills", and a repository's skills/ in the
			// current directory would load as a private, unconfined layer.
			continue
		}
		if opts.Listing.Absent(l, "skills") {
			continue // a missing root holds no skills
		}
		r := Root{Name: l.Name, Dir: filepath.Join(l.Dir, "skills"), Strict: l.Private(), Kind: l.Kind}
		if l.Kind == layer.KindProject {
			r.Confine = ws
			if r.Confine == "" || !within(r.Confine, l.Dir) {
				// The project directory holding the layer.
				r.Confine = filepath.Dir(l.Dir)
			}
		}
		roots = append(roots, r)
	}
	for _, p := range opts.Plugins {
		// A plugin inside the workspace (a project layer's) is the
		// repository's: its skills are confined like the project's.
		if p.Confine == "" && ws != "" && within(ws, p.Dir) {
			p.Confine = ws
		}
		// A plugin is in a layer's plugins/ directory.
		for _, l := range layers {
			if p.Kind == "" && l.Dir != "" && within(l.Dir, p.Dir) {
				p.Kind = l.Kind
			}
		}
		roots = append(roots, p)
	}
	if opts.Home != "" {
		for _, conv := range []string{".agents/skills", ".claude/skills"} {
			roots = append(roots, Root{Name: "home " + conv, Dir: filepath.Join(opts.Home, conv)})
		}
	}
	return roots
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Entry is one skill directory discovery found, for the extensions
// report.
type Entry struct {
	// Name is the skill's name, when it could be read.
	Name string `json:"name,omitempty"`
	// Root is the name of the root it was found in.
	Root string `json:"root"`
	// Kind is the root's Kind.
	Kind layer.Kind `json:"kind,omitempty"`
	// Path is the skill's directory.
	Path string `json:"path"`
	// Status is active (the skill is offered to the agent), shadowed (a
	// skill of its name was found first) or skipped (Reason says why).
	Status layer.Status `json:"status"`
	// Reason says why the skill is not active.
	Reason string `json:"reason,omitempty"`
	// Digest is "sha256:…" over the SKILL.md, when discovery read it
	// whole; FileDigest has it for the others.
	Digest string `json:"digest,omitempty"`

	// file locates the SKILL.md in Path that discovery read (in part,
	// when Digest is empty); its zero value means it read none.
	file fileRef
}

// fileRef locates a skill's SKILL.md as discovery read it, as Skill does:
// the confining directory ("" for none), and the skill directory's slash
// path from it (from the root's directory when unconfined, never empty).
type fileRef struct {
	confine, rel string
}

// FileDigest returns the entry's Digest, or when discovery read only the
// SKILL.md's frontmatter, the digest of the SKILL.md as it is now, read as
// discovery reads it: confined, bounded by MaxFileSize and without
// blocking on a FIFO. It is "" for an entry without a readable SKILL.md.
// Discovery leaves a skill's body unread, so that starting a session does
// not read every skill in full; only a report that shows digests pays for
// it.
func (e Entry) FileDigest() string {
	if e.Digest != "" || e.file.rel == "" {
		return e.Digest
	}
	root, err := Skill{Dir: e.Path, confine: e.file.confine, rel: e.file.rel}.open()
	if err != nil {
		return ""
	}
	defer root.Close()
	r := readIn(root, "SKILL.md")
	if r.err != nil {
		return ""
	}
	return layer.Digest(r.data)
}

// Discover searches roots in order and returns the skills found, the
// first of each name winning. Every skill directory found is in the
// Set's Entries, and every problem in its Problems; a malformed skill in
// a strict root is also an error, returned with the Set.
//
// Roots are searched concurrently — discovery is bound by file system
// calls, not by the processor — and their findings merged in order.
func Discover(roots []Root) (*Set, error) {
	return DiscoverIn(roots, nil)
}

// DiscoverIn is Discover reading confined roots through the workspace
// directory the load's listing holds open (layer.Listing.Workspace),
// rather than opening it for each root.
func DiscoverIn(roots []Root, listing *layer.Listing) (*Set, error) {
	found := make([]*discovery, len(roots))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(len(roots), maxWorkers) {
		wg.Go(func() {
			for i := range next {
				d := &discovery{root: roots[i], listing: listing}
				d.run()
				found[i] = d
			}
		})
	}
	for i := range roots {
		next <- i
	}
	close(next)
	wg.Wait()

	// Sized once: a session may have hundreds of skills. (Without any,
	// they stay nil, as appends would leave them.)
	var skills, entries int
	for _, d := range found {
		for _, it := range d.items {
			if it.skill != nil {
				skills++
			}
			if it.skill != nil || it.entry.Path != "" {
				entries++
			}
		}
	}
	s := &Set{byName: make(map[string]int, skills)}
	if skills > 0 {
		s.skills = make([]Skill, 0, skills)
	}
	if entries > 0 {
		s.Entries = make([]Entry, 0, entries)
	}
	var errs []error
	for _, d := range found {
		for _, it := range d.items {
			if it.problem != nil {
				s.Problems = append(s.Problems, *it.problem)
			}
			if it.skill != nil {
				s.add(*it.skill, it.entry)
			} else if it.entry.Path != "" {
				s.Entries = append(s.Entries, it.entry)
			}
		}
		errs = append(errs, d.errs...)
	}
	if len(errs) > 0 {
		return s, fmt.Errorf("discover skills: %w", errors.Join(errs...))
	}
	return s, nil
}

// maxWorkers bounds the roots searched at once.
const maxWorkers = 8

// add adds sk unless a skill of its name came first.
func (s *Set) add(sk Skill, e Entry) {
	if i, dup := s.byName[sk.Name]; dup {
		first := s.skills[i]
		e.Status, e.Reason = layer.StatusShadowed,
			fmt.Sprintf("a skill of the same name was found first, in %s (%s)", first.Root, first.Dir)
		s.Entries = append(s.Entries, e)
		return
	}
	s.byName[sk.Name] = len(s.skills)
	s.skills = append(s.skills, sk)
	e.Status = layer.StatusActive
	s.Entries = append(s.Entries, e)
}

// discovery searches one root.
type discovery struct {
	root Root
	// listing, when set, may hold the confining directory open.
	listing *layer.Listing
	// tree reads the root's directory tree; paths in it are relative to
	// the root's Dir. Links, which may lead elsewhere, are resolved in
	// outer, at base. For an unconfined root both are the plain file
	// system from Dir; a confined root is read through inner and outerDir
	// instead.
	tree     fs.FS
	outer    fs.FS
	treeRead fileReader
	outRead  fileReader
	base     string
	confined string
	// inner and outerDir are the tree and the confining directory of a
	// confined root, where tree and outer are nil: listed and searched
	// through them, a path resolves in one system call and a listing
	// costs no lstat per entry.
	inner, outerDir *layer.Dir
	// dirs counts the directories visited; stopped is set once the search
	// stops at maxDirs.
	dirs    int
	stopped bool
	items   []item
	errs    []error
}

// item is one finding, in the order found: a candidate skill with its
// entry (whose status the merge decides), or a skipped directory, or a
// problem, or a skipped directory with its problem.
type item struct {
	skill   *Skill
	entry   Entry
	problem *layer.Problem
}

func (d *discovery) run() {
	if d.root.Confine == "" {
		fi, err := os.Stat(d.root.Dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return // no skills here
		case err != nil:
			d.problem(d.root.Dir, "cannot read: %s", describe(err))
			return
		case !fi.IsDir():
			d.problem(d.root.Dir, "is not a directory")
			return
		}
		d.tree = os.DirFS(d.root.Dir)
		d.outer, d.base = d.tree, "."
		d.treeRead = fileReader{head: newFullReads(), fd: -1, dir: d.root.Dir}
		if fd, err := unix.Open(d.root.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			defer unix.Close(fd)
			d.treeRead.fd = fd
		}
		d.outRead = d.treeRead
		d.walk(".")
		return
	}
	rel, err := filepath.Rel(d.root.Confine, d.root.Dir)
	if err != nil || !within(d.root.Confine, d.root.Dir) {
		d.problem(d.root.Dir, "is outside %s, which it must stay inside", d.root.Confine)
		return
	}
	outer := d.listing.Workspace(d.root.Confine)
	if outer == nil {
		var err error
		outer, err = layer.OpenDir(d.root.Confine)
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if err != nil {
			d.problem(d.root.Dir, "cannot open %s: %s", d.root.Confine, describe(err))
			return
		}
		defer outer.Close()
	}
	inner, err := outer.OpenDir(filepath.ToSlash(rel))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case errors.Is(err, syscall.ENOTDIR):
		d.problem(d.root.Dir, "is not a directory")
		return
	case err != nil:
		d.problem(d.root.Dir, "cannot open: %s", describe(err))
		return
	}
	defer inner.Close()
	d.inner, d.outerDir, d.base, d.confined = inner, outer, filepath.ToSlash(rel), d.root.Confine
	budget := newFullReads()
	d.treeRead = fileReader{head: budget, fd: -1, confined: inner}
	d.outRead = fileReader{head: budget, fd: -1, confined: outer}
	d.walk(".")
}

// readDir lists the directory dir of the tree, sorted by name: at most
// layer.MaxDirEntries entries, as a custom tools directory is read;
// more reports that some were left out.
func (d *discovery) readDir(dir string) (entries []fs.DirEntry, more bool, err error) {
	if d.inner != nil {
		return d.inner.ReadDir(dir, layer.MaxDirEntries)
	}
	f, err := d.tree.Open(dir)
	if err != nil {
		return nil, false, err
	}
	defer f.Close() //nolint:errcheck // read-only
	rd, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, false, &fs.PathError{Op: "readdir", Path: dir, Err: errors.ErrUnsupported}
	}
	// In chunks: ReadDir(n) allocates room for n entries at once. One
	// entry past the cap tells whether there are more.
	for len(entries) <= layer.MaxDirEntries {
		des, err := rd.ReadDir(min(256, layer.MaxDirEntries+1-len(entries)))
		entries = append(entries, des...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, err
		}
	}
	if more = len(entries) > layer.MaxDirEntries; more {
		entries = entries[:layer.MaxDirEntries]
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, more, nil
}

// full reports whether the search has visited maxDirs directories, and
// records, once, that it stops at p: the first directory it leaves out.
func (d *discovery) full(p string) bool {
	if d.dirs < maxDirs {
		return false
	}
	if !d.stopped {
		d.stopped = true
		d.leftOut(p, "the search stopped after %d directories: this one and those after it in name order "+
			"are not searched; keep skills in a smaller tree", maxDirs)
	}
	return true
}

// isDir reports whether the path p (from the confining directory, or the
// root's directory) leads to a directory, following links.
func (d *discovery) isDir(p string) (bool, error) {
	if d.outerDir != nil {
		sub, err := d.outerDir.OpenDir(p)
		if errors.Is(err, syscall.ENOTDIR) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		sub.Close()
		return true, nil
	}
	fi, err := fs.Stat(d.outer, p)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

// walk searches dir, which is a skill when it holds SKILL.md; otherwise
// its subdirectories are searched in name order, and symbolic links
// straight to a single skill are followed.
func (d *discovery) walk(dir string) {
	if d.full(dir) {
		return
	}
	d.dirs++
	entries, more, err := d.readDir(dir)
	if err != nil {
		d.skipDir(dir, "cannot read the directory: %s", describe(err))
		return
	}
	if more {
		d.leftOut(dir, "the directory has more than %d entries: only the first %d it lists are searched; "+
			"keep skills in a smaller directory", layer.MaxDirEntries, layer.MaxDirEntries)
	}
	if d.items == nil {
		// Most entries of a skills directory are skills.
		d.items = make([]item, 0, len(entries))
	}
	for _, e := range entries {
		if e.Name() == fileName {
			r := d.treeRead.read(path.Join(dir, "SKILL.md"))
			d.skill(dir, r)
			r.release()
			return
		}
	}
	for _, e := range entries {
		name := e.Name()
		p := path.Join(dir, name)
		switch {
		case name == ".git":
			// Version control internals never hold skills; a layer that is
			// a checkout would otherwise cost a walk of its objects.
		case (e.IsDir() || e.Type()&fs.ModeSymlink != 0) && d.full(p):
			return
		case e.IsDir():
			// Most subdirectories are skills: try their SKILL.md first,
			// and list only those without one.
			r := d.treeRead.read(path.Join(p, "SKILL.md"))
			if errors.Is(r.err, fs.ErrNotExist) {
				d.walk(p)
				continue
			}
			d.dirs++
			d.skill(p, r)
			r.release()
		case e.Type()&fs.ModeSymlink != 0:
			d.dirs++
			d.link(p)
		}
	}
}

// link follows the symbolic link p when it points straight at a single
// skill directory. In a confined root it is resolved from the confining
// directory, so that it may lead anywhere inside it, but not out.
func (d *discovery) link(p string) {
	op := path.Join(d.base, p)
	isDir, err := d.isDir(op)
	if err != nil {
		d.skipDir(p, "symbolic link not followed: %s", describe(err))
		return
	}
	if !isDir {
		return // a link to a file is not a skill
	}
	r := d.outRead.read(path.Join(op, "SKILL.md"))
	if errors.Is(r.err, fs.ErrNotExist) {
		d.skipDir(p, "symbolic link not followed: it must point straight at a single skill directory (one holding SKILL.md)")
		return
	}
	d.skill(p, r)
	r.release()
}

// skill makes the skill in dir (a path in the tree) from its SKILL.md.
func (d *discovery) skill(dir string, r readResult) {
	abs := d.abs(dir)
	rel := dir
	if d.confined != "" {
		rel = path.Join(d.base, dir)
	}
	e := Entry{Root: d.root.Name, Kind: d.root.Kind, Path: abs}
	if r.err == nil {
		e.file = fileRef{confine: d.confined, rel: rel}
		if r.pooled == nil {
			// Read whole: its digest costs no read. (One read for its
			// frontmatter only gets it from FileDigest.)
			e.Digest = layer.Digest(r.data)
		}
	}
	// The SKILL.md's path is for problems only.
	file := func() string { return filepath.Join(abs, "SKILL.md") }
	if r.err != nil {
		d.malformed(e, file(), "", r.err.Error())
		return
	}
	fm, err := ParseFrontmatter(r.data)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			d.malformed(e, file(), fe.Field, fe.Reason)
		} else {
			d.malformed(e, file(), "", err.Error())
		}
		return
	}
	name := fm.Name
	if name == "" {
		name = filepath.Base(abs)
		if !ValidName(name) {
			d.malformed(e, file(), "name", fmt.Sprintf("missing, and the directory name %q is not a valid skill name; "+
				"add a name of lowercase letters, digits and single hyphens", name))
			return
		}
	}
	if d.root.Namespace != "" {
		name = d.root.Namespace + ":" + name
	}
	e.Name = name
	d.items = append(d.items, item{entry: e, skill: &Skill{
		Name: name, Description: fm.Description, Dir: abs, Root: d.root.Name, Plugin: d.root.Namespace,
		confine: d.confined, rel: rel,
	}})
}

// abs returns the absolute path of p, a path in the tree.
func (d *discovery) abs(p string) string {
	return filepath.Join(d.root.Dir, filepath.FromSlash(p))
}

// malformed records the skill of e that cannot be used: an error in a
// strict root, skipped elsewhere.
func (d *discovery) malformed(e Entry, file, field, reason string) {
	p := &layer.Problem{Layer: d.root.Name, File: file, Field: field, Reason: reason}
	e.Status, e.Reason = layer.StatusSkipped, reason
	if field != "" {
		e.Reason = field + ": " + reason
	}
	d.items = append(d.items, item{problem: p, entry: e})
	if d.root.Strict {
		d.errs = append(d.errs, *p)
	}
}

// skipDir records a directory or link that was not searched. It is not
// a malformed skill, so it is never an error.
func (d *discovery) skipDir(p, format string, args ...any) {
	abs := d.abs(p)
	reason := fmt.Sprintf(format, args...)
	d.items = append(d.items, item{
		problem: &layer.Problem{Layer: d.root.Name, File: abs, Reason: reason},
		entry:   Entry{Root: d.root.Name, Kind: d.root.Kind, Path: abs, Status: layer.StatusSkipped, Reason: reason},
	})
}

// leftOut records a directory, at p in the tree, that a bound of the
// search leaves (partly) unsearched. It is in the report, and in a strict
// root it is an error: whoever runs the session would otherwise lose
// skills without a word.
func (d *discovery) leftOut(p, format string, args ...any) {
	abs := d.abs(p)
	reason := fmt.Sprintf(format, args...)
	prob := &layer.Problem{Layer: d.root.Name, File: abs, Reason: reason}
	d.items = append(d.items, item{problem: prob, entry: Entry{
		Root: d.root.Name, Kind: d.root.Kind, Path: abs, Status: layer.StatusSkipped, Reason: reason,
	}})
	if d.root.Strict {
		d.errs = append(d.errs, *prob)
	}
}

// problem records a problem with the root itself; in a strict root it is
// an error.
func (d *discovery) problem(file, format string, args ...any) {
	p := &layer.Problem{Layer: d.root.Name, File: file, Reason: fmt.Sprintf(format, args...)}
	d.items = append(d.items, item{problem: p})
	if d.root.Strict {
		d.errs = append(d.errs, *p)
	}
}

// describe says what went wrong with a path without repeating it (the
// problem names the path already), and names escapes from a confined
// root for what they are.
func describe(err error) string {
	if errors.Is(err, layer.ErrEscapes) {
		return "it leads outside the workspace"
	}
	return unwrapPath(err).Error()
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
