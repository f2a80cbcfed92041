package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/process"
)

// newExecutorCmd is `aerie executor`: the workspace side of a runner pod.
func newExecutorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "executor",
		Short: "Run the agent's tools in the workspace, for a runner in another container",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newExecutorServeCmd(), newExecutorInstallCmd())
	return cmd
}

func newExecutorServeCmd() *cobra.Command {
	var (
		socket, workspace string
		grace             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve --socket PATH --workspace DIR",
		Short: "Serve the executor protocol on a unix socket",
		Long: `Serve runs the commands and file operations of an agent's tools (bash,
custom tools, hooks, stdio MCP servers, the file tools) in the workspace DIR,
for the runner that connects to the unix socket PATH. It is the "workspace"
container of a runner pod: it holds no secrets and runs as another user than
the runner; the socket (mode 0660, the group of its directory) is how the two
meet.

Every command runs in a process group of its own, torn down (SIGTERM, the
grace period, SIGKILL, escaped descendants included) when the runner cancels
it or its connection is lost. The executor is a child subreaper: orphans of
its commands come back to it and are reaped. On SIGTERM it tears every group
down, closes its connections and exits 0. Logs are JSON lines on standard
error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			return serveExecutor(cmd.Context(), log, socket, workspace, grace)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "create and serve the unix socket at `PATH`")
	cmd.Flags().StringVar(&workspace, "workspace", "", "run commands and file operations in the directory `DIR`")
	cmd.Flags().DurationVar(&grace, "grace", process.DefaultGrace,
		"time between SIGTERM and SIGKILL when a process group is torn down")
	_ = cmd.MarkFlagRequired("socket")
	_ = cmd.MarkFlagRequired("workspace")
	return cmd
}

// serveExecutor serves the workspace on the socket until ctx is done,
// then tears every group down and returns nil.
func serveExecutor(ctx context.Context, log *slog.Logger, socket, workspace string, grace time.Duration) error {
	if grace <= 0 {
		return fmt.Errorf("--grace must be positive, not %s", grace)
	}
	// Checked before the process becomes a subreaper, which it stays.
	if fi, err := os.Stat(workspace); err != nil {
		return fmt.Errorf("--workspace: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("--workspace: %s is not a directory", workspace)
	}
	reaper, stopReaping, err := process.Subreap()
	if err != nil {
		return err
	}
	defer stopReaping()
	l, err := executor.NewLocal(workspace, executor.Options{Reaper: reaper, Grace: grace, Logger: log})
	if err != nil {
		return fmt.Errorf("--workspace: %w", err)
	}
	ln, err := executor.Listen(socket)
	if err != nil {
		_ = l.Close(context.Background())
		return fmt.Errorf("--socket: %w", err)
	}
	log.Info("executor serving", "socket", socket, "workspace", workspace,
		"pid", os.Getpid(), "uid", os.Getuid(), "gid", os.Getgid())

	// The connections stay open while the groups are torn down, so that
	// the runner sees its commands' exits.
	serving, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- executor.Serve(serving, ln, l, executor.ServeOptions{Logger: log}) }()

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("executor stopping: tearing down every process group", "grace", grace.String())
	case serveErr = <-served:
		served = nil
		log.Error("executor stopped serving: tearing down every process group")
	}
	// Only the grace period is shortened by a context; the teardown of
	// each group always completes.
	reports, teardownErr := l.TeardownAll(context.Background())
	for _, rep := range reports {
		log.Info("process group torn down", "id", rep.ID, "pgid", rep.PGID, "status", rep.Status, "reason", rep.Reason)
	}
	closeErr := l.Close(context.Background())
	stopServing()
	if served != nil {
		serveErr = <-served
	}
	if err := errors.Join(serveErr, teardownErr, closeErr); err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	log.Info("executor stopped")
	return nil
}
