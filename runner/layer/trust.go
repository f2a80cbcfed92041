package layer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// TrustFile is the name of the pin file in a pinnable layer.
const TrustFile = "trust.toml"

// HomePinPrefix starts the pin path of an artifact in $AERIE_HOME, so
// that it can never be confused with a workspace path.
const HomePinPrefix = "$AERIE_HOME/"

// TrustStatus is an executable artifact's standing.
type TrustStatus string

// Trust statuses, as the spec names them.
const (
	// Trusted artifacts may run.
	Trusted TrustStatus = "trusted"
	// Untrusted artifacts have no pin (or the pins cannot be read).
	Untrusted TrustStatus = "untrusted"
	// Modified artifacts have a pin for their path, but their bytes (or
	// an executable's) changed since.
	Modified TrustStatus = "modified"
)

// Pin is one entry of trust.toml: an artifact's pin path and the hash its
// manifest and executables must have.
type Pin struct {
	Path   string `toml:"path" json:"path"`
	SHA256 string `toml:"sha256" json:"sha256"`
}

// TOML returns the pin as a trust.toml entry, ready to append.
func (p Pin) TOML() string {
	return fmt.Sprintf("[[pin]]\npath = %q\nsha256 = %q\n", p.Path, p.SHA256)
}

// trustDoc is trust.toml.
type trustDoc struct {
	Pin []Pin `toml:"pin"`
}

var hexSHA256 = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })

// ParseTrust parses a trust.toml. path is used in errors only.
func ParseTrust(path string, doc []byte) ([]Pin, error) {
	var d trustDoc
	if err := DecodeTOML(path, doc, &d); err != nil {
		return nil, err
	}
	for i := range d.Pin {
		p := &d.Pin[i]
		key := fmt.Sprintf("pin[%d]", i)
		p.SHA256 = strings.ToLower(p.SHA256)
		switch {
		case p.Path == "":
			return nil, Placed(path, doc, FieldErrorf(key+".path",
				"missing: the manifest's path from the workspace root, or $AERIE_HOME/… for a home artifact"))
		case strings.HasPrefix(p.Path, "/") || slices.Contains(strings.Split(p.Path, "/"), ".."):
			return nil, Placed(path, doc, FieldErrorf(key+".path",
				"%q must be relative to the workspace root, without ..", p.Path))
		case !hexSHA256().MatchString(p.SHA256):
			return nil, Placed(path, doc, FieldErrorf(key+".sha256",
				"%q is not 64 hexadecimal digits (copy it from aerie extensions)", p.SHA256))
		}
	}
	return d.Pin, nil
}

// Verdict is the outcome of a trust check.
type Verdict struct {
	Status TrustStatus
	// Reason says why, for the report.
	Reason string
	// Pin is the pin that would trust the artifact as it is now, when its
	// layer takes pins and the hash could be computed.
	Pin *Pin
	// Pinned means the verdict came from the pins: the artifact needs one.
	Pinned bool
}

// Pins are the trust pins of a session: the union of the trust.toml files
// of its pinnable layers. A Pins is immutable and safe for concurrent use.
//
// The zero value and nil hold no pins: every artifact that needs one is
// untrusted.
type Pins struct {
	workspace string
	byPath    map[string][]string
	// err, when set, is why a trust file could not be used: every
	// artifact that needs a pin fails closed.
	err error
}

// base is the workspace the pins' paths start from.
func (p *Pins) base() string {
	if p == nil {
		return ""
	}
	return p.workspace
}

// NewPins returns pins for the workspace root, as if read from a trust
// file. It is for callers that hold pins from elsewhere.
func NewPins(workspace string, pins ...Pin) *Pins {
	p := &Pins{workspace: workspace, byPath: map[string][]string{}}
	p.add(pins...)
	return p
}

// add adds pins while p is being built, before anyone reads it.
func (p *Pins) add(pins ...Pin) {
	for _, pin := range pins {
		p.byPath[pin.Path] = append(p.byPath[pin.Path], strings.ToLower(pin.SHA256))
	}
}

