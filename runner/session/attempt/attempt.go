// Package attempt runs one attempt of an AgentSession in its runner pod: it
// turns the runner configuration the controller rendered into a session —
// the workspace's project layers and the mounted ones with their trust,
// the submitter's pins, the budgets, the model and its credentials, the
// session store as the keeper of the tool outputs' originals — runs
// it over the workspace container's executor, and makes the report the
// controller reads back from the termination log.
package attempt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/memory"
	"github.com/aerie-run/aerie/runner/moa"
	"github.com/aerie-run/aerie/runner/pricing"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/result"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/session"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Store is what an attempt needs of the session store: what a session
// needs, and the entries of the session it continues, whose tool calls
// the report counts.
type Store interface {
	session.Store
	session.OutputStore
	moa.Traces
	memory.Store
	Entries(ctx context.Context, tenant string, id uuid.UUID) ([]transcript.Entry, error)
}

// Executor is the workspace container's executor.
type Executor interface {
	session.Executor
	// Workspace is the workspace root where the executor sees it.
	Workspace() string
}

// Env is what an attempt takes from the program that runs it.
type Env struct {
	// Executor runs the tools in the workspace container.
	Executor Executor
	// Executors are the session's executor pods (cfg.Executors), by name.
	Executors []session.NamedExecutor
	// Getenv reads the model's API key (runconfig.APIKeyEnv).
	Getenv func(string) string
	// NewProvider makes the provider a configuration names: the program
	// picks the model APIs' adapters, so that only it links their SDKs.
	NewProvider func(provider.Config) (provider.Provider, error)
	// Events receives the session's events as JSON Lines.
	Events io.Writer
	// Logger receives the attempt's logs.
	Logger *slog.Logger
}

// Run runs the attempt cfg describes. An error means the attempt did not
// start (a *session.ConfigError when the configuration is at fault); once
// it has, how it ended is in the report, its exit code included.
func Run(ctx context.Context, st Store, cfg *runconfig.Config, env Env) (runconfig.Report, error) {
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	logger := env.Logger
	dir := path.Join(env.Executor.Workspace(), cfg.Executor.WorkingDir)
	if fi, err := env.Executor.Stat(ctx, dir); err != nil || !fi.IsDir() {
		return runconfig.Report{}, &session.ConfigError{Err: fmt.Errorf(
			"workspace.workingDir %q: not a directory of the workspace: %v", cfg.Executor.WorkingDir, err)}
	}
	opts, err := options(ctx, st, cfg, dir, env)
	if err != nil {
		return runconfig.Report{}, err
	}
	for _, l := range opts.Extensions.Layers {
		logger.Info("layer", "name", l.Name, "kind", l.Kind, "dir", l.Dir, "source", l.Source,
			"digest", l.Digest, "ignorePins", l.IgnorePins)
	}
	// The report's usage is the session's, all attempts: the tokens come
	// from the usage snapshot the loop resumes with, the tool calls and
	// compactions are counted in what the session continues from.
	prior, err := priorCounts(ctx, st, cfg.Namespace, opts.Session)
	if err != nil {
		logger.Warn("count the session's earlier tool calls and compactions; the report counts this attempt's only",
			"err", err)
	}
	toolCalls := prior.toolCalls
	jsonl := events.NewJSONL(env.Events, false)
	opts.Observe = func(e events.Event) {
		if e.Type == events.ToolCall {
			toolCalls++
		}
		jsonl.Observe(e)
	}
	logger.Info("session starting", "resume", opts.Session.Resume, "forkFrom", opts.Session.ForkFrom,
		"provider", opts.Model.Settings.Provider, "model", opts.Model.Settings.Model)
	res, err := session.Run(ctx, st, opts)
	if werr := jsonl.Err(); werr != nil {
		logger.Warn("write events", "err", werr)
	}
	if err != nil {
		return runconfig.Report{}, err
	}
	r := res.Result
	if r.JournalErr != nil {
		logger.Error("the journal failed: the stored transcript is incomplete", "err", r.JournalErr)
	}
	logger.Info("session ended", "outcome", r.Outcome, "exitCode", res.ExitCode, "reason", r.Reason)
	return report(res, toolCalls, prior.compactions), nil
}

