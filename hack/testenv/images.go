package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RunnerImage is the runner image hack/images.sh builds from the
// Dockerfile, for a real node (Node.ImportImage).
const RunnerImage = "localhost/aerie/aerie-runner:dev"

// RunnerImageArchive builds the images from this tree with hack/images.sh
// (buildah, mmdebstrap; the first time in minutes, then the layers the tree
// changed) and returns the runner image's archive.
func RunnerImageArchive(t testing.TB) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(repoRoot(), "hack", "images.sh"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		requireDependency(t, "hack/images.sh could not build the runner image: "+err.Error(),
			"install buildah and mmdebstrap (Debian: apt-get install buildah mmdebstrap) and run as root")
		return ""
	}
	return filepath.Join(strings.TrimSpace(out.String()), "aerie-runner.tar")
}