// LoadPins reads trust.toml from every pinnable layer of src. A trust file
// that cannot be read or parsed makes every artifact that needs a pin
// untrusted (fail closed). A trust.toml in a layer that is not pinnable
// (the workspace's) is ignored and reported.
func LoadPins(src Source) (*Pins, []Artifact, error) {
	v, err := src.Open()
	if err != nil {
		return nil, nil, err
	}
	defer v.Close()
	p, arts := ReadPins(v)
	return p, arts, nil
}

// ReadPins is LoadPins of an open Source, with extra: pins the session's
// submitter gives besides the trust files (an AgentSession's
// spec.trust.pinsFrom), honoured with theirs.
func ReadPins(v *View, extra ...Pin) (*Pins, []Artifact) {
	p := NewPins(v.Workspace)
	var arts []Artifact
	for _, lv := range v.Layers {
		if lv.Err != nil {
			continue
		}
		if !lv.Files.There(TrustFile) {
			continue
		}
		a := NewArtifact(TypeTrust, lv, TrustFile)
		a.Name = TrustFile
		if lv.IgnorePins {
			// The submitter's own choice, not a mistake: inactive, never
			// a problem that stops the session.
			a.Status = StatusInactive
			a.Reason = fmt.Sprintf(
				"not used: the session's trust sources leave out %s layers (spec.trust.sources)", lv.Kind)
			arts = append(arts, a)
			continue
		}
		if !lv.Pinnable() {
			a.Skip(errors.New("trust pins are honoured only from layers the session's submitter controls " +
				"($AERIE_HOME, spec, namespace and platform layers), never from the workspace"))
			arts = append(arts, a)
			continue
		}
		doc, err := lv.Files.ReadFile(TrustFile, MaxTrustBytes)
		var pins []Pin
		if err == nil {
			a.Digest = Digest(doc)
			pins, err = ParseTrust(a.Path, doc)
		}
		if err != nil {
			err = fmt.Errorf("read trust pins: %w; project executables stay inactive until it is fixed", err)
			p.err = errors.Join(p.err, err)
			a.Skip(err)
			arts = append(arts, a)
			continue
		}
		for _, pin := range pins {
			p.byPath[pin.Path] = append(p.byPath[pin.Path], pin.SHA256)
		}
		a.Status, a.Reason = StatusActive, fmt.Sprintf("%d pin(s)", len(pins))
		arts = append(arts, a)
	}
	p.add(extra...)
	return p, arts
}

// Trusted reports whether the executable artifact whose manifest is at
// manifest (an absolute path inside l) may run, and why. executables are
// the programs it runs: paths (a relative one is taken from the manifest's
// directory) or bare names looked up in PATH, which contribute nothing to
// the hash.
//
// Artifacts of the workspace need a matching pin. Artifacts in $AERIE_HOME
// need one when extension_manage wrote them (agent provenance), are
// trusted without a sidecar (a person put them there), and are untrusted
// when the sidecar is malformed. Spec, namespace, platform and bundled
// artifacts are trusted.
func (p *Pins) Trusted(l Layer, manifest string, executables []string) (ok bool, reason string) {
	v := p.Check(l, manifest, executables)
	return v.Status == Trusted, v.Reason
}

// Check is Trusted with the whole verdict.
func (p *Pins) Check(l Layer, manifest string, executables []string) Verdict {
	return p.verdict(l, manifest, executables, nil)
}

// Preread is what a loader has already read of an artifact, so that its
// trust check (CheckPreread) does not read it again.
type Preread struct {
	// Doc are the manifest's bytes.
	Doc []byte
	// Provenance is its provenance; nil to read it.
	Provenance *Provenance
	// Open opens a file by its path relative to the pin's base (the
	// workspace for project layers, the layer for the others):
	// Files.OpenBase of the manifest's layer.
	Open func(rel string) (*File, error)
}

// CheckPreread is Check of an artifact whose manifest the caller has read.
func (p *Pins) CheckPreread(l Layer, manifest string, executables []string, pre Preread) Verdict {
	return p.verdict(l, manifest, executables, &loaded{doc: pre.Doc, prov: pre.Provenance, open: pre.Open})
}

// loaded is a Preread, with what a Guard keeps besides.
type loaded struct {
	doc  []byte      // the manifest's bytes
	prov *Provenance // its provenance
	// id is the manifest's identity from before it was read; nil when
	// the caller does not keep identities.
	id *fileID
	// open opens a file by its path relative to the pin's base.
	open func(rel string) (*File, error)
}