// report is the termination log's report of a session that ran: toolCalls
// are the session's, all attempts; priorCompactions are those the session
// had before this attempt, to which the run's own are added.
func report(res session.Report, toolCalls, priorCompactions int64) runconfig.Report {
	r := res.Result
	var pending *runconfig.PendingApproval
	if a := r.Approval; a != nil {
		pending = &runconfig.PendingApproval{
			CallID: a.CallID, Tool: a.Tool, Preview: a.Preview, Reason: a.Reason, AgentID: a.AgentID,
		}
	}
	var structured *runconfig.Result
	if st := res.Structured; st != nil {
		structured = &runconfig.Result{Value: st.Value, Seq: st.Seq}
	}
	return runconfig.Report{
		Approval:   pending,
		Result:     structured,
		Outcome:    string(r.Outcome),
		ExitCode:   res.ExitCode,
		SessionID:  res.Session.ID.String(),
		Reason:     r.Reason,
		Summary:    r.Answer,
		AgentTypes: agentTypes(res.AgentTypes),
		Usage: runconfig.Usage{
			InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CacheReadTokens: r.Usage.CacheReadTokens,
			Requests: r.Usage.Requests, ToolCalls: toolCalls,
			Compactions: priorCompactions + int64(len(r.Compactions)),
			Subagents:   int64(res.Subagents),
			CostUSD:     r.Usage.CostUSD,
		},
	}
}

// agentTypes are the report's usage by agent type: at most
// runconfig.MaxAgentTypes entries.
func agentTypes(types []subagent.AgentType) []runconfig.AgentTypeUsage {
	capped := subagent.CapAgentTypes(types, runconfig.MaxAgentTypes)
	out := make([]runconfig.AgentTypeUsage, 0, len(capped))
	for _, t := range capped {
		out = append(out, runconfig.AgentTypeUsage{
			Name: t.Name, Subagents: int64(t.Subagents), Requests: t.Usage.Requests,
			InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens, CacheReadTokens: t.Usage.CacheReadTokens,
		})
	}
	return out
}

