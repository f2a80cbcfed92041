package tools

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/aerie-run/aerie/runner/executor"
)

// fileError words a file operation's error for the model.
func fileError(tool, path string, err error) Result {
	switch {
	case errors.Is(err, executor.ErrOutsideWorkspace):
		return errorf("%s: %s: path is outside the workspace", tool, path)
	case errors.Is(err, fs.ErrNotExist):
		return errorf("%s: %s: no such file or directory", tool, path)
	case errors.Is(err, fs.ErrPermission):
		return errorf("%s: %s: permission denied", tool, path)
	default:
		return errorf("%s: %s: %v", tool, path, err)
	}
}

// pathOr returns p, or "." when it is empty.
func pathOr(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