func (p *Pins) verdict(l Layer, manifest string, executables []string, pre *loaded) Verdict {
	v, _ := p.verdictIDs(l, manifest, executables, pre)
	return v
}

// verdictIDs is verdict with the files whose bytes the pin covers, as
// they were when they were hashed: nil unless the verdict came from a pin.
func (p *Pins) verdictIDs(l Layer, manifest string, executables []string, pre *loaded) (Verdict, []fileID) {
	switch l.Kind {
	case KindProject:
		return p.check(l, manifest, executables, pre)
	case KindHome:
		var prov Provenance
		if pre != nil && pre.prov != nil {
			prov = *pre.prov
		} else {
			prov = ReadProvenance(l, manifest)
		}
		switch prov.State {
		case ProvenanceLegacy:
			return Verdict{Status: Trusted, Reason: "a user artifact without managed provenance"}, nil
		case ProvenanceUnknown:
			return Verdict{Status: Untrusted, Reason: "its provenance sidecar is malformed: " + prov.Reason}, nil
		}
		return p.check(l, manifest, executables, pre)
	default:
		return Verdict{
			Status: Trusted,
			Reason: fmt.Sprintf("the %s layer is controlled by the session's submitter", l.Kind),
		}, nil
	}
}

func (p *Pins) check(l Layer, manifest string, executables []string, pre *loaded) (Verdict, []fileID) {
	if p == nil {
		return Verdict{Status: Untrusted, Reason: "no trust pins were loaded", Pinned: true}, nil
	}
	var (
		pin Pin
		ids []fileID
		err error
	)
	if pre != nil {
		var b pinBase
		if b, err = newPinBase(p.workspace, l, manifest); err == nil {
			pin, ids, err = b.compute(pre.doc, executables, pre.open)
		}
		if err == nil && pre.id != nil {
			ids = append([]fileID{*pre.id}, ids...)
		}
	} else {
		pin, ids, err = computePin(p.workspace, l, manifest, executables)
	}
	if err != nil {
		return Verdict{Status: Untrusted, Reason: SanitizeReason(err.Error()), Pinned: true}, nil
	}
	v := Verdict{Pin: &pin, Pinned: true}
	switch {
	case p.err != nil:
		v.Status = Untrusted
		v.Reason = "a trust file is malformed, so nothing that needs a pin runs: " + SanitizeReason(p.err.Error())
	case len(p.byPath[pin.Path]) == 0:
		v.Status = Untrusted
		v.Reason = fmt.Sprintf("no trust pin for %s; review it and add the pin shown to $AERIE_HOME/%s",
			pin.Path, TrustFile)
	case slices.Contains(p.byPath[pin.Path], pin.SHA256):
		v.Status, v.Reason = Trusted, "pinned in "+TrustFile
	default:
		v.Status = Modified
		v.Reason = fmt.Sprintf("%s or an executable it runs changed since it was pinned; "+
			"restore the pinned bytes, or review it and replace the pin", pin.Path)
	}
	return v, ids
}

// ComputePin returns the pin of an executable artifact as its bytes are
// now: what a person adds to trust.toml after reviewing it.
//
// For a project layer the pin path is the manifest's path from the
// workspace root, and executables inside the workspace contribute their
// bytes; for a $AERIE_HOME artifact the path is HomePinPrefix followed by
// the path inside the layer, whose directory then takes the workspace's
// part. Executables outside contribute their absolute path; bare names
// contribute nothing. The encoding is in the package documentation.
func ComputePin(workspace string, l Layer, manifest string, executables []string) (Pin, error) {
	pin, _, err := computePin(workspace, l, manifest, executables)
	return pin, err
}

