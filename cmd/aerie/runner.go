package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/session"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// runnerFlags are aerie runner's options.
type runnerFlags struct {
	config         string
	terminationLog string
	socketWait     time.Duration
}

func newRunnerCmd(a *app) *cobra.Command {
	f := runnerFlags{config: runconfig.DefaultPath, terminationLog: runconfig.DefaultTerminationLog, socketWait: 2 * time.Minute}
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
error; 3 model or API failure; 4 a turn, token or time budget ran out; 130 or
143 cancelled.`,
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
	fl.StringVar(&f.terminationLog, "termination-log", f.terminationLog, "where to write the outcome for the controller (`file`)")
	fl.DurationVar(&f.socketWait, "socket-wait", f.socketWait, "how long to wait for the executor's socket to appear")
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

// runAttempt runs the session and returns its report; an error that is not
// an *cli.ExitError exits 1.
func (a *app) runAttempt(ctx context.Context, cmd *cobra.Command, f runnerFlags, logger *slog.Logger) (runconfig.Report, error) {
	configErr := func(err error) error { return &cli.ExitError{Code: runconfig.ExitConfig, Err: err} }
	var rep runconfig.Report
	cfg, err := runconfig.Load(f.config)
	if err != nil {
		return rep, configErr(err)
	}
	rep.SessionID = cfg.Session.ID
	warmProvider(cfg.Model.Provider, cfg.Model.API)
	logger = logger.With("session", cfg.Session.ID, "agentSession", cfg.AgentSession, "attempt", cfg.Session.Attempt)
	dsn := a.getenv(runconfig.DatabaseURLEnv)
	if dsn == "" {
		return rep, configErr(fmt.Errorf("no session store: $%s is empty (the controller's --database-secret)", runconfig.DatabaseURLEnv))
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
	dir := path.Join(exe.Workspace(), cfg.Executor.WorkingDir)
	if fi, err := exe.Stat(ctx, dir); err != nil || !fi.IsDir() {
		return rep, configErr(fmt.Errorf("workspace.workingDir %q: not a directory of the workspace: %v", cfg.Executor.WorkingDir, err))
	}

	st, err := openStore(ctx, dsn)
	if err != nil {
		return rep, err
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Warn("close the session store", "err", err)
		}
	}()

	opts, err := runnerOptions(ctx, st, cfg, dir, exe, a.getenv, logger)
	if err != nil {
		return rep, err
	}
	for _, l := range opts.Extensions.Layers {
		logger.Info("layer", "name", l.Name, "kind", l.Kind, "dir", l.Dir, "source", l.Source, "digest", l.Digest, "ignorePins", l.IgnorePins)
	}
	// The report's usage is the session's, all attempts: the tokens come
	// from the usage snapshot the loop resumes with, the tool calls are
	// counted in what the session continues from.
	toolCalls, err := priorToolCalls(ctx, st, cfg.Namespace, opts.Session)
	if err != nil {
		logger.Warn("count the session's earlier tool calls; the report counts this attempt's only", "err", err)
	}
	jsonl := events.NewJSONL(cmd.OutOrStdout(), false)
	opts.Observe = func(e events.Event) {
		if e.Type == events.ToolCall {
			toolCalls++
		}
		jsonl.Observe(e)
	}
	logger.Info("session starting", "resume", opts.Session.Resume, "forkFrom", opts.Session.ForkFrom, "provider", opts.Model.Settings.Provider, "model", opts.Model.Settings.Model)
	res, err := session.Run(ctx, st, opts)
	if werr := jsonl.Err(); werr != nil {
		logger.Warn("write events", "err", werr)
	}
	if err != nil {
		var ce *session.ConfigError
		if errors.As(err, &ce) {
			return rep, configErr(err)
		}
		return rep, err
	}
	r := res.Result
	rep = runconfig.Report{
		Outcome:   string(r.Outcome),
		ExitCode:  res.ExitCode,
		SessionID: res.Session.ID.String(),
		Reason:    r.Reason,
		Summary:   r.Answer,
		Usage: runconfig.Usage{
			InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CacheReadTokens: r.Usage.CacheReadTokens,
			Requests: r.Usage.Requests, ToolCalls: toolCalls,
		},
	}
	if r.JournalErr != nil {
		logger.Error("the journal failed: the stored transcript is incomplete", "err", r.JournalErr)
	}
	logger.Info("session ended", "outcome", r.Outcome, "exitCode", res.ExitCode, "reason", r.Reason)
	if res.ExitCode != runconfig.ExitCompleted {
		msg := string(r.Outcome)
		if r.Reason != "" {
			msg += ": " + r.Reason
		}
		return rep, &cli.ExitError{Code: res.ExitCode, Err: errors.New(msg)}
	}
	return rep, nil
}

func (a *app) getenv(name string) string {
	if a.env.Getenv == nil {
		return ""
	}
	return a.env.Getenv(name)
}

// trustSources maps the layer kinds of a pod to the names
// spec.trust.sources gives them.
var trustSources = map[string]string{
	runconfig.LayerSpec:      "Extensions",
	runconfig.LayerNamespace: "Namespace",
	runconfig.LayerPlatform:  "Platform",
}

// podLayers are the configuration's layers as the extension loaders take
// them, nearest first. The trust.toml of a layer whose kind the trust
// sources leave out is not honoured.
func podLayers(cfg *runconfig.Config) []layer.Layer {
	out := make([]layer.Layer, 0, len(cfg.Layers))
	for _, l := range cfg.Layers {
		out = append(out, layer.Layer{
			Name: l.Name, Dir: l.Dir, Kind: layer.Kind(l.Kind), Digest: l.Digest, Source: l.Source,
			IgnorePins: !slices.Contains(cfg.Trust.Sources, trustSources[l.Kind]),
		})
	}
	return out
}

// sessionPins parses the trust.toml documents the controller resolved from
// spec.trust.pinsFrom. A malformed one stops the attempt: it is the
// submitter's, and a pin silently dropped would leave a tool they meant
// to trust unrunnable with no reason given.
func sessionPins(cfg *runconfig.Config) ([]layer.Pin, error) {
	var pins []layer.Pin
	for i, doc := range cfg.Trust.Pins {
		ps, err := layer.ParseTrust(doc.Source, []byte(doc.TOML))
		if err != nil {
			return nil, fmt.Errorf("trust.pins[%d] (spec.trust.pinsFrom): %w", i, err)
		}
		pins = append(pins, ps...)
	}
	return pins, nil
}

// projectLayers are the workspace's .aerie/ (and .osprey/) directories
// from the working directory up to the workspace root, nearest first. The
// agent container mounts the workspace read-only and reads it only
// through an os.Root, so a link planted in the repository cannot lead it
// to its own secrets. A workspace it cannot read (a pod from a controller
// that does not mount it) has none, with a warning.
func projectLayers(workspace, dir string, logger *slog.Logger) []layer.Layer {
	layers, err := layer.ProjectLayers(workspace, dir)
	if err != nil {
		logger.Warn("the workspace cannot be read here: its project layers are not used", "workspace", workspace, "err", err)
		return nil
	}
	return layers
}

// priorToolCalls counts the tool calls stored in what the session
// continues from: the session itself when it is resumed (a retry, or
// spec.resumeFrom), the copied part of the source of a fork.
func priorToolCalls(ctx context.Context, st store.Store, tenant string, s session.Spec) (int64, error) {
	ref, through := s.Resume, int64(0)
	if ref == "" {
		ref, through = s.ForkFrom, s.ForkAt
	}
	if ref == "" {
		return 0, nil
	}
	id, err := uuid.Parse(ref)
	if err != nil {
		return 0, fmt.Errorf("session %q: %w", ref, err)
	}
	es, err := st.Entries(ctx, tenant, id)
	if err != nil {
		return 0, fmt.Errorf("read session %s: %w", id, err)
	}
	var n int64
	for _, e := range es {
		if through > 0 && e.Seq > through {
			break
		}
		if _, ok := e.Payload.(transcript.ToolCall); ok {
			n++
		}
	}
	return n, nil
}

// dialExecutor waits (at most wait) for the workspace container to create
// its socket, then connects. The two containers start together; the socket
// appears once the executor is ready.
func dialExecutor(ctx context.Context, socket string, wait time.Duration) (*executor.Remote, error) {
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
			return nil, fmt.Errorf("executor socket %s did not appear within %s: is the workspace container running?", socket, wait)
		case <-tick.C:
		}
	}
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	exe, err := executor.Dial(dctx, socket)
	if err != nil {
		return nil, fmt.Errorf("connect to the executor: %w", err)
	}
	return exe, nil
}

// runnerOptions are the session options of the attempt. An attempt after
// the first resumes the session when the store has it (its pod was lost);
// otherwise it starts the session as the first attempt would have.
func runnerOptions(ctx context.Context, st store.Store, cfg *runconfig.Config, dir string, exe session.Executor, getenv func(string) string, logger *slog.Logger) (session.Options, error) {
	id, err := uuid.Parse(cfg.Session.ID)
	if err != nil {
		return session.Options{}, &cli.ExitError{Code: runconfig.ExitConfig, Err: fmt.Errorf("session.id: %w", err)}
	}
	pins, err := sessionPins(cfg)
	if err != nil {
		return session.Options{}, &cli.ExitError{Code: runconfig.ExitConfig, Err: err}
	}
	opts := session.Options{
		Session: session.Spec{Tenant: cfg.Namespace, ID: id, Label: cfg.AgentSession},
		Prompt:  cfg.Prompt,
		Model: session.Model{
			Settings:      transcript.Settings{Provider: cfg.Model.Provider, Model: cfg.Model.Name},
			New:           podModel(cfg, getenv, logger),
			ContextWindow: cfg.Model.ContextWindow,
		},
		Extensions: session.LoadOptions{
			// The workspace's project layers (the workspace is mounted
			// read-only here), then the mounted ones.
			Layers:    append(projectLayers(cfg.Executor.Workspace, dir, logger), podLayers(cfg)...),
			Workspace: cfg.Executor.Workspace,
			Dir:       dir,
			Pins:      pins,
			System:    session.DefaultSystemPrompt(dir),
		},
		Toolset:  cfg.Toolset,
		Approve:  hooks.ApprovalPolicies[cfg.HookApproval],
		Persona:  cfg.Persona,
		Budget:   session.Budget{MaxDuration: time.Duration(cfg.Budget.MaxDuration)},
		Executor: exe,
		// Preserve stays nil: nothing outlives the pod, so every process
		// group is torn down at the end.
		Logger: logger,
	}
	if cfg.Budget.MaxTurns > 0 {
		// The budget is the session's, like its token budget: an
		// attempt that resumes a lost one has only the turns left.
		opts.Budget.Stop = append(opts.Budget.Stop, agent.MaxSessionTurns(int(cfg.Budget.MaxTurns)))
	}
	if cfg.Budget.MaxTokens > 0 {
		opts.Budget.Stop = append(opts.Budget.Stop, agent.MaxTokens(cfg.Budget.MaxTokens))
	}
	if cfg.Session.Attempt > 1 {
		_, snap, err := st.Load(ctx, cfg.Namespace, id)
		switch {
		case err == nil:
			opts.Session.Resume = id.String()
			if hasPrompt(snap, cfg.Prompt) {
				// The lost attempt journaled the task: continue the
				// conversation as it stands.
				opts.Prompt = ""
			}
			return opts, nil
		case !errors.Is(err, store.ErrNotFound):
			return opts, fmt.Errorf("load session %s: %w", id, err)
		}
		logger.Info("the previous attempt did not store the session; starting it anew")
	}
	switch {
	case cfg.Session.ResumeFrom != "":
		opts.Session.Resume = cfg.Session.ResumeFrom
	case cfg.Session.ForkFrom != "":
		opts.Session.ForkFrom, opts.Session.ForkAt = cfg.Session.ForkFrom, cfg.Session.ForkAtSequence
	}
	return opts, nil
}

// hasPrompt reports whether the session's live entries hold prompt as a
// user message.
func hasPrompt(snap transcript.Snapshot, prompt string) bool {
	if prompt == "" {
		return true
	}
	for _, e := range snap.Entries {
		m, ok := e.Payload.(transcript.UserMessage)
		if !ok {
			continue
		}
		for _, b := range m.Content {
			if b.Type == transcript.BlockText && b.Text == prompt {
				return true
			}
		}
	}
	return false
}

// podModel makes the provider from the configuration and the API key in
// the environment; the scripted provider's script is found in the layers.
func podModel(cfg *runconfig.Config, getenv func(string) string, logger *slog.Logger) func(transcript.Settings) (agent.Model, error) {
	return func(s transcript.Settings) (agent.Model, error) {
		pc := provider.Config{
			Provider: s.Provider, Model: s.Model, BaseURL: cfg.Model.BaseURL, API: cfg.Model.API,
			MaxOutputTokens: cfg.Model.MaxOutputTokens, Logger: logger,
		}
		if env := runconfig.APIKeyEnv(s.Provider); env != "" {
			pc.APIKey = provider.Secret(getenv(env))
			if pc.APIKey == "" && s.Provider != provider.NameOpenAICompatible {
				return nil, fmt.Errorf("no credentials: $%s is empty (spec.model.apiKeySecretRef)", env)
			}
		}
		if s.Provider == provider.NameScripted {
			p, err := layerScript(cfg.Layers, s.Model)
			if err != nil {
				return nil, err
			}
			pc.ScriptPath = p
		}
		return newProvider(pc)
	}
}

// layerScript finds scripted/MODEL.yaml (or .json) in the nearest layer
// that has it.
func layerScript(layers []runconfig.Layer, model string) (string, error) {
	if model == "" || model == "." || model == ".." || filepath.Base(model) != model {
		return "", fmt.Errorf("scripted model %q: want a plain name; the script is scripted/<model>.yaml in a layer", model)
	}
	var tried []string
	for _, l := range layers {
		for _, ext := range []string{".yaml", ".json"} {
			p := filepath.Join(l.Dir, "scripted", model+ext)
			tried = append(tried, p)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("no script for scripted model %q in the layers: tried %v", model, tried)
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
