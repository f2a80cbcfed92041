package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LedgerDir is the directory of the ledgers under aerie's home.
const LedgerDir = "running"

// ledgerLock is the lock file of a ledger, held (flock) by its owner for
// as long as it lives: the kernel releases it when the owner dies, even of
// SIGKILL, which is how a sweep tells a ledger whose owner is gone.
const ledgerLock = "owner.lock"

// Ledger is the write-ahead record of the groups one process runs, so
// that a group survives its runner's crash only until the next sweep: a
// record is published as soon as the group has started (before its
// caller sees it) and removed once the group is gone, in a directory of the
// ledger's own under $AERIE_HOME/running, locked for the owner's life.
// SweepLedgers, run as the next `aerie run` starts, ends the groups of the
// ledgers whose owner has died.
type Ledger struct {
	reg  *Registry
	lock *os.File
}

// OpenLedger creates a ledger under home, aerie's home directory, owned by
// this process until Close.
func OpenLedger(home string) (*Ledger, error) {
	root := filepath.Join(home, LedgerDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create process ledger: %w", err)
	}
	id := NewID()
	// Built under a dot name, which sweeps skip, and renamed once locked,
	// so that no sweep ever finds it unlocked.
	tmp := filepath.Join(root, ".new-"+id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("create process ledger: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(tmp, ledgerLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(root, id))
	}
	if err != nil {
		if lock != nil {
			_ = lock.Close()
		}
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("create process ledger: %w", err)
	}
	return &Ledger{reg: &Registry{dir: filepath.Join(root, id)}, lock: lock}, nil
}

// Add records g, started at started to run command in dir. The record is
// renamed into place but not synced: it has to survive its owner's death,
// which the page cache does, not the machine's, which the group does not
// survive either; a sync would widen the moment in which a killed owner
// leaves a group unrecorded from microseconds to the disk's latency.
func (l *Ledger) Add(g Group, command, dir string, started time.Time) error {
	rec := Record{Group: g, Command: command, Dir: dir, StartedAt: started}
	if err := rec.validate(); err != nil {
		return fmt.Errorf("record process group: %w", err)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("record process group %s: %w", g.ID, err)
	}
	tmp := filepath.Join(l.reg.dir, "."+g.ID+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("record process group %s: %w", g.ID, err)
	}
	if err := os.Rename(tmp, l.reg.file(g.ID)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("record process group %s: %w", g.ID, err)
	}
	return nil
}

// Remove forgets the group id: it is gone, or someone else's now.
func (l *Ledger) Remove(id string) error { return l.reg.remove(id) }

// Close removes the ledger and releases it. Its owner has ended its groups
// (or handed them over): whatever records remain are dropped with it.
func (l *Ledger) Close() error {
	err := os.RemoveAll(l.reg.dir)
	if cerr := l.lock.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close process ledger: %w", err)
	}
	return nil
}

// SweepLedgers ends, with Teardown after verifying their identity, the
// groups recorded in every ledger under home whose owner has died, and
// removes those ledgers once all their groups are gone. Ledgers of live
// owners are left alone. It returns a result for each record it acted on.
func SweepLedgers(ctx context.Context, home string, grace time.Duration) ([]Result, error) {
	root := filepath.Join(home, LedgerDir)
	dirs, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sweep process ledgers: %w", err)
	}
	var results []Result
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") || !ValidID(d.Name()) {
			continue
		}
		res, err := sweepLedger(ctx, filepath.Join(root, d.Name()), grace)
		results = append(results, res...)
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// sweepLedger sweeps the ledger in dir if its owner is gone.
func sweepLedger(ctx context.Context, dir string, grace time.Duration) ([]Result, error) {
	lock, err := os.OpenFile(filepath.Join(dir, ledgerLock), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // closed since it was listed
	}
	if err != nil {
		return nil, fmt.Errorf("sweep process ledger %s: %w", filepath.Base(dir), err)
	}
	defer func() { _ = lock.Close() }() // releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil // its owner lives
		}
		return nil, fmt.Errorf("sweep process ledger %s: %w", filepath.Base(dir), err)
	}
	results, err := (&Registry{dir: dir}).Clean(ctx, grace)
	if err != nil {
		return results, fmt.Errorf("sweep process ledger %s: %w", filepath.Base(dir), err)
	}
	for _, r := range results {
		if !r.Status.Resolved() {
			return results, nil // kept, for the next sweep to try again
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return results, fmt.Errorf("sweep process ledger %s: %w", filepath.Base(dir), err)
	}
	return results, nil
}
