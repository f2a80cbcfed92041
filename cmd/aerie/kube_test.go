package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// TestKubeCommands runs the real aerie and kubectl-aerie binaries: aerie
// hands its cluster commands to kubectl-aerie, found beside it (through a
// symbolic link to aerie too) or on PATH, and the output and exit status
// are kubectl-aerie's.
func TestKubeCommands(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.9", "-o", bin+"/", ".", "../kubectl-aerie")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	older := t.TempDir() // a kubectl-aerie of another release
	build = exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.8", "-o", older+"/", "../kubectl-aerie")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	src := t.TempDir()
	testenv.WriteFile(t, filepath.Join(src, "skills/review/SKILL.md"), "---\nname: review\ndescription: Review code.\n---\n", 0o644)
	alone := t.TempDir() // aerie without kubectl-aerie
	testenv.CopyFile(t, filepath.Join(bin, "aerie"), filepath.Join(alone, "aerie"), 0o755)
	linked := t.TempDir()
	if err := os.Symlink(filepath.Join(bin, "aerie"), filepath.Join(linked, "aerie")); err != nil {
		t.Fatal(err)
	}
	const systemPath = "/usr/local/bin:/usr/bin:/bin"

	run := func(t *testing.T, path string, pathEnv string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(path, args...)
		cmd.Env = []string{"PATH=" + pathEnv, "HOME=" + t.TempDir()}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s: %v", path, err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}
	pack := []string{"layer", "pack", src, "--name", "team-tools", "-n", "agents"}
	want, _, code := run(t, filepath.Join(bin, "kubectl-aerie"), systemPath, pack...)
	if code != 0 || !strings.Contains(want, "name: team-tools") {
		t.Fatalf("kubectl-aerie layer pack: exit %d\n%s", code, want)
	}

	for _, tt := range []struct{ name, aerie, path string }{
		{"beside", filepath.Join(bin, "aerie"), systemPath},
		{"beside through a link", filepath.Join(linked, "aerie"), systemPath},
		{"on PATH", filepath.Join(alone, "aerie"), bin + ":" + systemPath},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, stderr, code := run(t, tt.aerie, tt.path, pack...); code != 0 || got != want || stderr != "" {
				t.Errorf("aerie layer pack: exit %d, stdout %q, stderr %q; want kubectl-aerie's output and nothing on stderr", code, got, stderr)
			}
			help, _, code := run(t, tt.aerie, tt.path, "submit", "--help")
			if code != 0 || !strings.Contains(help, "aerie submit") || !strings.Contains(help, "--api-key-secret") {
				t.Errorf("aerie submit --help: exit %d\n%s", code, help)
			}
			// A configuration error keeps kubectl-aerie's status, 2.
			_, stderr, code := run(t, tt.aerie, tt.path, "submit", "-f", filepath.Join(src, "missing.yaml"))
			if code != 2 || !strings.Contains(stderr, "missing.yaml") {
				t.Errorf("aerie submit -f missing.yaml: exit %d, stderr %q; want 2 naming the file", code, stderr)
			}
		})
	}

	t.Run("another release", func(t *testing.T) {
		t.Parallel()
		got, stderr, code := run(t, filepath.Join(alone, "aerie"), older+":"+systemPath, pack...)
		if code != 0 || got != want || !strings.Contains(stderr, "warning: kubectl-aerie is v9.9.8 but aerie is v9.9.9") {
			t.Errorf("aerie layer pack with an older kubectl-aerie: exit %d, stderr %q; want the output and a warning", code, stderr)
		}
	})

	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		_, stderr, code := run(t, filepath.Join(alone, "aerie"), systemPath, "get")
		if code != 1 || !strings.Contains(stderr, "needs kubectl-aerie") || !strings.Contains(stderr, "go install github.com/aerie-run/aerie/cmd/kubectl-aerie@") {
			t.Errorf("aerie get without kubectl-aerie: exit %d, stderr %q", code, stderr)
		}
	})
}
