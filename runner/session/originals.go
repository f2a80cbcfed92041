package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/tools"
)

// OutputStore is the part of the session store that keeps tool outputs
// (store.DB has it).
type OutputStore interface {
	PutToolOutput(ctx context.Context, tenant string, session uuid.UUID, callID string, data []byte) error
	ToolOutput(ctx context.Context, tenant string, session uuid.UUID, callID string) ([]byte, error)
}

// StoreOriginals keeps the originals of a session's shortened tool results
// in the session store, as Options.Originals: in a pod, where a file would
// be lost with the pod, so that retrieve — and a person reading the
// session — still has them after a later attempt resumes the session.
func StoreOriginals(st OutputStore, tenant string) func(uuid.UUID) tools.Originals {
	return func(id uuid.UUID) tools.Originals { return storeOriginals{st: st, tenant: tenant, session: id} }
}

type storeOriginals struct {
	st      OutputStore
	tenant  string
	session uuid.UUID
}

func (o storeOriginals) Keep(ctx context.Context, callID, text string) (string, error) {
	if err := o.st.PutToolOutput(ctx, o.tenant, o.session, callID, []byte(text)); err != nil {
		return "", err
	}
	return fmt.Sprintf("the session store (session %s, call %s)", o.session, callID), nil
}

func (o storeOriginals) Original(ctx context.Context, callID string) (string, error) {
	b, err := o.st.ToolOutput(ctx, o.tenant, o.session, callID)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: %w", tools.ErrNoOriginal, err)
	}
	if err != nil {
		return "", err
	}
	return string(b), nil
}
