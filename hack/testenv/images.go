package testenv

import (
	"bytes"
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
	imagesOnce.Do(func() {
		cmd := exec.Command(filepath.Join(repoRoot(), "hack", "images.sh"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		imagesErr = cmd.Run()
		imagesDir = strings.TrimSpace(out.String())
	})
	if imagesErr != nil {
		requireDependency(t, "hack/images.sh could not build the runner image: "+imagesErr.Error(),
			"install buildah and mmdebstrap (Debian: apt-get install buildah mmdebstrap) and run as root")
		return ""
	}
	return filepath.Join(imagesDir, "aerie-runner.tar")
}

var (
	imagesOnce sync.Once
	imagesDir  string
	imagesErr  error
)
