package userlayer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-run/aerie/runner/layer"
)

// LockFile serializes changes to a user layer across processes: two
// sessions of the same user may manage artifacts at once.
const LockFile = ".extension_manage.lock"

// change is what commit did.
type change struct {
	operationID string
	// previous is the digest of the bytes replaced or deleted.
	previous string
}

// commit checks the artifact's current state against req and writes (or
// deletes) it with its sidecar, all under the layer's lock.
func (m *Manager) commit(ctx context.Context, req Request, rel string, content []byte) (ch change, err error) {
	root, unlock, err := m.lock(ctx)
	if err != nil {
		return change{}, err
	}
	defer unlock()

	dir := path.Dir(rel)
	created, err := m.dirs(root, dir, req.Operation == OpCreate)
	defer func() {
		if err != nil {
			// The directories made for a change that did not happen.
			for _, d := range slices.Backward(created) {
				_ = root.Remove(d)
			}
		}
	}()
	if err != nil {
		return change{}, err
	}
	cur, err := inspect(root, rel)
	if err != nil {
		return change{}, err
	}
	sc := rel + layer.ProvenanceSuffix
	scCur, err := inspect(root, sc)
	if err != nil {
		return change{}, err
	}
	abs := filepath.Join(m.home.Dir, filepath.FromSlash(rel))
	switch {
	case req.Operation == OpCreate && cur.exists:
		return change{}, fail(
			AlreadyExists, "name",
			"%s already exists (digest %s); replace it with expected_digest set to that digest, or choose another name",
			abs, cur.digest,
		)
	case req.Operation != OpCreate && !cur.exists:
		return change{}, fail(
			NotFound, "name",
			"there is no %s in the user layer (%s); list shows what there is, and create makes a new one",
			req.Kind, abs,
		)
	case req.ExpectedDigest != "" && req.ExpectedDigest != cur.digest:
		return change{}, fail(
			StaleRevision, "expected_digest",
			"%s has digest %s, not %s: it changed since you read it; list it again, "+
				"check the change, and retry with its current digest",
			abs, cur.digest, req.ExpectedDigest,
		)
	}

	ch = change{operationID: m.opts.NewOperationID(), previous: cur.digest}
	var files []fileChange
	if req.Operation == OpDelete {
		files = append(files, fileChange{rel: rel, exists: true})
		if scCur.exists {
			files = append(files, fileChange{rel: sc, exists: true})
		}
	} else {
		files = append(files,
			fileChange{rel: rel, data: content, exists: cur.exists},
			fileChange{rel: sc, data: layer.AgentSidecar(ch.operationID, content, ActivationBoundary), exists: scCur.exists},
		)
	}
	t := &txn{root: root, id: ch.operationID, fault: m.fault}
	if err := t.apply(files); err != nil {
		return change{}, storage(err)
	}
	if req.Operation == OpDelete && req.Kind == KindSkill {
		// The skill's directory goes too, unless a person keeps other
		// files in it.
		_ = root.Remove(dir)
	}
	return ch, nil
}

// lock opens the user layer and takes its lock file. The lock waits for
// another process's change, as long as ctx allows.
func (m *Manager) lock(ctx context.Context) (*os.Root, func(), error) {
	root, err := os.OpenRoot(m.home.Dir)
	if err != nil {
		return nil, nil, storage(fmt.Errorf("open the user layer: %w", err))
	}
	f, err := root.OpenFile(LockFile, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		root.Close()
		return nil, nil, storage(fmt.Errorf("open the user layer's lock file: %w", err))
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			break
		}
		select {
		case <-ctx.Done():
			err = fmt.Errorf("another process holds the user layer's lock: %w", context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
			continue
		}
		break
	}
	if err != nil {
		_ = f.Close()
		root.Close()
		return nil, nil, storage(fmt.Errorf("lock the user layer: %w", err))
	}
	return root, func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		root.Close()
	}, nil
}

// dirs checks that every directory on the way to dir (slash-separated, in
// the layer) is a real directory, not a symbolic link, and with create
// makes the missing ones. It returns the directories it made.
func (m *Manager) dirs(root *os.Root, dir string, create bool) ([]string, error) {
	if dir == "." {
		return nil, nil
	}
	var made []string
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		fi, err := root.Lstat(cur)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			return made, fail(
				UnsupportedOperation, "name",
				"%s is a symbolic link; the manager writes only inside real directories of "+
					"the user layer: replace the link by a directory by hand",
				filepath.Join(m.home.Dir, cur),
			)
		case err == nil:
			return made, fail(
				UnsupportedOperation, "name",
				"%s is not a directory; move it away by hand",
				filepath.Join(m.home.Dir, cur),
			)
		case !errors.Is(err, fs.ErrNotExist):
			return made, storage(fmt.Errorf("inspect %s: %w", cur, err))
		case !create:
			return made, nil // nothing below it either
		}
		if err := root.Mkdir(cur, 0o755); err != nil {
			return made, storage(fmt.Errorf("make directory %s: %w", cur, err))
		}
		made = append(made, cur)
	}
	return made, nil
}

// current is an artifact file as it is.
type current struct {
	exists bool
	digest string
	size   int64
}

