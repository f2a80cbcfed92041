// Package atomicfile replaces a file's content atomically and durably:
// readers see the old file or the new one, never a torn mix, and once Write
// returns nil the new content survives a crash. A crash before then leaves
// the old file and at worst a stray hidden temporary file beside it.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Write replaces path with data, with permissions perm. The directory of
// path must exist.
func Write(path string, data []byte, perm fs.FileMode) error {
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer root.Close()
	return WriteIn(root, filepath.Base(path), data, perm)
}

// WriteIn replaces name, a path relative to root, with data, with
// permissions perm; nothing it does leaves root, so a symbolic link planted
// on the way cannot redirect it.
//
// The content goes to a new file beside name, created with O_EXCL, which is
// given perm before the first byte is written (so it is never readable more
// widely than perm), synced, and renamed over name; then the directory is
// synced so that the rename is durable. A file system that cannot sync a
// directory (EINVAL, ENOTSUP) is not an error: the file is in place there
// all the same. Any other failure to sync the directory is returned, though
// the new content is already in place, because it may not survive a crash.
func WriteIn(root *os.Root, name string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(name)
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(suffix[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = root.Remove(tmp)
		}
	}()
	// The umask narrowed the mode at creation; the mode is to be perm
	// exactly.
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = root.Rename(tmp, name); err != nil {
		return err
	}
	return syncDir(root, dir)
}

// syncDir makes a rename in dir durable.
func syncDir(root *os.Root, dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := root.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close() //nolint:errcheck // a directory opened to sync it
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}
