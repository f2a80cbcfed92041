package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/delivery"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/mtls"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/session"
	"github.com/aerie-run/aerie/runner/session/attempt"
)

// runnerFlags are aerie runner's options.
type runnerFlags struct {
	config         string
	terminationLog string
	socketWait     time.Duration
}

func newRunnerCmd(a *app) *cobra.Command {
	f := runnerFlags{
		config:         runconfig.DefaultPath,
		terminationLog: runconfig.DefaultTerminationLog,
		socketWait:     2 * time.Minute,
	}
	cmd := &cobra.Command{
		Use:   "runner --config PATH",
		Short: "Run one attempt of an AgentSession: the agent container of a runner pod",
		Long: `Runner runs the session that the aerie controller rendered into the runner
configuration at PATH: it waits for the workspace container's executor socket,
opens the session store named by $AERIE_DATABASE_URL, creates, resumes or forks
the session, and runs the agent loop with every tool executed by the executor.
The model's API key comes from ANTHROPIC_API_KEY or OPENAI_API_KEY; nothing
else secret is needed, and the tools never see either.

Events are JSON Lines on standard output (what kubectl logs shows); logs are
JSON on standard error. At the end the outcome, usage and a summary are
written as JSON (under 4 KiB) to the termination log, which the controller
reads back into the AgentSession's status.

On SIGTERM the loop stops, every process group is torn down and the journal is
drained before the runner exits 143.

Exit status: as aerie run's: 0 completed; 1 aerie failed; 2 configuration
error; 3 model or API failure; 4 a turn, token or time budget ran out; 6 no
valid result for spec.result (result_invalid); 130 or 143 cancelled.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runner(cmd, f)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &cli.ExitError{Code: runconfig.ExitConfig, Err: err}
	})
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", f.config, "the runner configuration `file`")
	fl.StringVar(&f.terminationLog, "termination-log", f.terminationLog,
		"where to write the outcome for the controller (`file`)")
	fl.DurationVar(&f.socketWait, "socket-wait", f.socketWait,
		"how long to wait for the executor's socket to appear, and for a restarted executor to serve it again")
	return cmd
}

// runner is aerie runner. Whatever happens, it leaves a report in the
// termination log: the controller has no other way to learn why.
func (a *app) runner(cmd *cobra.Command, f runnerFlags) error {
	ctx := cmd.Context()
	logger := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
	rep, err := a.runAttempt(ctx, cmd, f, logger)
	var ee *cli.ExitError
	if err != nil && !errors.As(err, &ee) {
		ee = &cli.ExitError{Code: runconfig.ExitFailure, Err: err}
	}
	if ee != nil {
		rep.ExitCode = ee.Code
		if rep.Outcome == "" {
			rep.Outcome = runconfig.OutcomeFailed
		}
		if rep.Reason == "" && ee.Err != nil {
			rep.Reason = ee.Err.Error()
		}
	}
	writeTerminationLog(f.terminationLog, rep, logger)
	if ee != nil {
		return ee
	}
	return nil
}

// runAttempt runs the attempt and returns its report; an error that is
// not an *cli.ExitError exits 1.
func (a *app) runAttempt(
	ctx context.Context, cmd *cobra.Command, f runnerFlags, logger *slog.Logger,
) (runconfig.Report, error) {
	cfg, err := runconfig.Load(f.config)
	if err != nil {
		return runconfig.Report{}, configErr(err)
	}
	rep := runconfig.Report{SessionID: cfg.Session.ID}
	warmProvider(cfg.Model.Provider, cfg.Model.API)
	logger = logger.With("session", cfg.Session.ID, "agentSession", cfg.AgentSession, "attempt", cfg.Session.Attempt)
	dsn := a.getenv(runconfig.DatabaseURLEnv)
	if dsn == "" {
		return rep, configErr(fmt.Errorf("no session store: $%s is empty (the controller's --database-secret)",
			runconfig.DatabaseURLEnv))
	}

	exe, err := dialExecutor(ctx, cfg.Executor.Socket, f.socketWait)
	if err != nil {
		return rep, err
	}
	defer func() {
		if err := exe.Close(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("close the executor connection", "err", err)
		}
	}()
	remotes, err := dialExecutorPods(ctx, cfg.Executors, f.socketWait)
	if err != nil {
		return rep, err
	}
	defer closeExecutorPods(context.WithoutCancel(ctx), remotes, logger)
	st, err := openStore(ctx, dsn)
	if err != nil {
		return rep, err
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Warn("close the session store", "err", err)
		}
	}()

	res, err := attempt.Run(ctx, st, cfg, attempt.Env{
		Executor:    exe,
		Executors:   namedExecutors(remotes),
		Getenv:      a.getenv,
		NewProvider: newProvider,
		Events:      cmd.OutOrStdout(),
		Logger:      logger,
	})
	if err != nil {
		var ce *session.ConfigError
		if errors.As(err, &ce) {
			return rep, configErr(err)
		}
		return rep, err
	}
	if cfg.Push != nil && res.ExitCode == runconfig.ExitCompleted {
		res = deliver(ctx, cfg.Push.Socket, res, logger)
	}
	if res.ExitCode != runconfig.ExitCompleted {
		msg := res.Outcome
		if res.Reason != "" {
			msg += ": " + res.Reason
		}
		return res, &cli.ExitError{Code: res.ExitCode, Err: errors.New(msg)}
	}
	return res, nil
}

// pushTimeout bounds the wait for the git-push container's answer.
const pushTimeout = 15 * time.Minute

// deliver has the git-push container commit and push the work of the
// completed attempt res, and reports how it went: a failure makes the
// outcome push_failed, never a silent success.
func deliver(ctx context.Context, socket string, res runconfig.Report, logger *slog.Logger) runconfig.Report {
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	r, err := delivery.Request(ctx, socket)
	if err != nil {
		r.Error = err.Error()
	}
	res.Push = &runconfig.PushReport{Branch: r.Branch, Commit: r.Commit, NothingToPush: r.NothingToPush, Error: r.Error}
	logger.Info("delivery", "branch", r.Branch, "commit", r.Commit, "nothingToPush", r.NothingToPush, "error", r.Error)
	if r.Error != "" {
		res.Outcome, res.ExitCode, res.Reason = runconfig.OutcomePushFailed, runconfig.ExitFailure, res.Push.Message()
	}
	return res
}

func (a *app) getenv(name string) string {
	if a.env.Getenv == nil {
		return ""
	}
	return a.env.Getenv(name)
}

// dialExecutor waits (at most wait) for the workspace container to create
// its socket, then connects. The two containers start together; the socket
// appears once the executor is ready. A workspace container that crashes
// is restarted by the kubelet: the connection is made again then, within
// the same wait.
func dialExecutor(ctx context.Context, socket string, wait time.Duration) (*executor.Redialer, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		fi, err := os.Stat(socket)
		if err == nil && fi.Mode().Type() == fs.ModeSocket {
			break
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, fmt.Errorf("executor socket %s did not appear within %s: is the workspace container running?",
				socket, wait)
		case <-tick.C:
		}
	}
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	exe, err := executor.Dial(dctx, socket)
	if err != nil {
		return nil, fmt.Errorf("connect to the executor: %w", err)
	}
	return executor.NewRedialer(exe, socket, wait), nil
}

// writeTerminationLog leaves the report where the kubelet reads the
// container's termination message.
func writeTerminationLog(file string, rep runconfig.Report, logger *slog.Logger) {
	if file == "" {
		return
	}
	b, err := runconfig.EncodeReport(rep)
	if err != nil {
		logger.Error("encode the report", "err", err)
		return
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		logger.Error("write the termination log", "path", file, "err", err)
	}
}

// redialWait bounds the wait for an executor pod that lost its
// connection to serve again (its container restarted); calls to an
// executor pod that is gone fail after it.
const redialWait = 15 * time.Second

// remoteExecutor is an executor pod the runner is connected to.
type remoteExecutor struct {
	runconfig.RemoteExecutor
	exe *executor.Redialer
}

// dialExecutorPods connects to the session's executor pods, each within
// wait: a pod has its address before its executor serves (the aerie
// binary is copied in, a workspace may be cloned first). On an error the
// connections made are closed.
func dialExecutorPods(
	ctx context.Context, execs []runconfig.RemoteExecutor, wait time.Duration,
) ([]remoteExecutor, error) {
	var out []remoteExecutor
	fail := func(err error) ([]remoteExecutor, error) {
		closeExecutorPods(context.WithoutCancel(ctx), out, nil)
		return nil, err
	}
	for _, e := range execs {
		cred, err := mtls.Load(e.Credential)
		if err == nil && !cred.IsRunner() {
			err = fmt.Errorf("%s is executor %s's credential, not the runner's", e.Credential, cred.Name())
		}
		if err != nil {
			return fail(fmt.Errorf("executor %s: %w", e.Name, err))
		}
		dial := func(ctx context.Context) (*executor.Remote, error) {
			return executor.DialTCP(ctx, e.Address, e.Name, cred)
		}
		r, err := dialWithin(ctx, dial, wait)
		if err != nil {
			return fail(fmt.Errorf("connect to executor %s at %s: %w", e.Name, e.Address, err))
		}
		target := fmt.Sprintf("executor %s (%s)", e.Name, e.Address)
		out = append(out, remoteExecutor{RemoteExecutor: e, exe: executor.NewRedialerFunc(r, target, redialWait, dial)})
	}
	return out, nil
}

// dialWithin dials until it succeeds, ctx ends or wait has passed,
// returning the last error then.
func dialWithin(
	ctx context.Context, dial func(context.Context) (*executor.Remote, error), wait time.Duration,
) (*executor.Remote, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(wctx, 10*time.Second)
		r, err := dial(actx)
		acancel()
		if err == nil {
			return r, nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, fmt.Errorf("not serving within %s: %w", wait, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// closeExecutorPods closes the connections to the executor pods, which tears
// down what runs there.
func closeExecutorPods(ctx context.Context, execs []remoteExecutor, logger *slog.Logger) {
	for _, e := range execs {
		if err := e.exe.Close(ctx); err != nil && logger != nil {
			logger.Warn("close the executor connection", "executor", e.Name, "err", err)
		}
	}
}

// namedExecutors are the executor pods as the session names them.
func namedExecutors(remotes []remoteExecutor) []session.NamedExecutor {
	out := make([]session.NamedExecutor, len(remotes))
	for i, r := range remotes {
		out[i] = session.NamedExecutor{Name: r.Name, Executor: r.exe}
	}
	return out
}
