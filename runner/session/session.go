// Package session runs one agent session to its end without a person at a
// terminal: it creates, resumes or forks the stored session, journals it,
// gives the model the built-in tools over an executor and what the
// extension layers add, runs the loop, and then tears down the session's
// processes and records the outcome. It is what `aerie run` on a laptop and
// the runner in a pod share; they differ only in the Options they pass.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// ConfigError is a problem that stops a run before it starts. It exits
// runconfig.ExitConfig.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErrorf(format string, args ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, args...)}
}

// SignalError is the cancel cause of a run stopped by a signal.
type SignalError struct{ Signal syscall.Signal }

func (e *SignalError) Error() string { return "stopped by " + signalName(e.Signal) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// ExitCode is the exit status of a run that ended with r.
func ExitCode(r agent.Result) int {
	switch r.Outcome {
	case transcript.OutcomeCompleted:
		return runconfig.ExitCompleted
	case transcript.OutcomeModelError:
		return runconfig.ExitModel
	case transcript.OutcomeBudgetExceeded, transcript.OutcomeDeadlineExceeded:
		return runconfig.ExitBudget
	case transcript.OutcomeCancelled:
		var sig *SignalError
		if errors.As(r.Err, &sig) && sig.Signal == syscall.SIGINT {
			return runconfig.ExitInterrupted
		}
		return runconfig.ExitTerminated
	}
	return runconfig.ExitFailure
}

// Store is what a run needs of the session store.
type Store interface {
	journal.Store
	Create(ctx context.Context, tenant string, s store.NewSession) (store.Session, error)
	Resolve(ctx context.Context, tenant, ref string) (store.Session, error)
	Fork(ctx context.Context, tenant string, source uuid.UUID, opts store.ForkOptions) (store.Session, error)
	Load(ctx context.Context, tenant string, session uuid.UUID) (store.Session, transcript.Snapshot, error)
	SetState(ctx context.Context, tenant string, id uuid.UUID, state store.State) error
}

// Executor runs the tools' commands and file operations.
type Executor interface {
	tools.Files
	tools.Commands
	TeardownAll(ctx context.Context) ([]process.Report, error)
}

// Detacher is an executor that can give up a process group so that it
// outlives the run (the local executor).
type Detacher interface {
	Detach(ctx context.Context, id string) (executor.ProcessInfo, error)
}

// Options configure a run.
type Options struct {
	// Tenant scopes the session: the namespace in a pod, the working
	// directory locally.
	Tenant string
	// Dir is the working directory recorded with the session.
	Dir string
	// Prompt is the user's task. It may be empty only when resuming, to
	// continue the conversation as it stands.
	Prompt string
	// Settings are the provider and model asked for. With Resume or
	// ForkFrom, empty fields take the stored ones, and fields that differ
	// from them are recorded as changes.
	Settings transcript.Settings
	// NewModel makes the model for the settings in force. An error (an
	// unknown provider, missing credentials) stops the launch.
	NewModel func(transcript.Settings) (agent.Model, error)
	// SessionID is the id of a new session; uuid.Nil picks one. In a pod
	// it is the AgentSession's UID.
	SessionID uuid.UUID
	// Label names a new session.
	Label string
	// Resume continues the session it names (an id, a unique prefix or a
	// label); ForkFrom copies the session it names into a new child and
	// continues that. At most one is set.
	Resume, ForkFrom string
	// ForkAt is the last sequence number a fork copies; 0 copies through
	// the latest.
	ForkAt int64
	// System is the persona's base prompt; a SYSTEM.md or
	// AERIE_SYSTEM_PROMPT_FILE replaces it, APPEND_SYSTEM.md files and
	// project instructions (AGENTS.md) extend it.
	System string
	// Layers are the extension layers, nearest first: custom tools,
	// prompts, tool descriptions, toolsets, trust pins and hooks are read
	// from them. When one is the $AERIE_HOME layer, the model is offered
	// extension_manage, which writes there; its changes are loaded again
	// at the next turn boundary.
	Layers []layer.Layer
	// Workspace is the workspace root; empty means Dir.
	Workspace string
	// Pins are trust pins the session's submitter gives besides the
	// layers' trust.toml files (an AgentSession's spec.trust.pinsFrom).
	Pins []layer.Pin
	// Toolset names the toolset (toolsets.toml) that selects the tools
	// offered; empty offers the persona's toolset, or every tool.
	Toolset string
	// Approve decides the tool calls a hook asks a person to approve
	// (permissionDecision "ask"); nil is hooks.DenyApprovals, since
	// nobody can approve in a headless run.
	Approve hooks.ApprovalPolicy
	// Persona names the persona (personas/<name>.toml in a layer) whose
	// prompt replaces System and whose toolset applies when Toolset is
	// empty; empty is the default persona, System itself. A resumed or
	// forked session switches to it, the switch recorded.
	Persona string
	// ContextWindow is the model's context window in tokens as the
	// session's submitter states it (an AgentSession's
	// spec.model.contextWindow): it overrides aerie's table of known
	// models. The window in force is in the Report, for automatic
	// compaction, which is not built yet.
	ContextWindow int64
	// Getenv reads AERIE_SYSTEM_PROMPT_FILE and AERIE_TOOL_DESCRIPTIONS_FILE;
	// nil is an empty environment.
	Getenv func(string) string
	// DisabledPlugins names plugins not to use (plugins.disabled).
	DisabledPlugins []string
	// UserHome is the user's home directory, whose .agents/skills and
	// .claude/skills hold skills; empty skips them (as in a pod).
	UserHome string
	// Stop are the budgets checked before each model request.
	Stop []agent.StopCondition
	// MaxDuration is the wall-time budget; zero is none.
	MaxDuration time.Duration
	// Executor runs the tools.
	Executor Executor
	// Tools are offered after the built-in and custom ones (MCP tools).
	Tools []tools.Tool
	// Wrap, when set, wraps every tool (hooks, permissions).
	Wrap func(tools.Tool) tools.Tool
	// Capper caps tool results; nil means the defaults without spilling.
	Capper *tools.Capper
	// Preserve, when set, keeps background process groups still running at
	// the end of the run (after every outcome except a spent budget), with a
	// durable record in this registry, as the spec says of headless runs.
	// Nil tears every group down (in a pod, nothing outlives the pod).
	Preserve *process.Registry
	// Observe receives the run's events. Nil discards them.
	Observe func(events.Event)
	// Journal tunes the journal writer.
	Journal journal.Options
	// Logger receives warnings. Nil discards.
	Logger *slog.Logger
}

// Report is what a run did.
type Report struct {
	Session store.Session
	// Settings are the provider and model the run used.
	Settings transcript.Settings
	// System is the system prompt the model was given.
	System string
	// Persona is the persona the run used.
	Persona extensions.Persona
	// Layers are the layers the run used, nearest first, each with the
	// digest of what it held: the Layers entry journaled at the start.
	Layers []layer.Layer
	// ContextWindow is the model's context window in tokens: Options'
	// ContextWindow, else the known window of the model, else 0
	// (unknown).
	ContextWindow int64
	// Extensions reports the artifacts found in the layers.
	Extensions layer.Report
	// Tools are the tools the model was offered.
	Tools    []provider.Tool
	Result   agent.Result
	ExitCode int
	// Preserved are the background groups left running, with their records.
	Preserved []process.Record
	// Teardown reports the process groups ended after the run.
	Teardown []process.Report
	// Journal counts what the journal wrote.
	Journal journal.Stats
}

// teardownTimeout bounds the teardown of every process group at the end of a
// run; the executor's grace period (2 s) fits in it several times.
const teardownTimeout = 10 * time.Second

// Run runs one session. An error means the run did not start (a
// *ConfigError for problems of the caller's making); once it has started,
// how it ended is in the Report, including failures.
func Run(ctx context.Context, st Store, opts Options) (Report, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Resume != "" && opts.ForkFrom != "" {
		return Report{}, configErrorf("resume and fork-from are exclusive: give one session to continue")
	}
	if opts.Prompt == "" && opts.Resume == "" && opts.ForkFrom == "" {
		return Report{}, configErrorf("no prompt: give the task as an argument or on standard input")
	}
	persona, personaArts, err := applyPersona(&opts)
	if err != nil {
		return Report{}, err
	}
	// The layers' digests read every file again: they are taken while
	// the extensions load, MCP servers start and the session opens, and
	// waited for before the journal's first entry records them. Run never
	// returns before they are done.
	digests := make(chan []layer.Layer, 1)
	go func(o Options) { digests <- recordedLayers(o) }(opts)
	layersOnce := sync.OnceValue(func() []layer.Layer { return <-digests })
	defer layersOnce()
	bg := tools.NewBackground(opts.Executor)
	k, err := newKit(opts, tools.Builtin(opts.Executor, opts.Executor, bg))
	if err != nil {
		return Report{}, err
	}
	if err := k.startMCP(ctx, opts); err != nil {
		return Report{}, err
	}
	defer k.closeMCP(opts) // on the early returns; the end of the run closes first
	sess, snap, pending, err := openSession(ctx, st, opts)
	if err != nil {
		return Report{}, err
	}
	// A new session is being stored (see pendingSession): Run never returns
	// before that is over, and a session that cannot be stored stops the
	// loop.
	defer func() { <-pending.done }()
	loopCtx, stopLoop := context.WithCancelCause(ctx)
	defer stopLoop(nil)
	go func() {
		if _, err := pending.wait(loopCtx); err != nil {
			stopLoop(err)
		}
	}()
	k.pending = pending
	settings, changes := settle(sess, snap, opts.Settings)
	model, err := opts.NewModel(settings)
	if err != nil {
		return Report{}, &ConfigError{Err: fmt.Errorf("session %s: provider %s: %w", sess.ID, settings.Provider, err)}
	}
	if opts.Resume != "" {
		if err := st.SetState(ctx, opts.Tenant, sess.ID, store.StateActive); err != nil {
			return Report{}, fmt.Errorf("resume session %s: %w", sess.ID, err)
		}
	}

	window := provider.ContextWindow(settings.Model, opts.ContextWindow)
	opts.Logger.Info("session settings", "session", sess.ID.String(), "provider", settings.Provider, "model", settings.Model,
		"persona", persona.Name, "toolset", opts.Toolset, "contextWindow", window)

	layers := layersOnce()
	jopts := opts.Journal
	if jopts.Logger == nil {
		jopts.Logger = opts.Logger
	}
	w := journal.New(ctx, afterCreate{st, pending}, opts.Tenant, sess.ID, snap.LastSeq+1, jopts)
	w.Append(layersEntry(layers))
	for _, c := range changes {
		w.Append(c)
	}
	snap.Entries = answerUnanswered(w, sess.ID, snap, opts.Logger)
	if err := k.start(opts, sess.ID.String(), w); err != nil {
		_ = w.Close(context.WithoutCancel(ctx))
		return Report{}, err
	}
	emit(opts.Observe, events.Event{Type: events.SessionStart, Session: sess.ID.String(), Provider: settings.Provider, Model: settings.Model})

	source := "startup"
	if opts.Resume != "" || opts.ForkFrom != "" {
		source = "resume"
	}
	if k.hasStartHooks() {
		// Hooks act on the workspace: the session exists first.
		_, _ = pending.wait(loopCtx)
	}
	var res agent.Result
	if !pending.failed() {
		res = k.converse(loopCtx, source, model, w, snap, opts)
	}
	stored, err := pending.wait(context.WithoutCancel(ctx))
	if err != nil {
		// Nothing was stored and nothing ran in the workspace: end what did
		// start and fail as a run that did not start.
		k.closeMCP(opts)
		cleanup := context.WithoutCancel(ctx)
		tctx, cancel := context.WithTimeout(cleanup, teardownTimeout)
		_, _ = opts.Executor.TeardownAll(tctx)
		cancel()
		_ = w.Close(cleanup)
		code := runconfig.ExitFailure
		emit(opts.Observe, events.Event{Type: events.SessionEnd, Session: sess.ID.String(), Outcome: transcript.OutcomeFailed, Reason: err.Error(), ExitCode: &code})
		return Report{}, err
	}
	sess = stored
	k.sessionEnd(context.WithoutCancel(ctx), res.Outcome, opts)
	k.closeMCP(opts)

	rep := Report{
		Session: sess, Settings: settings, System: k.systemPrompt(), Persona: persona, Layers: layers, ContextWindow: window,
		Tools: k.reg.Definitions(), Extensions: k.report(), Result: res, ExitCode: ExitCode(res),
	}
	rep.Extensions.Artifacts = append(rep.Extensions.Artifacts, personaArts...)
	// Everything below must run after a cancel: the processes must end and
	// the journal must drain whatever stopped the loop.
	cleanup := context.WithoutCancel(ctx)
	rep.Preserved = preserve(cleanup, opts, bg, res, sess.ID)
	tctx, cancel := context.WithTimeout(cleanup, teardownTimeout)
	rep.Teardown, err = opts.Executor.TeardownAll(tctx)
	cancel()
	if err != nil {
		opts.Logger.Warn("tear down process groups", "session", sess.ID.String(), "err", err)
	}
	if err := w.Close(cleanup); err != nil && res.JournalErr == nil {
		rep.Result.JournalErr = err
		opts.Logger.Error("the journal failed: the stored transcript is incomplete", "session", sess.ID.String(), "err", err)
	}
	rep.Journal = w.Stats()
	if err := st.SetState(cleanup, opts.Tenant, sess.ID, finalState(res.Outcome)); err != nil {
		opts.Logger.Warn("record the session's final state", "session", sess.ID.String(), "err", err)
	}
	code := rep.ExitCode
	emit(opts.Observe, events.Event{Type: events.SessionEnd, Session: sess.ID.String(), Outcome: res.Outcome, Reason: res.Reason, Text: res.Answer, Turn: res.Turns, Usage: &rep.Result.Usage, ExitCode: &code})
	return rep, nil
}

// converse runs the SessionStart and UserPromptSubmit hooks and the loop.
func (k *kit) converse(ctx context.Context, source string, model agent.Model, w *journal.Writer, snap transcript.Snapshot, opts Options) agent.Result {
	k.sessionStart(ctx, source, opts)
	// The hooks of this prompt's turn — UserPromptSubmit, the tool hooks,
	// Stop — share its id (turn_id).
	ctx = hooks.WithTurn(ctx, uuid.NewString())
	prompt, endTurn, err := k.userPrompt(ctx, k.prompt, opts)
	if err != nil {
		return agent.Result{Outcome: transcript.OutcomeFailed, Reason: err.Error(), Err: err}
	}
	if endTurn != "" {
		return agent.Result{Outcome: transcript.OutcomeCompleted, Reason: endTurn}
	}
	var usage transcript.Usage
	if snap.Usage != nil {
		usage = *snap.Usage
	}
	var loop *agent.Loop
	loop = agent.New(agent.Config{
		Model:       model,
		Tools:       k.loopTools(),
		Journal:     w,
		System:      k.systemPrompt(),
		Stop:        opts.Stop,
		MaxDuration: opts.MaxDuration,
		OnStop:      k.onStop(opts),
		// At each turn boundary a required MCP server lost mid-session
		// is reconnected (or the turn fails), and what extension_manage
		// changed takes effect.
		BeforeRequest: k.turnBoundary(opts, func() *agent.Loop { return loop }),
		Observe:       opts.Observe,
		Logger:        opts.Logger.With("session", k.session),
	}, agent.History(snap), usage)
	return loop.Run(ctx, prompt)
}

// openSession creates, resumes or forks the session and loads what the
// loop continues from.
func openSession(ctx context.Context, st Store, opts Options) (store.Session, transcript.Snapshot, *pendingSession, error) {
	var ref, verb string
	switch {
	case opts.Resume != "":
		ref, verb = opts.Resume, "resume"
	case opts.ForkFrom != "":
		ref, verb = opts.ForkFrom, "fork"
	default:
		if opts.Settings.Provider == "" || opts.Settings.Model == "" {
			return store.Session{}, transcript.Snapshot{}, nil, configErrorf("no provider or model: set --provider and --model")
		}
		ns := store.NewSession{
			ID: opts.SessionID, Dir: opts.Dir, Settings: opts.Settings, Kind: store.SessionHeadless, Label: opts.Label,
		}
		if ns.ID == uuid.Nil {
			ns.ID = uuid.New()
		}
		// What the store will hold; the run goes on while it is written.
		sess := store.Session{ID: ns.ID, Tenant: opts.Tenant, Dir: ns.Dir, Settings: ns.Settings, Kind: ns.Kind, Label: ns.Label, RootID: ns.ID, State: store.StateActive}
		return sess, transcript.Snapshot{Settings: sess.Settings}, createSession(ctx, st, opts.Tenant, ns), nil
	}
	src, err := st.Resolve(ctx, opts.Tenant, ref)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAmbiguous) {
			return store.Session{}, transcript.Snapshot{}, nil, &ConfigError{Err: fmt.Errorf("%s %q: %w (sessions are looked up in the current directory; see aerie session list)", verb, ref, err)}
		}
		return store.Session{}, transcript.Snapshot{}, nil, fmt.Errorf("%s %q: %w", verb, ref, err)
	}
	id := src.ID
	if opts.ForkFrom != "" {
		child, err := st.Fork(ctx, opts.Tenant, src.ID, store.ForkOptions{At: opts.ForkAt, ID: opts.SessionID, Label: opts.Label, State: store.StateActive})
		if err != nil {
			if errors.Is(err, store.ErrInvalidCut) {
				return store.Session{}, transcript.Snapshot{}, nil, &ConfigError{Err: fmt.Errorf("fork %q: %w", ref, err)}
			}
			return store.Session{}, transcript.Snapshot{}, nil, fmt.Errorf("fork %q: %w", ref, err)
		}
		id = child.ID
	}
	sess, snap, err := st.Load(ctx, opts.Tenant, id)
	if err != nil {
		return store.Session{}, transcript.Snapshot{}, nil, fmt.Errorf("%s %q: load session %s: %w", verb, ref, id, err)
	}
	return sess, snap, storedSession(sess), nil
}

