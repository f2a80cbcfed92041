package layer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Bounds of ContentDigest: a layer it would have to read more of has no
// digest, rather than stalling the start of a session.
const (
	// MaxDigestFiles caps the files of a layer ContentDigest reads.
	MaxDigestFiles = 10_000
	// MaxDigestBytes caps the bytes of a layer ContentDigest reads.
	MaxDigestBytes = 64 << 20
)

// homeArtifacts are the names ContentDigest reads in $AERIE_HOME, which
// holds much else besides extension artifacts: the session database, logs,
// process records. They are the artifacts every loader reads from a
// layer's top directory.
var homeArtifacts = []string{
	"APPEND_SYSTEM.md", "SYSTEM.md", "config.toml", "hooks", "hooks.toml", "mcp_servers", "personas",
	"plugins", "skills", "tool-descriptions.toml", "tools", "toolsets.toml", TrustFile,
}

// ContentDigest returns the digest of layer l's files as they are now:
// "sha256:<hex>" over each regular file's path (from the layer, slash
// separated), whether it is executable, and its bytes, in path order — the
// encoding of runconfig.LayerDigest, so that a ConfigMap layer mounted in
// a pod digests as the controller digested the ConfigMap. In $AERIE_HOME
// only the extension artifacts count.
//
// The layer is read as every loader reads it: a project layer through an
// os.Root at workspace, any other through one at its directory, so that
// no symbolic link leads the digest out. Symbolic links inside are
// followed (a mounted ConfigMap is made of them), and names starting with
// ".." at the top, a ConfigMap volume's own bookkeeping, are left out. A
// layer over MaxDigestFiles or MaxDigestBytes, or with a file that cannot
// be read, has no digest: the error says why.
func ContentDigest(workspace string, l Layer) (string, error) {
	if l.Kind == KindBundled && l.Dir == "" {
		return bundledDigest(), nil
	}
	v, err := Source{Layers: []Layer{l}, Workspace: workspace}.Open()
	if err != nil {
		return "", fmt.Errorf("digest layer %s: %w", l.Name, err)
	}
	defer v.Close()
	lv := v.Layers[0]
	if lv.Err != nil {
		return "", fmt.Errorf("digest layer %s: %w", l.Name, lv.Err)
	}
	rf, ok := lv.Files.f.(rootFiles)
	if !ok {
		return "", fmt.Errorf("digest layer %s: not a directory on disk", l.Name)
	}
	d := digester{files: rf}
	top, _, err := rf.readDir(".")
	if err != nil {
		return "", fmt.Errorf("digest layer %s: %w", l.Name, err)
	}
	for _, name := range top {
		if strings.HasPrefix(name, "..") || (l.Kind == KindHome && !slices.Contains(homeArtifacts, name)) {
			continue
		}
		if err := d.walk(name, 0); err != nil {
			return "", fmt.Errorf("digest layer %s: %w", l.Name, err)
		}
	}
	sum, err := d.sum()
	if err != nil {
		return "", fmt.Errorf("digest layer %s: %w", l.Name, err)
	}
	return sum, nil
}

// WithDigests returns layers with the content digest of each filled in,
// and an error for each layer whose digest could not be computed (that
// layer keeps the digest it had). A layer that had a digest gets the one
// of what is there now; changed lists the layers whose digest differs
// from the one they had — a ConfigMap edited after the controller read it.
func WithDigests(workspace string, layers []Layer) (out []Layer, changed []Layer, errs []error) {
	out = slices.Clone(layers)
	for i := range out {
		d, err := ContentDigest(workspace, out[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if out[i].Digest != "" && out[i].Digest != d {
			changed = append(changed, out[i])
		}
		out[i].Digest = d
	}
	return out, changed, errs
}

// digestFile is a file found by digester.walk.
type digestFile struct {
	path string
	exec bool
}

// digester collects a layer's files, then hashes them in path order: a
// walk in name order is not path order ("a-b" sorts before "a/c").
type digester struct {
	files rootFiles
	found []digestFile
	bytes int64
}

// maxDigestDepth bounds the directories followed into, so that a link
// to a parent directory ends the walk instead of looping.
const maxDigestDepth = 32

func (d *digester) walk(name string, depth int) error {
	if depth > maxDigestDepth {
		return fmt.Errorf("%s: more than %d directories deep (a symbolic link loop?)", name, maxDigestDepth)
	}
	f, err := d.files.open(name)
	if err != nil {
		return ExplainEscape(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return d.add(name, fi)
	}
	return d.walkDir(name, depth)
}

// walkDir adds the files of the directory name. The entries' types come
// from the listing and sizes from an lstat beside it; only links are
// opened, through the root, to learn what they lead to.
func (d *digester) walkDir(name string, depth int) error {
	entries, more, err := d.files.readEntries(name)
	if err != nil {
		return ExplainEscape(err)
	}
	if more {
		return fmt.Errorf("%s: over %d entries", name, MaxDirEntries)
	}
	for _, de := range entries {
		p := path.Join(name, de.Name())
		switch t := de.Type(); {
		case t.IsDir():
			if depth+1 > maxDigestDepth {
				return fmt.Errorf("%s: more than %d directories deep", p, maxDigestDepth)
			}
			if err := d.walkDir(p, depth+1); err != nil {
				return err
			}
		case t.IsRegular():
			fi, err := d.files.lstat(p)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := d.add(p, fi); err != nil {
				return err
			}
		case t&fs.ModeSymlink != 0:
			if err := d.walk(p, depth+1); err != nil {
				return err
			}
		}
		// Sockets, FIFOs and devices hold no content: left out, as a
		// ConfigMap cannot hold them.
	}
	return nil
}

// add adds the regular file name, within the bounds.
func (d *digester) add(name string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return nil
	}
	if len(d.found) == MaxDigestFiles {
		return fmt.Errorf("%w: over %d files", ErrTooLarge, MaxDigestFiles)
	}
	if d.bytes += fi.Size(); d.bytes > MaxDigestBytes {
		return fmt.Errorf("%w: over %s of files", ErrTooLarge, ByteSize(MaxDigestBytes))
	}
	d.found = append(d.found, digestFile{path: name, exec: fi.Mode()&0o111 != 0})
	return nil
}

// Modes the digest records: a mounted ConfigMap's files are 0444 or 0555,
// and only whether a file is executable matters anywhere else.
const (
	digestModeFile = 0o444
	digestModeExec = 0o555
)

func (d *digester) sum() (string, error) {
	slices.SortFunc(d.found, func(a, b digestFile) int { return strings.Compare(a.path, b.path) })
	h := sha256.New()
	var n [8]byte
	for _, df := range d.found {
		f, err := d.files.open(df.path)
		if err != nil {
			return "", ExplainEscape(err)
		}
		fi, err := f.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = ErrNotRegular
		}
		if err != nil {
			f.Close()
			return "", fmt.Errorf("%s: %w", df.path, err)
		}
		mode := uint32(digestModeFile)
		if df.exec {
			mode = digestModeExec
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(df.path)))
		h.Write(n[:])
		io.WriteString(h, df.path)
		binary.BigEndian.PutUint32(n[:4], mode)
		h.Write(n[:4])
		binary.BigEndian.PutUint64(n[:], uint64(fi.Size()))
		h.Write(n[:])
		copied, err := io.Copy(h, io.LimitReader(f, fi.Size()))
		f.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", df.path, err)
		}
		if copied != fi.Size() {
			return "", fmt.Errorf("%s: %w", df.path, errors.New("the file changed while it was read"))
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
