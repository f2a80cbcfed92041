package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/mtls"
	"github.com/aerie-run/aerie/runner/process"
)

// newExecutorCmd is `aerie executor`: the workspace side of a runner pod,
// or an executor of its own reached over TCP.
func newExecutorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "executor",
		Short: "Run the agent's tools in the workspace, for a runner in another container or on another machine",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newExecutorServeCmd(), newExecutorCredentialsCmd(), newExecutorInstallCmd())
	return cmd
}

// serveFlags are the flags of `aerie executor serve`.
type serveFlags struct {
	socket, listen, credential, workspace string
	grace                                 time.Duration
}

func newExecutorServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve (--socket PATH | --listen ADDR --credential FILE) --workspace DIR",
		Short: "Serve the executor protocol on a unix socket, or on TCP with TLS",
		Long: `Serve runs the commands and file operations of an agent's tools (bash,
custom tools, hooks, stdio MCP servers, the file tools) in the workspace DIR,
for the runner that connects to it.

With --socket PATH it serves the unix socket PATH: it is the "workspace"
container of a runner pod. It holds no secrets and runs as another user than
the runner; the socket (mode 0660, the group of its directory) is how the two
meet.

With --listen ADDR (host:port) it serves TCP, with TLS 1.3 and both sides
authenticated: --credential FILE is this executor's own credential, NAME.pem
as "aerie executor credentials" writes it. Only the runner holding runner.pem
of the same set is served; any other peer is refused during the TLS
handshake, and logged with its address and the reason.

Every command runs in a process group of its own, torn down (SIGTERM, the
grace period, SIGKILL, escaped descendants included) when the runner cancels
it or its connection is lost. The executor is a child subreaper: orphans of
its commands come back to it and are reaped. On SIGTERM it tears every group
down, closes its connections and exits 0. Logs are JSON lines on standard
error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			return serveExecutor(cmd.Context(), log, f)
		},
	}
	cmd.Flags().StringVar(&f.socket, "socket", "", "create and serve the unix socket at `PATH`")
	cmd.Flags().StringVar(&f.listen, "listen", "", "serve TCP with TLS on `ADDR` (host:port)")
	cmd.Flags().StringVar(&f.credential, "credential", "",
		"this executor's credential `FILE` (NAME.pem of aerie executor credentials), for --listen")
	cmd.Flags().StringVar(&f.workspace, "workspace", "", "run commands and file operations in the directory `DIR`")
	cmd.Flags().DurationVar(&f.grace, "grace", process.DefaultGrace,
		"time between SIGTERM and SIGKILL when a process group is torn down")
	_ = cmd.MarkFlagRequired("workspace")
	return cmd
}

// listener checks the flags that say where to serve, and returns what
// listens there (not yet listening) and how to log it.
func (f serveFlags) listener() (listen func() (net.Listener, error), attrs []any, err error) {
	switch {
	case f.socket == "" && f.listen == "":
		return nil, nil, errors.New("give --socket PATH (a runner pod's workspace container) or " +
			"--listen ADDR (an executor reached over TCP)")
	case f.socket != "" && f.listen != "":
		return nil, nil, errors.New("give --socket or --listen, not both")
	case f.socket != "" && f.credential != "":
		return nil, nil, errors.New("--credential is for --listen: the socket's mode and group decide who connects to it")
	case f.socket != "":
		return func() (net.Listener, error) {
			ln, err := executor.Listen(f.socket)
			if err != nil {
				return nil, fmt.Errorf("--socket: %w", err)
			}
			return ln, nil
		}, []any{"socket", f.socket}, nil
	case f.credential == "":
		return nil, nil, errors.New("--listen needs --credential FILE: this executor's NAME.pem, " +
			"written by aerie executor credentials")
	}
	cred, err := mtls.Load(f.credential)
	if err != nil {
		return nil, nil, fmt.Errorf("--credential: %w", err)
	}
	if cred.IsRunner() {
		return nil, nil, fmt.Errorf("--credential: %s is the runner's credential; serve with the executor's NAME.pem",
			f.credential)
	}
	if exp := cred.NotAfter(); time.Now().After(exp) {
		return nil, nil, fmt.Errorf("--credential: %s expired at %s; generate a fresh set with aerie executor credentials",
			f.credential, exp.UTC().Format(time.RFC3339))
	}
	return func() (net.Listener, error) {
		ln, err := executor.ListenTCP(f.listen, cred)
		if err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
		return ln, nil
	}, []any{"executor", cred.Name()}, nil
}

// serveExecutor serves the workspace on the socket or the TCP address
// until ctx is done, then tears every group down and returns nil.
func serveExecutor(ctx context.Context, log *slog.Logger, f serveFlags) error {
	workspace, grace := f.workspace, f.grace
	if grace <= 0 {
		return fmt.Errorf("--grace must be positive, not %s", grace)
	}
	listen, attrs, err := f.listener()
	if err != nil {
		return err
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
	ln, err := listen()
	if err != nil {
		_ = l.Close(context.Background())
		return err
	}
	if f.listen != "" {
		attrs = append(attrs, "listen", ln.Addr().String())
	}
	log.Info("executor serving", append(attrs, "workspace", workspace,
		"pid", os.Getpid(), "uid", os.Getuid(), "gid", os.Getgid())...)

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