// inspect returns the state of the file rel, refusing anything but a
// regular file: a symbolic link could lead a write elsewhere, and a FIFO
// or a directory is nothing the manager wrote.
func inspect(root *os.Root, rel string) (current, error) {
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return current{}, nil
	}
	if err != nil {
		return current{}, storage(fmt.Errorf("inspect %s: %w", rel, err))
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return current{}, fail(
			UnsupportedOperation, "name",
			"%s in the user layer is a symbolic link, which the manager never follows "+
				"or replaces; remove the link by hand, or use another name",
			rel,
		)
	}
	if !fi.Mode().IsRegular() {
		return current{}, fail(
			UnsupportedOperation, "name",
			"%s in the user layer is not a regular file (%s); the manager handles only regular files: move it away by hand",
			rel, fi.Mode().Type(),
		)
	}
	d, size, err := digestFile(root, rel)
	if err != nil {
		return current{}, storage(fmt.Errorf("read %s: %w", rel, err))
	}
	return current{exists: true, digest: d, size: size}, nil
}

// digestFile returns the digest of the regular file rel, read without
// blocking on a FIFO swapped in after the check.
func digestFile(root *os.Root, rel string) (string, int64, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close() //nolint:errcheck // read-only
	fi, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !fi.Mode().IsRegular() {
		return "", 0, layer.ErrNotRegular
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
}

// fileChange is one file of a transaction: new bytes, or nil to remove it.
type fileChange struct {
	rel    string
	data   []byte
	exists bool
}

// txn changes a few files of one directory tree all or nothing (as far as
// a file system allows): new bytes are staged beside their targets, the
// current files are kept as backups (hard links, or copies), the staged
// files are renamed over the targets one by one, and a failure puts every
// target back from its backup.
type txn struct {
	root  *os.Root
	id    string
	fault func(step string) error

	staged, backups []string
}

func (t *txn) step(name, rel string) error {
	if t.fault == nil {
		return nil
	}
	return t.fault(name + " " + rel)
}

// aside names a hidden file beside rel, which discovery skips.
func (t *txn) aside(rel, what string) string {
	return path.Join(path.Dir(rel), "."+path.Base(rel)+"."+t.id+"."+what)
}

func (t *txn) apply(files []fileChange) (err error) {
	defer func() {
		// Staged files left over (after a failure) and backups no longer
		// needed (after success, or once restored) go.
		for _, p := range append(t.staged, t.backups...) {
			_ = t.root.Remove(p)
		}
	}()
	for _, f := range files {
		if f.data == nil {
			continue
		}
		if err := t.stage(f); err != nil {
			return fmt.Errorf("stage %s: %w", f.rel, err)
		}
	}
	bak := map[string]string{}
	for _, f := range files {
		if !f.exists {
			continue
		}
		b := t.aside(f.rel, "bak")
		if err := t.backup(f.rel, b); err != nil {
			return fmt.Errorf("back up %s: %w", f.rel, err)
		}
		bak[f.rel] = b
	}
	var done []fileChange
	for _, f := range files {
		if err := t.replace(f); err != nil {
			err = fmt.Errorf("write %s: %w", f.rel, err)
			if rerr := t.restore(done, bak); rerr != nil {
				return fmt.Errorf("%w; restoring the previous files failed too: %w", err, rerr)
			}
			return fmt.Errorf("%w; the previous files were restored", err)
		}
		done = append(done, f)
	}
	t.sync(files)
	return nil
}

func (t *txn) stage(f fileChange) error {
	if err := t.step("stage", f.rel); err != nil {
		return err
	}
	p := t.aside(f.rel, "tmp")
	out, err := t.root.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	t.staged = append(t.staged, p)
	_, err = out.Write(f.data)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// backup keeps the current file rel as b: a hard link where the file
// system has them, a copy elsewhere.
func (t *txn) backup(rel, b string) error {
	if err := t.step("backup", rel); err != nil {
		return err
	}
	if err := t.root.Link(rel, b); err == nil {
		t.backups = append(t.backups, b)
		return nil
	}
	data, err := t.root.ReadFile(rel)
	if err != nil {
		return err
	}
	t.backups = append(t.backups, b)
	return t.root.WriteFile(b, data, 0o644)
}

func (t *txn) replace(f fileChange) error {
	if err := t.step("apply", f.rel); err != nil {
		return err
	}
	if f.data == nil {
		return t.root.Remove(f.rel)
	}
	return t.root.Rename(t.aside(f.rel, "tmp"), f.rel)
}

// restore puts the files changed so far back: from their backups, or
// removed when they were new.
func (t *txn) restore(done []fileChange, bak map[string]string) error {
	var errs []error
	for _, f := range slices.Backward(done) {
		var err error
		if b, ok := bak[f.rel]; ok {
			err = t.root.Rename(b, f.rel)
		} else {
			err = t.root.Remove(f.rel)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("restore %s: %w", f.rel, err))
		}
	}
	return errors.Join(errs...)
}

// sync makes the renames durable: a crash after the tool reported success
// must not bring the old files back.
func (t *txn) sync(files []fileChange) {
	seen := map[string]bool{}
	for _, f := range files {
		d := path.Dir(f.rel)
		if seen[d] {
			continue
		}
		seen[d] = true
		if dir, err := t.root.Open(d); err == nil {
			_ = dir.Sync()
			dir.Close() //nolint:errcheck // read-only
		}
	}
}