// options are the session options of the attempt. An attempt after the
// first resumes the session when the store has it (its pod was lost);
// otherwise it starts the session as the first attempt would have.
func options(ctx context.Context, st Store, cfg *runconfig.Config, dir string, env Env) (session.Options, error) {
	logger := env.Logger
	id, err := uuid.Parse(cfg.Session.ID)
	if err != nil {
		return session.Options{}, &session.ConfigError{Err: fmt.Errorf("session.id: %w", err)}
	}
	pins, err := sessionPins(cfg)
	if err != nil {
		return session.Options{}, &session.ConfigError{Err: err}
	}
	// The workspace's project layers (the workspace is mounted read-only
	// here), then the mounted ones.
	project, readable := projectLayers(cfg.Executor.Workspace, dir, logger)
	layers := append(project, mountedLayers(cfg)...)
	conf, err := layerConfig(layers, cfg.Executor.Workspace, dir, readable, logger)
	if err != nil {
		return session.Options{}, err
	}
	var contract *result.Contract
	if rs := cfg.Result; rs != nil {
		// Compiled before anything runs: a schema that cannot be used
		// fails the attempt as a configuration error, with the reason.
		if contract, err = result.Compile(rs.Source, []byte(rs.Schema)); err != nil {
			return session.Options{}, &session.ConfigError{Err: err}
		}
	}
	opts := session.Options{
		Session: session.Spec{Tenant: cfg.Namespace, ID: id, Label: cfg.AgentSession},
		Prompt:  cfg.Prompt,
		Model: session.Model{
			Settings:        transcript.Settings{Provider: cfg.Model.Provider, Model: cfg.Model.Name},
			New:             modelFactory(cfg, conf.Model, env),
			ContextWindow:   cfg.Model.ContextWindow,
			MaxOutputTokens: cfg.Model.MaxOutputTokens,
			CompactionModel: conf.Compaction.Model,
			Prices:          pricing.Bundled().With(conf.Prices),
		},
		Extensions: session.LoadOptions{
			Layers:           layers,
			Workspace:        cfg.Executor.Workspace,
			Dir:              dir,
			Pins:             pins,
			DisabledPlugins:  conf.Plugins.Disabled,
			PluginComponents: conf.Plugins.Components,
			System:           session.DefaultSystemPrompt(dir),
			// Only the variables the session's spec.secrets fill resolve
			// a plugin's ${VAR}: the agent container holds aerie's own
			// credentials too.
			MCPVariables: mcp.PodVariables(env.Getenv, cfg.Secrets),
		},
		// The layers' [tool_results] caps and compresses outputs as
		// `aerie run`'s config does; the originals go to the store
		// (Originals below), never to a file in the pod.
		Capper: &tools.Capper{
			Max: conf.ToolResults.MaxBytes, MaxLines: conf.ToolResults.MaxLines,
			Head: conf.ToolResults.HeadBytes, Tail: conf.ToolResults.TailBytes,
			Compress: conf.ToolResults.CompressContext, Logger: logger,
		},
		Toolset: cfg.Toolset,
		Approve: hooks.ApprovalPolicies[cfg.HookApproval],
		// The decisions on the call the session paused on: the next
		// attempt resumes with them.
		Approvals: decisions(cfg.Approvals),
		Persona:   cfg.Persona,
		Budget:    budget(cfg.Budget),
		Subagents: &subagent.Limits{
			MaxConcurrent: conf.Subagents.MaxConcurrent, MaxDepth: conf.Subagents.MaxDepth, MaxTotal: conf.Subagents.MaxTotal,
		},
		Result:       contract,
		Executor:     env.Executor,
		Executors:    env.Executors,
		CallsDefault: callsDefault(cfg),
		// The full output of capped (and compressed) tool results is kept
		// in the store, not in the pod, so that a later attempt has it.
		Originals: session.StoreOriginals(st, cfg.Namespace),
		// Preserve stays nil: nothing outlives the pod, so every process
		// group is torn down at the end.
		Logger: logger,
	}
	// The layers' [moa] offers mixture_of_agents; its traces go to the
	// session store.
	opts.MoA.References, opts.MoA.Aggregator = conf.MoA.Models()
	opts.MoA.Traces = st
	if m := cfg.Memory; m != nil {
		// No file in the pod outlives it: the memory is the store's, the
		// namespace's and the project's.
		opts.Memory = memory.New(memory.Stored{Store: st, Tenant: cfg.Namespace, Scope: m.Scope}, memory.Limits{})
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

// budget is the session's budget. The turn budget is the session's, like
// its token budget: an attempt that resumes a lost one has only the turns
// left.
func budget(b runconfig.Budget) session.Budget {
	out := session.Budget{MaxDuration: time.Duration(b.MaxDuration), MaxCostUSD: b.MaxCostUSD}
	if b.MaxTurns > 0 {
		out.Stop = append(out.Stop, agent.MaxSessionTurns(int(b.MaxTurns)))
	}
	if b.MaxTokens > 0 {
		out.Stop = append(out.Stop, agent.MaxTokens(b.MaxTokens))
	}
	return out
}

// trustSources maps the layer kinds of a pod to the names
// spec.trust.sources gives them.
var trustSources = map[string]string{
	runconfig.LayerSpec:      "Extensions",
	runconfig.LayerNamespace: "Namespace",
	runconfig.LayerPlatform:  "Platform",
}

// mountedLayers are the configuration's layers as the extension loaders take
// them, nearest first. The trust.toml of a layer whose kind the trust
// sources leave out is not honoured.
func mountedLayers(cfg *runconfig.Config) []layer.Layer {
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
// that does not mount it) has none, with a warning; readable says so.
func projectLayers(workspace, dir string, logger *slog.Logger) (_ []layer.Layer, readable bool) {
	layers, err := layer.ProjectLayers(workspace, dir)
	if err != nil {
		logger.Warn("the workspace cannot be read here: its project layers are not used", "workspace", workspace, "err", err)
		return nil, false
	}
	return layers, true
}

// layerConfig is the session's configuration: the config.toml files of
// the layers merged over the spec's defaults (see config.LoadLayers), the
// project's only when the workspace can be read. A file that cannot be
// used stops the attempt as a configuration error.
func layerConfig(
	layers []layer.Layer, workspace, dir string, readable bool, logger *slog.Logger,
) (config.Config, error) {
	opts := config.LayerOptions{Layers: layers}
	if readable {
		opts.Workspace, opts.WorkDir = workspace, dir
	}
	loaded, err := config.LoadLayers(opts)
	if err != nil {
		return config.Config{}, &session.ConfigError{Err: fmt.Errorf("configuration: %w", err)}
	}
	for _, w := range loaded.Warnings {
		logger.Warn("configuration", "err", w)
	}
	files := append(slices.Clone(loaded.LayerFiles), loaded.ProjectFile)
	logger.Info("configuration", "files", slices.DeleteFunc(files, func(f string) bool { return f == "" }))
	return loaded.Config, nil
}

// counts are what priorCounts counts in a session's stored entries.
type counts struct {
	toolCalls, compactions int64
}

// priorCounts counts the tool calls and compaction checkpoints stored in
// what the session continues from: the session itself when it is resumed (a
// retry, or spec.resumeFrom), the copied part of the source of a fork.
func priorCounts(ctx context.Context, st Store, tenant string, s session.Spec) (counts, error) {
	ref, through := s.Resume, int64(0)
	if ref == "" {
		ref, through = s.ForkFrom, s.ForkAt
	}
	if ref == "" {
		return counts{}, nil
	}
	id, err := uuid.Parse(ref)
	if err != nil {
		return counts{}, fmt.Errorf("session %q: %w", ref, err)
	}
	es, err := st.Entries(ctx, tenant, id)
	if err != nil {
		return counts{}, fmt.Errorf("read session %s: %w", id, err)
	}
	var n counts
	for _, e := range es {
		if through > 0 && e.Seq > through {
			break
		}
		switch e.Payload.(type) {
		case transcript.ToolCall:
			n.toolCalls++
		case transcript.Compaction:
			n.compactions++
		}
	}
	return n, nil
}

// hasPrompt reports whether the session's live entries hold prompt as a
// user message, or the session was compacted: the task came first, and a
// compaction's replacement stands in for it.
func hasPrompt(snap transcript.Snapshot, prompt string) bool {
	if prompt == "" || snap.Compaction != nil {
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

// modelFactory makes the provider from the configuration, the layers'
// [model] bounds and the API key in the environment; the scripted
// provider's script is found in the layers.
func modelFactory(cfg *runconfig.Config, bounds config.Model, env Env) func(transcript.Settings) (agent.Model, error) {
	return func(s transcript.Settings) (agent.Model, error) {
		pc := bounds.Bound(provider.Config{
			Provider: s.Provider, Model: s.Model, BaseURL: cfg.Model.BaseURL, API: cfg.Model.API,
			MaxOutputTokens: cfg.Model.MaxOutputTokens, Logger: env.Logger,
		})
		if key := runconfig.APIKeyEnv(s.Provider); key != "" {
			pc.APIKey = provider.Secret(env.Getenv(key))
			if pc.APIKey == "" && s.Provider != provider.NameOpenAICompatible {
				return nil, fmt.Errorf("no credentials: $%s is empty (spec.model.apiKeySecretRef)", key)
			}
		}
		if s.Provider == provider.NameScripted {
			p, err := layerScript(cfg.Layers, s.Model)
			if err != nil {
				return nil, err
			}
			pc.ScriptPath = p
		}
		return env.NewProvider(pc)
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

// decisions are the config's approvals as the session journals them.
func decisions(as []runconfig.Approval) []transcript.ApprovalDecision {
	out := make([]transcript.ApprovalDecision, 0, len(as))
	for _, a := range as {
		by := a.By
		if by == "" {
			by = "spec.approvals"
		}
		out = append(out, transcript.ApprovalDecision{CallID: a.CallID, Allowed: a.Allowed, Reason: a.Reason, By: by})
	}
	return out
}

// callsDefault is the executor pod that calls naming no executor run on,
// or "" for the workspace container.
func callsDefault(cfg *runconfig.Config) string {
	for _, e := range cfg.Executors {
		if e.Default {
			return e.Name
		}
	}
	return ""
}
