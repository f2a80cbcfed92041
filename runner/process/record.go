package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/atomicfile"
)

// RegistryDir is the registry's directory under aerie's home.
const RegistryDir = "processes"

// recordExt ends every record file's name; temporary files start with '.'.
const recordExt = ".json"

// Record is the durable description of a preserved process group: one
// that a headless run left running, for `aerie process` to list and end
// from another process, possibly after the runner has exited.
type Record struct {
	Group
	// Command is the command line, for people.
	Command string `json:"command"`
	// Dir is the command's working directory.
	Dir string `json:"dir"`
	// Owner says who started the group (a session id, for example).
	Owner string `json:"owner"`
	// StartedAt is when the group started.
	StartedAt time.Time `json:"started_at"`
}

// validate reports what makes r unusable for verification.
func (r Record) validate() error {
	switch {
	case !ValidID(r.ID):
		return fmt.Errorf("invalid id %q", r.ID)
	case r.PID <= 0 || r.PGID <= 0:
		return fmt.Errorf("invalid pid %d or pgid %d", r.PID, r.PGID)
	case r.Birth.StartTime == 0:
		return errors.New("no birth fingerprint")
	}
	return nil
}

// Registry is the directory of preserved group records,
// $AERIE_HOME/processes. Each record is its own file, <id>.json, private
// to the user (0600 in a 0700 directory), published atomically, so that
// concurrent writers and readers (a runner registering while a person runs
// `aerie process clean`) never see a partial record and need no lock.
type Registry struct {
	dir string
}

// NewRegistry returns the registry under home, aerie's home directory.
// Nothing is created until the first Register.
func NewRegistry(home string) *Registry {
	return &Registry{dir: filepath.Join(home, RegistryDir)}
}

// Dir returns the registry's directory.
func (r *Registry) Dir() string { return r.dir }

func (r *Registry) file(id string) string { return filepath.Join(r.dir, id+recordExt) }

// Register publishes rec: written to a temporary file, synced, renamed
// into place, and the directory synced, so that after a crash the record
// is either complete or absent.
func (r *Registry) Register(rec Record) error {
	if err := rec.validate(); err != nil {
		return fmt.Errorf("register process group: %w", err)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("register process group %s: %w", rec.ID, err)
	}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return fmt.Errorf("create process registry: %w", err)
	}
	// MkdirAll leaves an existing directory's mode alone; records list
	// what the user runs, so make sure only the user can read them.
	if err := os.Chmod(r.dir, 0o700); err != nil {
		return fmt.Errorf("create process registry: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(r.dir, rec.ID+recordExt), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("register process group %s: %w", rec.ID, err)
	}
	return nil
}

// Entry is one record as List and Clean see it.
type Entry struct {
	// ID is the record's identifier, from its file name.
	ID string `json:"id"`
	// Record is the parsed record; nil when Status is Corrupt.
	Record *Record `json:"record,omitempty"`
	// Status is Running, IdentityMismatch, Unverifiable or Corrupt.
	Status Status `json:"status"`
	// Reason explains any status other than Running.
	Reason string `json:"reason,omitempty"`
}

// Result is the outcome of Terminate for one record.
type Result struct {
	ID string `json:"id"`
	// Status is Terminated or AlreadyExited (the record is removed), or
	// IdentityMismatch, Unverifiable, Corrupt, NotFound or Failed (the
	// record, if any, is kept).
	Status Status `json:"status"`
	// Record is the record acted on, when it could be read.
	Record *Record `json:"record,omitempty"`
	// Report says what was signalled, when anything was attempted.
	Report *Report `json:"report,omitempty"`
	// Reason explains any status other than Terminated and AlreadyExited.
	Reason string `json:"reason,omitempty"`
}

// ids lists the record identifiers in the registry: one snapshot of the
// directory. A registry that does not exist yet is empty.
func (r *Registry) ids() ([]string, error) {
	des, err := os.ReadDir(r.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read process registry: %w", err)
	}
	var ids []string
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, recordExt) {
			continue // temporary files of a Register in progress, or strangers
		}
		ids = append(ids, strings.TrimSuffix(name, recordExt))
	}
	slices.Sort(ids)
	return ids, nil
}