func computePin(workspace string, l Layer, manifest string, executables []string) (Pin, []fileID, error) {
	b, err := newPinBase(workspace, l, manifest)
	if err != nil {
		return Pin{}, nil, err
	}
	files, err := b.open(l)
	if err != nil {
		return Pin{}, nil, fmt.Errorf("compute trust pin: %w", err)
	}
	defer files.close()
	f, err := files.openBase(b.rel)
	var (
		doc []byte
		id  fileID
	)
	if err == nil {
		doc, id, err = readIdentified(f, b.manifest, MaxArtifactBytes)
		f.Close()
	}
	if err != nil {
		return Pin{}, nil, fmt.Errorf("compute trust pin: manifest %s: %w", manifest, ExplainEscape(err))
	}
	pin, ids, err := b.compute(doc, executables, files.openBase)
	if err != nil {
		return Pin{}, nil, err
	}
	return pin, append([]fileID{id}, ids...), nil
}

// readIdentified reads the regular file f (at path) as ReadBounded does,
// with its identity from before the read.
func readIdentified(f *File, path string, max int64) ([]byte, fileID, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fileID{}, err
	}
	doc, err := f.ReadBounded(max)
	return doc, identify(path, fi), err
}

// pinBase is where a manifest's pin is computed from.
type pinBase struct {
	// base is the directory whose files contribute bytes, resolved;
	// lexical is the same as given.
	base, lexical string
	// rel is the manifest's path from base; manifest its absolute path.
	rel, manifest string
	// prefix starts the pin path.
	prefix string
}

func newPinBase(workspace string, l Layer, manifest string) (pinBase, error) {
	base, prefix := workspace, ""
	if l.Kind != KindProject {
		base, prefix = l.Dir, HomePinPrefix
		if l.Kind != KindHome {
			prefix = l.Name + "/"
		}
	}
	if base == "" {
		return pinBase{}, errors.New("compute trust pin: no workspace")
	}
	lexical, err := filepath.Abs(base)
	if err != nil {
		return pinBase{}, fmt.Errorf("compute trust pin: %w", err)
	}
	base, rel, err := within(lexical, manifest)
	if err != nil {
		return pinBase{}, fmt.Errorf("compute trust pin: manifest %w", err)
	}
	return pinBase{base: base, lexical: lexical, rel: rel, manifest: manifest, prefix: prefix}, nil
}

// open opens the base for reading, and for a project layer the layer's
// directory in it too: most of what a pin covers is in the layer, and a
// path from there is shorter.
func (b pinBase) open(l Layer) (rootFiles, error) {
	root, err := OpenDir(b.base)
	if err != nil {
		return rootFiles{}, err
	}
	rf := rootFiles{root: root, dir: b.base, prefix: "."}
	if l.Kind == KindProject && l.Dir != "" {
		rel, ok := relInside(b.lexical, l.Dir)
		if !ok {
			rel, ok = relInside(b.base, l.Dir)
		}
		if ok && rel != "." {
			if sub, err := root.OpenDir(filepath.ToSlash(rel)); err == nil {
				rf.sub, rf.prefix = sub, rel
			}
		}
	}
	return rf, nil
}

// through returns how to open files by their path from the base through
// layer, a directory already open at l's directory, as open would: a path
// inside the layer through it, any other through the base, opened when
// first needed. ok is false when layer was not opened as open opens the
// layer (beneath the base for a project layer, at the base otherwise), so
// that it would not confine the reads the same way.
func (b pinBase) through(l Layer, layer *Dir) (open func(rel string) (*File, error), done func(), ok bool) {
	if l.Kind != KindProject {
		if layer.top != layer.path || (layer.path != b.base && layer.path != b.lexical) {
			return nil, nil, false
		}
		return layer.Open, func() {}, true
	}
	if l.Dir == "" || (layer.top != b.base && layer.top != b.lexical) {
		return nil, nil, false
	}
	prefix, ok := relInside(layer.top, layer.path)
	if !ok || prefix == "." || layer.path != filepath.Join(layer.top, prefix) {
		return nil, nil, false
	}
	if want, _ := relInside(b.lexical, l.Dir); want != prefix {
		if want, _ = relInside(b.base, l.Dir); want != prefix {
			return nil, nil, false
		}
	}
	var (
		root    *Dir
		rootErr error
	)
	open = func(rel string) (*File, error) {
		if inner, ok := relInside(prefix, rel); ok {
			f, err := layer.Open(filepath.ToSlash(inner))
			if !errors.Is(err, ErrEscapes) {
				return f, err
			}
		}
		if root == nil && rootErr == nil {
			root, rootErr = OpenDir(layer.top)
		}
		if rootErr != nil {
			return nil, rootErr
		}
		return root.Open(filepath.ToSlash(rel))
	}
	done = func() {
		if root != nil {
			root.Close()
		}
	}
	return open, done, true
}

