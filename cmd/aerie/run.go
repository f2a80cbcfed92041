package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/atif"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/atomicfile"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/export"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/pricing"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/provider"
	resultschema "github.com/aerie-run/aerie/runner/result"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/session"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// runFlags are aerie run's options.
type runFlags struct {
	provider, model, baseURL, api, script string
	resume, forkFrom, label               string
	workspace                             string
	maxTurns                              int
	maxTokens                             int64
	maxCostUSD                            float64
	// contextWindow is --context-window; contextWindowSet says it was
	// given, so that 0 is refused rather than taken for the default.
	contextWindow    int64
	contextWindowSet bool
	maxDuration      time.Duration
	eventsJSONL      bool
	rawDir           string
	// compress is --compress-context; compressSet says it was given, so
	// that it overrides [tool_results] compress_context either way.
	compress, compressSet bool
	atifOutput            string
	atifPlaintext         bool
	toolset               string
	hookApproval          string
	// outputSchema is --output-schema, resultFile --result-file.
	outputSchema, resultFile string
	// noMemory is --no-memory.
	noMemory bool
	// executors are --executor NAME=ADDR, executorCredential
	// --executor-credential.
	executors          []string
	executorCredential string
}

// Default models, used when --model is not given for a new session.
var defaultModels = map[string]string{
	provider.NameAnthropic: "claude-sonnet-4-5",
	provider.NameOpenAI:    "gpt-5",
}

// maxPromptBytes bounds a prompt read from standard input.
const maxPromptBytes = 1 << 20