// answerUnanswered journals the answers to the tool calls the session's last
// run left open when it stopped (a crash, a lost pod), and returns the
// session's entries with them, for the loop to continue from: a call that
// may have partly run is answered as interrupted, never made again without
// the model being told.
func answerUnanswered(w *journal.Writer, session uuid.UUID, snap transcript.Snapshot, log *slog.Logger) []transcript.Entry {
	es := slices.Clip(snap.Entries) // the snapshot's array is not this run's to write
	for _, p := range agent.Unanswered(snap) {
		seq := w.Append(p)
		es = append(es, transcript.Entry{Seq: seq, Payload: p, CreatedAt: time.Now()})
		if c, ok := p.(transcript.ToolCompletion); ok && c.Status == transcript.ToolInterrupted {
			log.Warn("a tool call was interrupted when the session last stopped; the model is told it may have partly run",
				"session", session.String(), "call", c.CallID)
		}
	}
	return es
}

// settle returns the settings the run uses: the stored ones of a resumed or
// forked session, overridden by those asked for (the persona always), each
// override recorded as a change entry.
func settle(sess store.Session, snap transcript.Snapshot, want transcript.Settings) (transcript.Settings, []transcript.Payload) {
	have := snap.Settings
	if have.Provider == "" && have.Model == "" {
		have = sess.Settings
	}
	var changes []transcript.Payload
	if want.Provider != "" && want.Provider != have.Provider {
		have.Provider = want.Provider
		changes = append(changes, transcript.ProviderChange{Provider: want.Provider})
	}
	if want.Model != "" && want.Model != have.Model {
		have.Model = want.Model
		changes = append(changes, transcript.ModelChange{Model: want.Model})
	}
	// The persona is always the caller's: empty is the default persona,
	// a choice like any other, not "keep the stored one".
	if want.Persona != have.Persona {
		have.Persona = want.Persona
		changes = append(changes, transcript.PersonaChange{Persona: want.Persona})
	}
	return have, changes
}

