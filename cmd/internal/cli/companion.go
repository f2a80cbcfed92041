package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// ErrNoCompanion: the program is neither beside the running one nor on
// PATH.
var ErrNoCompanion = errors.New("not found beside this program or on PATH")

// FindCompanion finds name, the other of aerie's two programs (aerie runs
// kubectl-aerie for the cluster commands, kubectl-aerie runs aerie to read
// the session store): beside the running program, following symbolic
// links to it (where `make build` and `go install` put both), then on
// PATH. A program found nowhere is ErrNoCompanion, for the caller to say
// how to install it.
func FindCompanion(name string) (string, error) {
	if self, err := os.Executable(); err == nil {
		if self, err = filepath.EvalSymlinks(self); err == nil {
			p := filepath.Join(filepath.Dir(self), name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath(name)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%s: %w", name, ErrNoCompanion)
	}
	return "", fmt.Errorf("find %s: %w", name, err)
}
