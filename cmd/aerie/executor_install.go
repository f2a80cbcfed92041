package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// newExecutorInstallCmd is `aerie executor install DIR`: how an executor
// pod, whose image need not have aerie, gets the binary it serves with.
func newExecutorInstallCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "install DIR",
		Short: "Copy this aerie binary into DIR, for an executor pod's container",
		Long: `Install copies the running aerie binary to DIR/aerie (mode 0755). An executor
pod runs it first, from the runner image, into a volume that its executor
container, from any image, then serves with: aerie is one static binary.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return installSelf(args[0]) },
	}
}

// installSelf copies the running binary to dir/aerie, through a temporary
// file renamed into place.
func installSelf(dir string) (err error) {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install: find this binary: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer func() { _ = src.Close() }()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("install: %s is not a directory (create it, or mount a volume there)", dir)
	}
	tmp, err := os.CreateTemp(dir, ".aerie-*")
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, src); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("install: copy %s: %w", self, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("install: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, "aerie")); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	return nil
}