// load reads and checks the record with id. It returns a Corrupt status
// (with the reason as error) for a record that cannot be used, NotFound
// when there is none.
func (r *Registry) load(id string) (*Record, Status, error) {
	if !ValidID(id) {
		return nil, NotFound, fmt.Errorf("invalid process id %q", id)
	}
	data, err := os.ReadFile(r.file(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, NotFound, fmt.Errorf("no process record %s", id)
	}
	if err != nil {
		return nil, Unverifiable, fmt.Errorf("read process record %s: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, Corrupt, fmt.Errorf("parse process record %s: %w", id, err)
	}
	if err := rec.validate(); err != nil {
		return &rec, Corrupt, fmt.Errorf("process record %s: %w", id, err)
	}
	if rec.ID != id {
		// The file name is the identifier a person types; a record that
		// names another group cannot be trusted to describe this one.
		return &rec, Corrupt, fmt.Errorf("process record %s: holds id %q", id, rec.ID)
	}
	return &rec, "", nil
}

// List returns every record with the state of its group, removing the
// records of groups that have already exited. Records it cannot use
// (corrupt, unverifiable) are listed and kept.
func (r *Registry) List(ctx context.Context) ([]Entry, error) {
	ids, err := r.ids()
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, len(ids))
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return entries, err
		}
		if !ValidID(id) {
			entries = append(entries, Entry{ID: id, Status: Corrupt, Reason: "file name is not a valid process id"})
			continue
		}
		rec, status, err := r.load(id)
		switch {
		case status == NotFound:
			continue // removed since the directory was read
		case err != nil:
			entries = append(entries, Entry{ID: id, Status: status, Reason: err.Error()})
			continue
		}
		status, err = Inspect(rec.Group)
		if status == AlreadyExited {
			if err := r.remove(id); err != nil {
				entries = append(entries, Entry{ID: id, Record: rec, Status: Failed, Reason: err.Error()})
			}
			continue
		}
		e := Entry{ID: id, Record: rec, Status: status}
		if err != nil {
			e.Reason = err.Error()
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// Terminate ends the group recorded as id with Teardown (SIGTERM, grace,
// SIGKILL) after verifying its identity, and removes the record when the
// group is gone — including when it had already exited. A record whose
// identity does not match, or cannot be checked, is left alone and
// nothing is signalled.
func (r *Registry) Terminate(ctx context.Context, id string, grace time.Duration) Result {
	rec, status, err := r.load(id)
	if err != nil {
		return Result{ID: id, Status: status, Record: rec, Reason: err.Error()}
	}
	res := Result{ID: id, Record: rec}
	rep, err := Teardown(ctx, rec.Group, grace)
	res.Status, res.Report = rep.Status, &rep
	if err != nil {
		res.Reason = err.Error()
		return res
	}
	if err := r.remove(id); err != nil {
		res.Status, res.Reason = Failed, err.Error()
	}
	return res
}

// Clean terminates every record of one snapshot of the registry, going on
// after records it cannot resolve, and returns a result for each. The
// error is non-nil when the registry cannot be read.
func (r *Registry) Clean(ctx context.Context, grace time.Duration) ([]Result, error) {
	ids, err := r.ids()
	if err != nil {
		return nil, err
	}
	results := make([]Result, 0, len(ids))
	for _, id := range ids {
		if !ValidID(id) {
			results = append(results, Result{ID: id, Status: Corrupt, Reason: "file name is not a valid process id"})
			continue
		}
		res := r.Terminate(ctx, id, grace)
		if res.Status == NotFound {
			// Another clean or terminate got there first: what it wanted
			// is done.
			res.Status, res.Reason = AlreadyExited, ""
		}
		results = append(results, res)
	}
	return results, nil
}

// remove deletes id's record; one already gone is fine.
func (r *Registry) remove(id string) error {
	if err := os.Remove(r.file(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove process record %s: %w", id, err)
	}
	return nil
}
