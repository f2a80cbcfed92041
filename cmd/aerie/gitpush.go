package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/delivery"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// gitPushFlags are aerie git-push's options.
type gitPushFlags struct {
	socket, workspace, baseFile, scratch string
}

// newGitPushCmd is `aerie git-push`: the git-push container of a runner
// pod with spec.workspace.git.push.
func newGitPushCmd(a *app) *cobra.Command {
	f := gitPushFlags{
		socket:    runconfig.DefaultPushSocket,
		workspace: runconfig.DefaultWorkspace,
		baseFile:  runconfig.DefaultBaseFile,
		scratch:   os.TempDir(),
	}
	cmd := &cobra.Command{
		Use:   "git-push",
		Short: "Commit and push a runner pod's workspace when its runner asks: the git-push container",
		Long: `Git-push serves one job on the unix socket --socket: when the runner, its agent
done with outcome completed, asks, it commits the files of the work tree
--workspace onto the commit the git-clone container recorded in --base-file,
and pushes the commit, never forced, to $` + runconfig.PushBranchEnv + ` of $` + runconfig.PushURLEnv + `
(https or http), with the message $` + runconfig.PushMessageEnv + `, the author $` + runconfig.PushAuthorNameEnv + `
<$` + runconfig.PushAuthorEmailEnv + `> and the credentials $` + runconfig.PushUsernameEnv + `
and $` + runconfig.PushPasswordEnv + `.

It never uses the workspace's own repository, where the tools could have
planted hooks or configuration: it fetches the cloned commit from the remote
into a new bare repository under --scratch, with hooks off and no system or
global git configuration, and reads only the work tree's files. Every request
gets the answer of the one delivery, as JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			return serveGitPush(cmd.Context(), log, f, a.getenv)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.socket, "socket", f.socket, "create and serve the unix socket at `PATH`")
	fl.StringVar(&f.workspace, "workspace", f.workspace, "the work tree to commit (`DIR`)")
	fl.StringVar(&f.baseFile, "base-file", f.baseFile, "the `file` that holds the cloned commit")
	fl.StringVar(&f.scratch, "scratch", f.scratch, "a private `directory` for the scratch repository")
	return cmd
}

func serveGitPush(ctx context.Context, log *slog.Logger, f gitPushFlags, getenv func(string) string) error {
	spec := delivery.Spec{
		Workspace:   f.workspace,
		URL:         getenv(runconfig.PushURLEnv),
		Branch:      getenv(runconfig.PushBranchEnv),
		Message:     getenv(runconfig.PushMessageEnv),
		AuthorName:  getenv(runconfig.PushAuthorNameEnv),
		AuthorEmail: getenv(runconfig.PushAuthorEmailEnv),
		Username:    getenv(runconfig.PushUsernameEnv),
		Password:    getenv(runconfig.PushPasswordEnv),
		Scratch:     f.scratch,
	}
	if spec.URL == "" || spec.Branch == "" {
		return fmt.Errorf("$%s and $%s must name the remote and the branch", runconfig.PushURLEnv, runconfig.PushBranchEnv)
	}
	ln, err := executor.Listen(f.socket)
	if err != nil {
		return err
	}
	log.Info("serving", "socket", f.socket, "url", spec.URL, "branch", spec.Branch)
	return delivery.Serve(ctx, ln, func(ctx context.Context) delivery.Result {
		base, err := os.ReadFile(f.baseFile)
		if err != nil {
			return delivery.Result{Branch: spec.Branch, Error: fmt.Sprintf("read the cloned commit: %v", err)}
		}
		s := spec
		s.Base = strings.TrimSpace(string(base))
		r := delivery.Push(ctx, s)
		log.Info("delivered", "branch", r.Branch, "commit", r.Commit, "nothingToPush", r.NothingToPush, "error", r.Error)
		return r
	})
}
