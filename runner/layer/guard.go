package layer

import (
	"io/fs"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Guard checks an executable artifact's trust again right before each of
// its runs, so that a manifest, hook file or script changed after the
// session loaded it never runs on the trust its old bytes earned.
//
// Hashing everything a pin covers before every run would cost a read of
// every file each time; a Guard reads them only when one of them may have
// changed. After a verdict from the pins it keeps each file's identity —
// device, inode, size, modification and status-change times — and the
// next Verify compares them with a stat of each path: when all match, the
// files hold the bytes that were hashed, and the verdict stands without a
// read. The status-change time is what makes this safe: every write,
// rename or permission change sets it to the current time, and unlike the
// modification time no process can set it back. Any difference, or a file
// gone, means hashing again.
//
// A file changed within the same tick of the kernel's clock as it was
// hashed may keep its times (the "racy git" problem), so identities are
// kept only for files whose last change is older than racyWindow before
// the hashing began; a file changed more recently is hashed again at the
// next run, until it is old enough.
//
// A Guard is safe for concurrent use.
type Guard struct {
	pins        *Pins
	layer       Layer
	manifest    string
	executables []string

	// window is racyWindow, but in tests.
	window time.Duration

	mu sync.Mutex
	// ids are the files of the last trusted verdict from the pins; nil
	// when there is none to stand on.
	ids []fileID
	// last is that verdict.
	last Verdict
}

// Guard returns a Guard of the artifact whose manifest is at manifest (an
// absolute path inside l), running executables: the arguments of
// Trusted. Nothing is read until Verify.
func (p *Pins) Guard(l Layer, manifest string, executables []string) *Guard {
	return &Guard{
		pins:        p,
		layer:       l,
		manifest:    manifest,
		executables: append([]string(nil), executables...),
		window:      racyWindow,
	}
}

// Verify returns the artifact's verdict as its files are now. Status
// Trusted means it may run.
func (g *Guard) Verify() Verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ids != nil && unchanged(g.ids) {
		return g.last
	}
	return g.verify(nil)
}

// VerifyRead is Verify for a loader that has just read the manifest
// through layer, the layer's directory: doc are the bytes it read and
// info what a stat of the open file said before the read. The manifest is
// not read again, and the executables inside the layer are read through
// layer, so that a check costs no more opens than the files it hashes.
//
// layer is used only when it was opened as the pins would open it —
// beneath the workspace for a project layer, at the layer's directory for
// the others; otherwise, and for a manifest over MaxArtifactBytes, this
// is Verify.
func (g *Guard) VerifyRead(doc []byte, info fs.FileInfo, layer *Dir) Verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ids != nil && unchanged(g.ids) {
		return g.last
	}
	if layer == nil || info == nil || info.Size() > MaxArtifactBytes || int64(len(doc)) > MaxArtifactBytes {
		return g.verify(nil)
	}
	b, err := newPinBase(g.pins.base(), g.layer, g.manifest)
	if err != nil {
		return g.verify(nil)
	}
	open, done, ok := b.through(g.layer, layer)
	if !ok {
		return g.verify(nil)
	}
	defer done()
	id := identify(g.manifest, info)
	return g.verify(&loaded{doc: doc, id: &id, open: open})
}

// verify is Verify, with the lock held.
func (g *Guard) verify(pre *loaded) Verdict {
	start := time.Now().UnixNano()
	v, ids := g.pins.verdictIDs(g.layer, g.manifest, g.executables, pre)
	g.ids, g.last = nil, Verdict{}
	if v.Status == Trusted && v.Pinned && ids != nil && settled(ids, start-int64(g.window)) {
		g.ids, g.last = ids, v
	}
	return v
}

// racyWindow is how long before a hash a file must have last changed for
// its identity to vouch for its bytes: far more than the coarsest tick of
// a kernel's file time stamps (10 ms).
const racyWindow = time.Second

// settled reports whether every file last changed before t.
func settled(ids []fileID, t int64) bool {
	for _, id := range ids {
		if id.ctime < 0 || id.ctime > t {
			return false
		}
	}
	return true
}

// unchanged reports whether every file still has its identity. A path is
// followed as a command would follow it: the same inode reached another
// way holds the same bytes.
func unchanged(ids []fileID) bool {
	for _, id := range ids {
		var st unix.Stat_t
		if id.ctime < 0 || ignoringEINTR0(func() error { return unix.Stat(id.path, &st) }) != nil {
			return false
		}
		//nolint:unconvert // Stat_t's Dev and Ino are narrower on some architectures.
		if uint64(st.Dev) != id.dev || uint64(st.Ino) != id.ino || st.Size != id.size ||
			st.Mtim.Nano() != id.mtime || st.Ctim.Nano() != id.ctime {
			return false
		}
	}
	return true
}