// compute hashes the manifest doc and the executables, opened with open,
// and returns the identities of the executables it read.
func (b pinBase) compute(
	doc []byte, executables []string, open func(rel string) (*File, error),
) (Pin, []fileID, error) {
	pin := Pin{Path: b.prefix + filepath.ToSlash(b.rel)}
	h := sha256.New()
	io.WriteString(h, "aerie-trust-v1\x00")
	fmt.Fprintf(h, "manifest\x00%s\x00%d\x00", filepath.ToSlash(b.rel), len(doc))
	h.Write(doc)
	var ids []fileID
	for _, exe := range executables {
		if exe == "" || !strings.ContainsRune(exe, '/') {
			continue // resolved through PATH: no identity of its own
		}
		abs := exe
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(filepath.Dir(b.manifest), exe)
		}
		abs = filepath.Clean(abs)
		// Inside is decided on the path as written (against the
		// workspace as given or as resolved), never by following the
		// executable's own symbolic link: a link inside the workspace is
		// hashed through the root, which refuses one that leads out.
		r, ok := relInside(b.lexical, abs)
		if !ok {
			r, ok = relInside(b.base, abs)
		}
		if !ok {
			fmt.Fprintf(h, "path\x00%s\x00", abs)
			continue
		}
		f, err := open(r)
		if err == nil {
			var id fileID
			id, err = hashFile(h, f, abs, "file", r, MaxExecutableBytes)
			ids = append(ids, id)
			f.Close()
		}
		if err != nil {
			return Pin{}, nil, fmt.Errorf("compute trust pin: executable %s: %w", exe, ExplainEscape(err))
		}
	}
	pin.SHA256 = hex.EncodeToString(h.Sum(nil))
	return pin, ids, nil
}

// hashFile adds kind, name, length and the bytes of the regular file f
// (at path) to h, reading at most max bytes, and returns its identity
// from before the read.
func hashFile(h hash.Hash, f *File, path, kind, name string, max int64) (fileID, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileID{}, err
	}
	if !fi.Mode().IsRegular() {
		return fileID{}, ErrNotRegular
	}
	if fi.Size() > max {
		return fileID{}, fmt.Errorf("%w: %d bytes, over the %s limit for pinned files", ErrTooLarge, fi.Size(), ByteSize(max))
	}
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00", kind, filepath.ToSlash(name), fi.Size())
	n, err := io.CopyBuffer(h, io.LimitReader(f, fi.Size()), make([]byte, min(fi.Size()+1, 32<<10)))
	if err != nil {
		return fileID{}, err
	}
	if n != fi.Size() {
		return fileID{}, errors.New("the file changed while it was read")
	}
	return identify(path, fi), nil
}

// ExplainEscape adds the fix to an error for a path that leads out of its
// layer (ErrEscapes): a symbolic link out, whose target is to be named by
// its absolute path instead.
func ExplainEscape(err error) error {
	if errors.Is(err, ErrEscapes) {
		return fmt.Errorf("%w (a symbolic link leads outside; name the target by its absolute path instead)", err)
	}
	return err
}

// fileID is what identifies a file's bytes without reading them.
type fileID struct {
	// path is where the file was found, to stat it again.
	path         string
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// identify returns the identity of the file at path that fi describes.
func identify(path string, fi fs.FileInfo) fileID {
	id := fileID{path: path, size: fi.Size()}
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		//nolint:unconvert // Stat_t's Dev and Ino are narrower on some architectures.
		id.dev, id.ino, id.mtime, id.ctime = uint64(st.Dev), uint64(st.Ino), st.Mtim.Nano(), st.Ctim.Nano()
	case *syscall.Stat_t:
		//nolint:unconvert // Stat_t's Dev and Ino are narrower on some architectures.
		id.dev, id.ino, id.mtime, id.ctime = uint64(st.Dev), uint64(st.Ino), st.Mtim.Nano(), st.Ctim.Nano()
	default:
		// Nothing to compare with: never taken as unchanged.
		id.ctime = -1
	}
	return id
}