func registry(opts Options, all []tools.Tool) (*tools.Registry, error) {
	if opts.Wrap != nil {
		for i, t := range all {
			all[i] = opts.Wrap(t)
		}
	}
	capper := opts.Capper
	if capper == nil {
		capper = tools.NewCapper("")
	}
	reg, err := tools.NewRegistry(capper, all...)
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	return reg, nil
}

// preserve detaches the background groups still running and records them,
// unless the run's budget ran out: the spec's rule is that budget expiration
// ends them too.
func preserve(ctx context.Context, opts Options, bg *tools.Background, res agent.Result, owner uuid.UUID) []process.Record {
	if opts.Preserve == nil || res.Outcome == transcript.OutcomeBudgetExceeded || res.Outcome == transcript.OutcomeDeadlineExceeded {
		return nil
	}
	d, ok := opts.Executor.(Detacher)
	if !ok {
		return nil
	}
	var recs []process.Record
	for _, id := range bg.Running() {
		info, err := d.Detach(ctx, id)
		if err != nil {
			opts.Logger.Warn("preserve background process", "id", id, "err", err)
			continue
		}
		rec := process.Record{Group: info.Group, Command: strings.Join(info.Argv, " "), Dir: info.Dir, Owner: owner.String(), StartedAt: info.StartedAt}
		if err := opts.Preserve.Register(rec); err != nil {
			// A group nobody can find again must not be left running.
			opts.Logger.Warn("record preserved background process; ending it", "id", id, "err", err)
			if _, err := process.Teardown(ctx, info.Group, process.DefaultGrace); err != nil {
				opts.Logger.Warn("end unrecorded background process", "id", id, "err", err)
			}
			continue
		}
		recs = append(recs, rec)
	}
	return recs
}

func finalState(o transcript.Outcome) store.State {
	switch o {
	case transcript.OutcomeCompleted:
		return store.StateCompleted
	case transcript.OutcomeCancelled:
		return store.StateCancelled
	}
	return store.StateFailed
}

func emit(observe func(events.Event), e events.Event) {
	if observe != nil {
		e.Time = time.Now()
		observe(e)
	}
}
