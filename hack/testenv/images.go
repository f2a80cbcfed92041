package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// RunnerImage is the runner image hack/images.sh builds from the
// Dockerfile, for a real node (Node.ImportImage).
const RunnerImage = "localhost/aerie/aerie-runner:dev"

// RunnerImageArchive builds the images from this tree with hack/images.sh
// (buildah, mmdebstrap; the first time in minutes, then the layers the tree
// changed) and returns the runner image's archive. The build runs once per
// test binary.
func RunnerImageArchive(t testing.TB) string {
	t.Helper()
	imagesOnce.Do(func() { imagesArchive, imagesErr = BuildRunnerImage() })
	if imagesErr != nil {
		requireDependency(t, imagesErr.Error(),
			"install buildah and mmdebstrap (Debian: apt-get install buildah mmdebstrap) and run as root")
		return ""
	}
	return imagesArchive
}

var (
	imagesOnce    sync.Once
	imagesArchive string
	imagesErr     error
)

// BuildRunnerImage is RunnerImageArchive for a program rather than a test:
// it runs hack/images.sh, its progress on standard error, and returns the
// runner image's archive.
func BuildRunnerImage() (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot(), "hack", "images.sh"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/images.sh could not build the runner image: %w", err)
	}
	return filepath.Join(strings.TrimSpace(out.String()), "aerie-runner.tar"), nil
}
