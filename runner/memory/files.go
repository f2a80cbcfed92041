package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-run/aerie/runner/atomicfile"
)

// DirName is the memory's directory in $AERIE_HOME.
const DirName = "memory"

// Files keeps the memory documents as files: USER.md in Dir, and the
// project's MEMORY.md in Dir/projects/KEY, KEY naming the project (see
// ProjectKey). Each document has its lock file beside it.
type Files struct {
	// Dir is the memory directory, $AERIE_HOME/memory.
	Dir string
	// Project is the project's key: ProjectKey of what identifies it.
	Project string
	// Now is the clock of the .bak copies' names; nil is time.Now.
	Now func() time.Time
}

var unsafeKey = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// ProjectKey is the directory name of the project scope names (a git URL,
// a working directory): its last path element, readable, and a digest of
// the whole, so that two projects of the same name stay apart.
func ProjectKey(scope string) string {
	sum := sha256.Sum256([]byte(scope))
	base := unsafeKey.ReplaceAllString(strings.TrimSuffix(filepath.Base(strings.TrimRight(scope, "/")), ".git"), "_")
	base = strings.Trim(base, "._-")
	if len(base) > 40 {
		base = base[:40]
	}
	if base == "" {
		base = "project"
	}
	return base + "-" + hex.EncodeToString(sum[:8])
}

// Path is the target's file.
func (f Files) Path(t Target) string {
	if t == User {
		return filepath.Join(f.Dir, t.FileName())
	}
	return filepath.Join(f.Dir, "projects", f.Project, t.FileName())
}

// Read reads the target's file; a missing one is empty.
func (f Files) Read(_ context.Context, t Target) ([]byte, error) {
	data, err := os.ReadFile(f.Path(t))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// Update changes the target's file under its lock (a flock of the .lock
// file beside it), replacing it atomically. When change finds the file
// malformed, a timestamped copy of it is kept as FILE.TIME.bak and the
// error names it.
func (f Files) Update(ctx context.Context, t Target, change func(old []byte) ([]byte, error)) error {
	path := f.Path(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("memory directory: %w", err)
	}
	unlock, err := lock(ctx, path+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	old, err := f.Read(ctx, t)
	if err != nil {
		return err
	}
	data, err := change(old)
	if errors.Is(err, ErrMalformed) {
		return f.backup(path, old, err)
	}
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// backup keeps a copy of the malformed file old and says so in cause.
func (f Files) backup(path string, old []byte, cause error) error {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	bak := path + "." + now().UTC().Format("20060102T150405.000000000Z") + ".bak"
	if err := atomicfile.Write(bak, old, 0o600); err != nil {
		return fmt.Errorf("%w (and its copy %s could not be written: %v)", cause, bak, err)
	}
	return fmt.Errorf("%w; the mutation is refused: a copy is kept in %s, repair %s before another mutation",
		cause, bak, path)
}

// lock takes the exclusive flock of name, waiting for it while ctx lasts.
func lock(ctx context.Context, name string) (func(), error) {
	lf, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("memory lock: %w", err)
	}
	for {
		err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
				_ = lf.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = lf.Close()
			return nil, fmt.Errorf("memory lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			_ = lf.Close()
			return nil, fmt.Errorf("memory lock %s: %w", name, context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
}
