package main

import (
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// TestGitPushProcess runs aerie git-push as a process, as the git-push
// container does, against the test git server, and has the runner's
// deliver ask it: the commit lands on the branch and in the report; a
// push the server rejects makes the report push_failed with git's
// message, not a success.
func TestGitPushProcess(t *testing.T) {
	git := testenv.StartGitServer(t, "aerie-bot", "push-token-31c8")
	for _, tt := range []struct {
		name, repo string
		reject     bool
	}{{"pushed", "app", false}, {"rejected", "frozen", true}} {
		t.Run(tt.name, func(t *testing.T) {
			head := git.CreateRepo(t, tt.repo, map[string]string{"main.go": "package main\n"})
			if tt.reject {
				git.RejectPushes(t, tt.repo, "pushes to frozen are refused")
			}
			ws, delivery := t.TempDir(), t.TempDir()
			testenv.WriteTree(t, ws, map[string]string{"main.go": "package main // fixed\n"})
			testenv.WriteFile(t, filepath.Join(delivery, "base"), head+"\n", 0o644)
			socket := filepath.Join(delivery, "push.sock")
			cmd := exec.Command(os.Args[0], "git-push", "--socket", socket, "--workspace", ws,
				"--base-file", filepath.Join(delivery, "base"), "--scratch", t.TempDir())
			cmd.Env = []string{
				asMainEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
				runconfig.PushURLEnv + "=" + git.URL(tt.repo), runconfig.PushBranchEnv + "=aerie/fix",
				runconfig.PushMessageEnv + "=Fix it", runconfig.PushAuthorNameEnv + "=aerie",
				runconfig.PushAuthorEmailEnv + "=aerie@example.com",
				runconfig.PushUsernameEnv + "=aerie-bot", runconfig.PushPasswordEnv + "=push-token-31c8",
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				if fi, err := os.Stat(socket); err == nil && fi.Mode().Type() == fs.ModeSocket {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no socket after a minute; stderr:\n%s", stderr.String())
				}
			}
			rep := deliver(t.Context(), socket,
				runconfig.Report{Outcome: runconfig.OutcomeCompleted}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if rep.Push == nil {
				t.Fatal("no push in the report")
			}
			if tt.reject {
				if rep.Outcome != runconfig.OutcomePushFailed || rep.ExitCode != runconfig.ExitFailure ||
					!strings.Contains(rep.Reason, "pushes to frozen are refused") || rep.Push.Commit != "" {
					t.Fatalf("report %+v, push %+v", rep, rep.Push)
				}
			} else {
				got, ok := git.Ref(t, tt.repo, "refs/heads/aerie/fix")
				if rep.Outcome != runconfig.OutcomeCompleted || rep.ExitCode != 0 || !ok || got != rep.Push.Commit {
					t.Fatalf("report %+v, push %+v; the server's aerie/fix is %q", rep, rep.Push, got)
				}
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("aerie git-push after SIGTERM: %v\n%s", err, stderr.String())
			}
			if strings.Contains(stderr.String(), "push-token-31c8") {
				t.Errorf("the log holds the password:\n%s", stderr.String())
			}
		})
	}
}
