package memory

import (
	"context"
	"fmt"
)

// Store is what Stored needs of the session store (store.Store has it):
// versioned documents by tenant, scope and name, and a put that stores
// only over the version it names.
type Store interface {
	// Memory returns the document and its version; version 0, and no
	// data, when there is none.
	Memory(ctx context.Context, tenant, scope, target string) (data []byte, version int64, err error)
	// PutMemory stores data if the document's version is still version,
	// and says whether it did.
	PutMemory(ctx context.Context, tenant, scope, target string, data []byte, version int64) (stored bool, err error)
}

// Stored keeps the memory documents in the session store, for sessions
// that run where files do not last (a pod): the project's MEMORY.md per
// tenant and Scope, the user's USER.md per tenant. An update reads the
// document and its version, changes it, and puts it back over that
// version, reading again when another update came first: the version is
// the store's lock, and no change is lost. A malformed document is refused
// as a file is, and left as it is for someone to repair (aerie memory
// edit); the store keeps no .bak copy, since nothing overwrites it.
type Stored struct {
	Store Store
	// Tenant is the Kubernetes namespace.
	Tenant string
	// Scope names the project: its git URL, or the name spec.memory.scope
	// gives it.
	Scope string
}

// scope is where the target's document is kept: the user's is the
// tenant's, whatever the project.
func (s Stored) scope(t Target) string {
	if t == User {
		return ""
	}
	return s.Scope
}

// Read returns the target's document; a missing one is empty.
func (s Stored) Read(ctx context.Context, t Target) ([]byte, error) {
	data, _, err := s.Store.Memory(ctx, s.Tenant, s.scope(t), t.FileName())
	return data, err
}

// Update changes the target's document: change may be called more than
// once, with the document as it is each time, when other updates race
// this one.
func (s Stored) Update(ctx context.Context, t Target, change func(old []byte) ([]byte, error)) error {
	scope, name := s.scope(t), t.FileName()
	for {
		old, version, err := s.Store.Memory(ctx, s.Tenant, scope, name)
		if err != nil {
			return err
		}
		data, err := change(old)
		if err != nil {
			return err
		}
		stored, err := s.Store.PutMemory(ctx, s.Tenant, scope, name, data, version)
		if err != nil {
			return err
		}
		if stored {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("write %s: %w", name, context.Cause(ctx))
		}
	}
}

// Where names the target's document for people: its scope and name.
func (s Stored) Where(t Target) string {
	if t == User {
		return fmt.Sprintf("%s of namespace %s", t.FileName(), s.Tenant)
	}
	return fmt.Sprintf("%s of %s in namespace %s", t.FileName(), s.Scope, s.Tenant)
}