func newRunCmd(a *app) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [PROMPT]",
		Short: "Run an agent session to its end, headless",
		Long: `Run an agent session on this machine: the model works on PROMPT (or the
text on standard input) with the built-in tools in the workspace until it
ends its turn or a budget runs out. Every entry is journaled to the session
database, so the session can be listed, resumed (--resume) and forked
(--fork-from) later.

The provider is --provider, or anthropic when ANTHROPIC_API_KEY is set, or
openai when OPENAI_API_KEY is set. The scripted provider replays model turns
from --script, or from scripted/MODEL.yaml in a project .aerie directory or in
$AERIE_HOME. Resume and fork use the session's stored provider and model
unless --provider or --model say otherwise, which is then recorded.

Output: the model's text and a line per tool call on a terminal; JSON Lines
events when standard output is not a terminal or with --events-jsonl.

Background processes that bash started are left running at the end (except
when a budget ran out) and recorded for aerie process.

With --output-schema FILE (a JSON Schema), the model is given a submit_result
tool whose input schema is FILE's, and the session ends when it submits a
result the schema accepts; an invalid one goes back to the model with the
validation errors, at most 3 times. The result is the last JSON Lines event
(type result), is journaled with the session, and is written to
--result-file when given.

Exit status: 0 the session completed; 1 aerie failed (storage, internal);
2 configuration error (flags, config, unknown session, missing credentials,
an invalid --output-schema); 3 model or API failure; 4 a turn, token or time
budget ran out; 5 awaiting approval (--hook-approval ask: a hook asked a
person about a tool call; decide with aerie approve, continue with --resume);
6 no valid result for --output-schema (result_invalid); 130 or 143 cancelled
by SIGINT or SIGTERM.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.run(cmd, args, f)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &cli.ExitError{Code: runconfig.ExitConfig, Err: err}
	})
	fl := cmd.Flags()
	f.modelFlags(fl)
	fl.StringVar(&f.resume, "resume", "", "continue `SESSION` (id, unique prefix or label)")
	fl.StringVar(&f.forkFrom, "fork-from", "", "copy `SESSION` into a new child session and continue that")
	fl.StringVar(&f.label, "label", "", "a `label` for the new session")
	fl.StringVar(&f.workspace, "workspace", "",
		"the workspace root the tools are confined to (default: the enclosing git repository, or the current directory)")
	fl.StringVar(&f.toolset, "toolset", "", "offer only the tools of the `toolset` named in toolsets.toml")
	fl.StringVar(&f.hookApproval, "hook-approval", "deny",
		"the `policy` for tool calls a hook asks a person to approve: deny, allow (approved in advance), "+
			"or ask (the session pauses, exit 5, until aerie approve and --resume)")
	fl.BoolVar(&f.noMemory, "no-memory", false,
		"offer no memory tool and give no memory in the system prompt (see aerie memory)")
	fl.IntVar(&f.maxTurns, "max-turns", 100,
		"stop after this many model requests of the session tree, a resumed session's stored ones included (0: no limit)")
	fl.Int64Var(&f.maxTokens, "max-tokens", 0, "stop once input and output tokens reach this many (0: no limit)")
	fl.Float64Var(&f.maxCostUSD, "max-cost-usd", 0,
		"stop once the session tree's model requests cost this many US dollars, from the model's price "+
			"(bundled, or [prices.\"model\"] in config.toml; 0: no limit)")
	fl.DurationVar(&f.maxDuration, "max-duration", time.Hour, "stop after this much wall time (0: no limit)")
	fl.BoolVar(&f.eventsJSONL, "events-jsonl", false, "write JSON Lines events to standard output, even on a terminal")
	fl.BoolVar(&f.compress, "compress-context", false,
		"replace large structured tool outputs (JSON, search results, code, directory listings) with compact views, "+
			"the originals kept for the retrieve tool (default: [tool_results] compress_context, else false)")
	fl.StringVar(&f.rawDir, "tool-result-raw-dir", "",
		"`directory` for the full output of capped tool results (default: raw/ beside --atif-output)")
	fl.StringVar(&f.atifOutput, "atif-output", "", "write the session's ATIF v1.7 trajectory to `file` at the end")
	fl.BoolVar(&f.atifPlaintext, "atif-system-prompt-plaintext", false,
		"put the system prompt itself in the trajectory, not only its digest")
	fl.StringVar(&f.outputSchema, "output-schema", "",
		"ask for a result matching the JSON Schema in `file`, submitted with the submit_result tool")
	fl.StringVar(&f.resultFile, "result-file", "", "write the result --output-schema asks for to `file` (atomically)")
	fl.StringArrayVar(&f.executors, "executor", nil,
		"also run tools on the executor `NAME=HOST:PORT` that aerie executor serve --listen serves "+
			"(repeatable; the model names it with the tools' executor argument)")
	fl.StringVar(&f.executorCredential, "executor-credential", "",
		"the runner's credential `FILE` (runner.pem of aerie executor credentials), for --executor")
	return cmd
}

// modelFlags are the flags that say which model a session talks to and
// how: aerie run's, which aerie session compact shares.
func (f *runFlags) modelFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.provider, "provider", "", "model `provider`: anthropic, openai, openai-compatible or scripted")
	fl.StringVar(&f.model, "model", "", "`model` name (default claude-sonnet-4-5 for anthropic, gpt-5 for openai)")
	fl.StringVar(&f.baseURL, "base-url", "", "the provider's endpoint `URL` (required for openai-compatible)")
	fl.StringVar(&f.api, "api", "", "OpenAI wire `API`: responses or chat-completions")
	fl.StringVar(&f.script, "script", "", "the model turns the scripted provider replays (a YAML `file`)")
	fl.Int64Var(&f.contextWindow, "context-window", 0,
		"the model's context window in `tokens`, which automatic compaction keeps the conversation within "+
			"(default: the window aerie knows for the model; unknown, only a request the model refuses "+
			"as too large is compacted)")
}

// run is aerie run. Errors before the session starts exit 2 (configuration)
// or 1; once it has run, the exit status is its outcome's.
func (a *app) run(cmd *cobra.Command, args []string, f runFlags) error {
	f.contextWindowSet = cmd.Flags().Changed("context-window")
	f.compressSet = cmd.Flags().Changed("compress-context")
	if err := f.validate(); err != nil {
		return configErr(err)
	}
	// The provider's encoders are built while the run starts (a resumed
	// session's provider is only a guess until the store is read).
	warmProvider(a.defaultSettings(transcript.Settings{Provider: f.provider}).Provider, f.api)
	prompt, err := a.prompt(cmd, args, f)
	if err != nil {
		return configErr(err)
	}
	observe, flush := a.observer(cmd, f)
	l, err := a.launch(cmd, f, prompt, observe)
	flush()
	if err != nil {
		return err
	}
	defer closeStore(cmd, l.st)
	return a.ran(cmd.Context(), l.st, l.dir, l.rep, l.system, f, l.logger)
}

// launched is a session that ran: its report, and the store it is in,
// which the caller closes.
type launched struct {
	rep    session.Report
	st     *openingStore
	dir    string
	system string
	logger *slog.Logger
}

// launch runs a session as aerie run does, with the flags f and prompt,
// its events going to observe: aerie session compact runs one too.
// Errors before the session starts are configuration errors (exit 2) or
// aerie's (exit 1).
func (a *app) launch(
	cmd *cobra.Command, f runFlags, prompt string, observe func(events.Event),
) (_ launched, err error) {
	ctx := cmd.Context()
	p, err := a.runPlace(cmd, f.workspace)
	if err != nil {
		return launched{}, err
	}
	st := openStoreAsync(ctx, p.config.DatabaseURL)
	defer func() {
		if err != nil {
			closeStore(cmd, st)
		}
	}()
	src, err := a.extensionSource(p.dir, p.workspace, p.config.Plugins)
	if err != nil {
		return launched{}, configErr(err)
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	capper, originals := resultCapper(p.config.ToolResults, f, p.home, logger)
	exe, closeExecutor, err := localExecutor(ctx, p.workspace, p.home, logger)
	if err != nil {
		return launched{}, configErr(err)
	}
	defer closeExecutor()
	remotes, err := parseExecutors(f.executors, f.executorCredential)
	if err != nil {
		return launched{}, configErr(err)
	}
	others, closeOthers, err := dialExecutors(ctx, remotes, f.executorCredential)
	if err != nil {
		return launched{}, configErr(err)
	}
	defer closeOthers()
	contract, err := resultContract(f.outputSchema)
	if err != nil {
		return launched{}, configErr(err)
	}

	opts := session.Options{
		Session: session.Spec{Tenant: p.dir, Label: f.label, Resume: f.resume, ForkFrom: f.forkFrom},
		Prompt:  prompt,
		Model: session.Model{
			Settings:        transcript.Settings{Provider: f.provider, Model: f.model},
			New:             a.modelFactory(f, src.Layers, p.config.Model, logger),
			ContextWindow:   f.contextWindow,
			CompactionModel: p.config.Compaction.Model,
			Prices:          pricing.Bundled().With(p.config.Prices),
		},
		Extensions: src,
		Toolset:    f.toolset,
		Approve:    hooks.ApprovalPolicies[f.hookApproval],
		Budget:     f.budget(),
		Subagents: &subagent.Limits{
			MaxConcurrent: p.config.Subagents.MaxConcurrent, MaxDepth: p.config.Subagents.MaxDepth,
			MaxTotal: p.config.Subagents.MaxTotal,
		},
		Result:    contract,
		Executor:  exe,
		Executors: others,
		Capper:    capper,
		Originals: originals,
		Preserve:  process.NewRegistry(p.home),
		Observe:   observe,
		Logger:    logger,
	}
	if !f.noMemory {
		opts.Memory, _ = localMemory(p.home, p.workspace)
	}
	opts.MoA.References, opts.MoA.Aggregator = p.config.MoA.Models()
	opts.MoA.Traces = st
	if err := a.newSessionSettings(&opts); err != nil {
		return launched{}, configErr(err)
	}
	rep, err := session.Run(ctx, st, opts)
	if _, oerr := st.get(context.WithoutCancel(ctx)); oerr != nil {
		return launched{}, oerr
	}
	if err != nil {
		var ce *session.ConfigError
		if errors.As(err, &ce) {
			return launched{}, configErr(err)
		}
		return launched{}, err
	}
	return launched{rep: rep, st: st, dir: p.dir, system: opts.Extensions.System, logger: logger}, nil
}

// configErr is an error of the caller's making: it exits 2.
func configErr(err error) error { return &cli.ExitError{Code: runconfig.ExitConfig, Err: err} }

// place is where aerie run works: the current directory, the workspace
// it belongs to, $AERIE_HOME and the configuration they make.
type place struct {
	dir, workspace, home string
	config               config.Config
}

// runPlace finds where aerie run works, and makes $AERIE_HOME.
func (a *app) runPlace(cmd *cobra.Command, workspaceFlag string) (place, error) {
	dir, err := a.workDir()
	if err != nil {
		return place{}, fmt.Errorf("find the current directory: %w", err)
	}
	workspace, err := workspaceRoot(dir, workspaceFlag)
	if err != nil {
		return place{}, configErr(err)
	}
	home := config.Home(a.env)
	// The user layer, where extension_manage writes, is there from the
	// first run on.
	if err := os.MkdirAll(home, 0o700); err != nil {
		return place{}, configErr(fmt.Errorf("make $AERIE_HOME: %w", err))
	}
	loaded, err := a.loadConfig(cmd, dir, workspace)
	if err != nil {
		return place{}, configErr(err)
	}
	return place{dir: dir, workspace: workspace, home: home, config: loaded.Config}, nil
}

// resultCapper caps the tool results as [tool_results] says, and
// compresses them when compress_context (or --compress-context) asks. The
// full outputs are kept as sidecar files in --tool-result-raw-dir (by
// default raw/ beside --atif-output; with neither, none are kept, except
// that compression keeps its originals in $AERIE_HOME/raw/), where outputs
// past their retention are swept first.
func resultCapper(
	c config.ToolResults, f runFlags, home string, logger *slog.Logger,
) (*tools.Capper, func(uuid.UUID) tools.Originals) {
	if f.compressSet {
		c.CompressContext = f.compress
	}
	dir := f.rawDir
	if dir == "" && f.atifOutput != "" {
		dir = filepath.Join(filepath.Dir(f.atifOutput), "raw")
	}
	if dir == "" && c.CompressContext {
		dir = filepath.Join(home, "raw")
	}
	capper := &tools.Capper{
		Max: c.MaxBytes, MaxLines: c.MaxLines, Head: c.HeadBytes, Tail: c.TailBytes,
		Compress: c.CompressContext, Logger: logger,
	}
	if dir == "" {
		return capper, nil
	}
	if _, err := tools.Sweep(dir, tools.DefaultRetention); err != nil {
		logger.Warn("sweep old tool outputs", "dir", dir, "err", err)
	}
	return capper, func(id uuid.UUID) tools.Originals { return tools.Sidecars{Dir: dir, Session: id.String()} }
}

// localExecutor runs the tools in workspace on this machine, aerie a child
// subreaper of the processes they start. closeExecutor ends both.
//
// The process groups of runs killed outright (SIGKILL, a crash) are ended
// first: every run records its groups in a ledger under home while they
// run, and the ledgers of dead runs are swept here.
func localExecutor(
	ctx context.Context, workspace, home string, logger *slog.Logger,
) (_ *executor.Local, closeExecutor func(), _ error) {
	swept, err := process.SweepLedgers(ctx, home, process.DefaultGrace)
	if err != nil {
		logger.Warn("end the processes of runs that crashed", "err", err)
	}
	for _, r := range swept {
		if r.Status == process.Terminated && r.Record != nil {
			logger.Warn("ended a process group a crashed run left running", "pid", r.Record.PID, "command", r.Record.Command)
		}
	}
	ledger, err := process.OpenLedger(home)
	if err != nil {
		// Without it a crash leaves the groups running, as before.
		logger.Warn("record running process groups", "err", err)
	}
	reaper, stopReaper, err := process.Subreap()
	if err != nil {
		// Escaped descendants are still found and ended by teardown; they
		// are just reaped by init instead of by aerie.
		logger.Warn("become a child subreaper", "err", err)
		stopReaper = func() {}
	}
	closeLedger := func() {
		if ledger != nil {
			if err := ledger.Close(); err != nil {
				logger.Warn("close the process ledger", "err", err)
			}
		}
	}
	exe, err := executor.NewLocal(workspace, executor.Options{Reaper: reaper, Logger: logger, Ledger: ledger})
	if err != nil {
		stopReaper()
		closeLedger()
		return nil, nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	return exe, func() {
		if err := exe.Close(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("close the executor", "err", err)
		}
		stopReaper()
		closeLedger()
	}, nil
}

// budget is the run's budget from the flags.
func (f runFlags) budget() session.Budget {
	b := session.Budget{MaxDuration: f.maxDuration, MaxCostUSD: f.maxCostUSD}
	if f.maxTurns > 0 {
		b.Stop = append(b.Stop, agent.MaxTurns(f.maxTurns))
	}
	if f.maxTokens > 0 {
		b.Stop = append(b.Stop, agent.MaxTokens(f.maxTokens))
	}
	return b
}

// newSessionSettings fills in the provider and model of a new session,
// which it must have; a resumed or forked one has its own.
func (a *app) newSessionSettings(opts *session.Options) error {
	if opts.Session.Resume != "" || opts.Session.ForkFrom != "" {
		return nil
	}
	s := a.defaultSettings(opts.Model.Settings)
	switch {
	case s.Provider == "":
		return errors.New("no provider: set --provider, or ANTHROPIC_API_KEY or OPENAI_API_KEY")
	case s.Model == "":
		return fmt.Errorf("no model: set --model for provider %s", s.Provider)
	}
	opts.Model.Settings = s
	return nil
}

// ran writes what a session that ran leaves besides its stored stream —
// the trajectory, the warnings about background processes left running —
// and returns its exit status.
func (a *app) ran(
	ctx context.Context, st *openingStore, dir string, rep session.Report, system string, f runFlags,
	logger *slog.Logger,
) error {
	if f.atifOutput != "" {
		// The trajectory is a by-product: failing to write it is a warning
		// and never changes the session's outcome.
		if err := writeTrajectory(ctx, st, dir, rep, system, f, a.version); err != nil {
			logger.Warn("write the ATIF trajectory", "path", f.atifOutput, "err", err)
		}
	}
	for _, rec := range rep.Preserved {
		logger.Warn("background process left running; end it with aerie process terminate",
			"id", rec.ID, "pid", rec.PID, "command", rec.Command)
	}
	if s := rep.Structured; s != nil && f.resultFile != "" {
		// The result is what the pipeline came for: not writing it fails
		// the run, though the session completed.
		if err := atomicfile.Write(f.resultFile, append(slices.Clone(s.Value), '\n'), 0o644); err != nil {
			return fmt.Errorf("write the result file: %w (the result is in session %s, entry %d)", err, rep.Session.ID, s.Seq)
		}
	}
	if rep.ExitCode == 0 {
		return nil
	}
	msg := string(rep.Result.Outcome)
	if rep.Result.Reason != "" {
		msg += ": " + rep.Result.Reason
	}
	if p := rep.Result.Approval; p != nil {
		msg += fmt.Sprintf("\n  arguments: %s\n  decide with: aerie approve %s %s [--deny --reason TEXT]\n"+
			"  then continue with: aerie run --resume %s", p.Preview, rep.Session.ID, p.CallID, rep.Session.ID)
	}
	return &cli.ExitError{Code: rep.ExitCode, Err: errors.New(msg)}
}

// writeTrajectory writes the session's ATIF trajectory from its stored
// stream.
func writeTrajectory(
	ctx context.Context, o *openingStore, tenant string, rep session.Report, system string, f runFlags,
	version string,
) error {
	st, err := o.get(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	entries, err := st.Entries(context.WithoutCancel(ctx), tenant, rep.Session.ID)
	if err != nil {
		return fmt.Errorf("read session %s: %w", rep.Session.ID, err)
	}
	s := rep.Session
	// The subagents of the session, this run's and earlier runs', as
	// aerie session export embeds them.
	tree, err := export.LoadTree(context.WithoutCancel(ctx), export.Input{Session: export.Record(s)},
		export.StoredChildren(st, tenant, nil))
	if err != nil {
		return err
	}
	traj, err := atif.BuildTrajectory(atif.TrajectoryInput{
		Session:             export.Record(s),
		Entries:             entries,
		SystemPrompt:        system,
		IncludeSystemPrompt: f.atifPlaintext,
		Agent:               atif.AgentInfo{Name: commandName, Version: version},
		Tools:               rep.Tools,
		Outcome:             string(rep.Result.Outcome),
		Subagents:           export.SubagentTrajectories(tree.Children),
	})
	if err != nil {
		return err
	}
	return atif.WriteTrajectory(f.atifOutput, traj)
}

// resultContract compiles the --output-schema file; nil without one.
func resultContract(file string) (*resultschema.Contract, error) {
	if file == "" {
		return nil, nil
	}
	doc, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--output-schema: %w", err)
	}
	c, err := resultschema.Compile(file, doc)
	if err != nil {
		return nil, fmt.Errorf("--output-schema %w", err)
	}
	return c, nil
}

func (f runFlags) validate() error {
	switch {
	case f.resultFile != "" && f.outputSchema == "":
		return errors.New("--result-file needs --output-schema: there is no result to write without a schema")
	case f.resume != "" && f.forkFrom != "":
		return errors.New("--resume and --fork-from are exclusive: give one session to continue")
	case f.maxTurns < 0:
		return fmt.Errorf("--max-turns %d: want 0 (no limit) or more", f.maxTurns)
	case hooks.ApprovalPolicies[f.hookApproval] == nil:
		_, err := hooks.ParseApprovalPolicy(f.hookApproval)
		return fmt.Errorf("--hook-approval: %w", err)
	case f.maxTokens < 0:
		return fmt.Errorf("--max-tokens %d: want 0 (no limit) or more", f.maxTokens)
	case !(f.maxCostUSD >= 0) || math.IsInf(f.maxCostUSD, 0):
		return fmt.Errorf("--max-cost-usd %v: want 0 (no limit) or a positive number of US dollars", f.maxCostUSD)
	case f.contextWindowSet && f.contextWindow <= 0:
		return fmt.Errorf("--context-window %d: want a positive number of tokens", f.contextWindow)
	case f.maxDuration < 0:
		return fmt.Errorf("--max-duration %s: want 0 (no limit) or more", f.maxDuration)
	case f.provider != "" && !knownProvider(f.provider):
		return fmt.Errorf("--provider %q: want one of %s", f.provider, providerNames)
	case f.script != "" && f.provider != "" && f.provider != provider.NameScripted:
		return fmt.Errorf("--script is for --provider scripted, not %s", f.provider)
	}
	_, err := parseExecutors(f.executors, f.executorCredential)
	return err
}

func knownProvider(name string) bool {
	switch name {
	case provider.NameAnthropic, provider.NameOpenAI, provider.NameOpenAICompatible, provider.NameScripted:
		return true
	}
	return false
}

// prompt is the task: the argument, or standard input when it is not a
// terminal. Resuming needs none.
func (a *app) prompt(cmd *cobra.Command, args []string, f runFlags) (string, error) {
	if len(args) == 1 {
		if strings.TrimSpace(args[0]) == "" {
			return "", errors.New("the prompt is empty")
		}
		return args[0], nil
	}
	if a.isTerminal != nil && a.isTerminal() {
		if f.resume != "" || f.forkFrom != "" {
			return "", nil
		}
		return "", errors.New("no prompt: give the task as an argument or on standard input")
	}
	b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxPromptBytes+1))
	if err != nil {
		return "", fmt.Errorf("read the prompt from standard input: %w", err)
	}
	if len(b) > maxPromptBytes {
		return "", fmt.Errorf("the prompt on standard input is longer than %d bytes", maxPromptBytes)
	}
	p := strings.TrimSpace(string(b))
	if p == "" && f.resume == "" && f.forkFrom == "" {
		return "", errors.New("no prompt: give the task as an argument or on standard input")
	}
	return p, nil
}

// extensionSource is where a session started in dir takes its extensions
// from: aerie run and aerie extensions both load from it, so that the
// report never disagrees with a run.
func (a *app) extensionSource(dir, workspace string, pc config.Plugins) (session.LoadOptions, error) {
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: dir, Workspace: workspace, Home: config.Home(a.env)})
	if err != nil {
		return session.LoadOptions{}, err
	}
	return session.LoadOptions{
		Layers: layers, Workspace: workspace, Dir: dir, Getenv: a.env.Getenv, UserHome: userHome(a.env),
		DisabledPlugins: pc.Disabled, PluginComponents: pc.Components, System: session.DefaultSystemPrompt(dir),
		// A Claude or Codex plugin's MCP servers take their credentials
		// from aerie run's environment.
		MCPVariables: mcp.LocalVariables(a.env.Getenv),
	}, nil
}

// workspaceRoot is the workspace boundary: --workspace, which must contain
// the current directory, or the enclosing git repository, or the current
// directory.
func workspaceRoot(dir, flag string) (string, error) {
	if flag == "" {
		ws, err := layer.FindWorkspace(dir)
		if err != nil {
			return "", fmt.Errorf("find the workspace of %s: %w", dir, err)
		}
		return ws, nil
	}
	ws, err := filepath.Abs(flag)
	if err != nil {
		return "", fmt.Errorf("--workspace %s: %w", flag, err)
	}
	rel, err := filepath.Rel(ws, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("--workspace %s does not contain the current directory %s", ws, dir)
	}
	return ws, nil
}

// defaultSettings fills in the provider and model of a new session.
func (a *app) defaultSettings(s transcript.Settings) transcript.Settings {
	if s.Provider == "" {
		switch {
		case a.env.Getenv != nil && a.env.Getenv("ANTHROPIC_API_KEY") != "":
			s.Provider = provider.NameAnthropic
		case a.env.Getenv != nil && a.env.Getenv("OPENAI_API_KEY") != "":
			s.Provider = provider.NameOpenAI
		}
	}
	if s.Model == "" {
		s.Model = defaultModels[s.Provider]
	}
	return s
}

// modelFactory makes the provider for the settings a session runs with, from
// the flags, the configuration's [model] bounds and the credentials in the
// environment.
func (a *app) modelFactory(
	f runFlags, layers []layer.Layer, bounds config.Model, logger *slog.Logger,
) func(transcript.Settings) (agent.Model, error) {
	return func(s transcript.Settings) (agent.Model, error) {
		cfg := bounds.Bound(provider.Config{
			Provider: s.Provider, Model: s.Model, BaseURL: f.baseURL, API: f.api, Logger: logger,
		})
		getenv := a.env.Getenv
		if getenv == nil {
			getenv = func(string) string { return "" }
		}
		switch s.Provider {
		case provider.NameAnthropic:
			cfg.APIKey = provider.Secret(getenv("ANTHROPIC_API_KEY"))
			if cfg.APIKey == "" {
				return nil, errors.New("no credentials: set ANTHROPIC_API_KEY")
			}
		case provider.NameOpenAI:
			cfg.APIKey = provider.Secret(getenv("OPENAI_API_KEY"))
			if cfg.APIKey == "" {
				return nil, errors.New("no credentials: set OPENAI_API_KEY")
			}
		case provider.NameOpenAICompatible:
			cfg.APIKey = provider.Secret(getenv("OPENAI_API_KEY"))
		case provider.NameScripted:
			path, err := scriptPath(f.script, s.Model, layers)
			if err != nil {
				return nil, err
			}
			cfg.ScriptPath = path
		}
		return newProvider(cfg)
	}
}

// scriptPath finds the scripted provider's file: --script, or
// scripted/MODEL.yaml in the nearest layer that has one.
func scriptPath(flag, model string, layers []layer.Layer) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if model == "" || strings.ContainsAny(model, `/\`) || model == "." || model == ".." {
		return "", fmt.Errorf("scripted model %q: want a plain name; the script is scripted/<model>.yaml", model)
	}
	name := filepath.Join("scripted", model+".yaml")
	var tried []string
	for _, l := range layers {
		if l.Kind == layer.KindBundled {
			continue // holds no scripts
		}
		p := filepath.Join(l.Dir, name)
		tried = append(tried, p)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("no script for scripted model %q: give --script, or create .aerie/%s", model, name)
	}
	return "", fmt.Errorf("no script for scripted model %q: give --script or create one of %s",
		model, strings.Join(tried, ", "))
}

// observer returns where the run's events go: JSON Lines when stdout is
// not a terminal or --events-jsonl asks for them, text for a person
// otherwise. flush reports a failed write once the run is over.
func (a *app) observer(cmd *cobra.Command, f runFlags) (func(events.Event), func()) {
	out := cmd.OutOrStdout()
	if f.eventsJSONL || a.stdoutIsTerminal == nil || !a.stdoutIsTerminal() {
		j := events.NewJSONL(out, false)
		return j.Observe, func() {
			if err := j.Err(); err != nil {
				warn(cmd, "write events: %v", err)
			}
		}
	}
	h := events.NewHuman(out)
	return h.Observe, func() {
		if err := h.Err(); err != nil {
			warn(cmd, "write events: %v", err)
		}
	}
}

// userHome is the user's home directory, "" when the system reports none.
func userHome(env config.Env) string {
	if env.UserHomeDir == nil {
		return ""
	}
	h, err := env.UserHomeDir()
	if err != nil {
		return ""
	}
	return h
}
