package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aerie-run/aerie/runner/atomicfile"
)

// Originals keeps, for one session, the byte-exact output of the tool calls
// whose results reach the model shortened — capped, or compressed — keyed
// by tool call id, so that the retrieve tool, and a person reading the
// session, can have them back. Locally they are sidecar files (Sidecars);
// in a pod they are in the session store, which outlives the pod.
type Originals interface {
	// Keep stores text as the output of callID, replacing what was kept
	// for it, and says where it is for the people reading the result: a
	// file's path, or the store's name.
	Keep(ctx context.Context, callID, text string) (where string, err error)
	// Original returns what Keep stored for callID; an error matching
	// ErrNoOriginal when nothing was.
	Original(ctx context.Context, callID string) (string, error)
}

// ErrNoOriginal is the error of Originals.Original for a call whose output
// was not kept.
var ErrNoOriginal = errors.New("no original output kept for this call")

// Sidecars keeps one session's originals as files in a directory, each
// written atomically, mode 0600, as <session>_<call id>.txt (the call id,
// which comes from the model provider, made safe as a file name). Sweep
// removes old ones.
type Sidecars struct {
	// Dir is the sidecar directory, made when the first file is kept.
	Dir string
	// Session is the id of the session the calls are of.
	Session string
}

// Keep writes text to the call's sidecar file and returns its path.
func (s Sidecars) Keep(_ context.Context, callID, text string) (string, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", fmt.Errorf("create sidecar directory: %w", err)
	}
	path := s.path(callID)
	if err := atomicfile.Write(path, []byte(text), 0o600); err != nil {
		return "", fmt.Errorf("write sidecar file: %w", err)
	}
	return path, nil
}

// Original reads the call's sidecar file.
func (s Sidecars) Original(_ context.Context, callID string) (string, error) {
	b, err := os.ReadFile(s.path(callID))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read sidecar file: %w", ErrNoOriginal)
	}
	if err != nil {
		return "", fmt.Errorf("read sidecar file: %w", err)
	}
	return string(b), nil
}

func (s Sidecars) path(callID string) string {
	name := safeName(callID)
	if s.Session != "" {
		name = safeName(s.Session) + "_" + name
	}
	return filepath.Join(s.Dir, name+".txt")
}

// safeName turns an id into a file name: what is not a letter, a digit, a
// dash or an underscore becomes an underscore.
func safeName(id string) string {
	if id == "" {
		return "_"
	}
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
