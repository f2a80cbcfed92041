package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/pricing"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
	"github.com/aerie-run/aerie/runner/workdiff"
)

// teardownTimeout bounds the teardown of every process group at the end of a
// run; the executor's grace period (2 s) fits in it several times.
const teardownTimeout = 10 * time.Second

// run is one session from open to finish. Each phase fills in what the
// next one uses; finish reads what they got to, to end exactly that.
type run struct {
	st   Store
	opts Options

	// Set by open.
	persona     extensions.Persona
	personaArts []layer.Artifact
	// layers are the layers with the digests of what they hold, taken
	// while the run opens (see open).
	layers   func() []layer.Layer
	bg       *tools.Background
	eq       *equipment
	sess     store.Session
	snap     transcript.Snapshot
	pending  *pendingSession
	settings transcript.Settings
	changes  []transcript.Payload
	model    agent.Model
	window   int64
	// summarizer writes the compaction summaries, with the settings
	// summarySettings: the session's model unless [compaction] names
	// another.
	summarizer      agent.Model
	summarySettings transcript.Settings

	// Set by start: the journal, the entries a new session was stored
	// with, and whether the session_start event went out (then a
	// session_end event follows it).
	w       *journal.Writer
	first   int
	started bool

	// compact is set when the prompt is /compact: the run compacts the
	// conversation and ends without a model request (see compactCommand);
	// it holds the focus instructions. prior is the stored state of the
	// session it compacts, which it keeps.
	compact *string
	prior   store.State

	// base is the commit the workspace's git work tree stood on when
	// the run started; empty when it is no work tree. Set by start.
	base string
	// Set by start: the session tree, whose ledger every loop of the run
	// charges, and the root's running children.
	tree     *subagent.Tree
	children *subagent.Children
	// resumeChildren: the session's last run left spawn_agent calls
	// pending, whose children converse resumes first.
	resumeChildren bool

	// Set by converse.
	conversed  bool
	res        agent.Result
	structured *Structured
}

// newRun checks opts before anything is opened.
func newRun(st Store, opts Options) (*run, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := opts.Session
	if s.Resume != "" && s.ForkFrom != "" {
		return nil, configErrorf("resume and fork-from are exclusive: give one session to continue")
	}
	if opts.Prompt == "" && s.Resume == "" && s.ForkFrom == "" {
		return nil, configErrorf("no prompt: give the task as an argument or on standard input")
	}
	if err := opts.executors().check(); err != nil {
		return nil, &ConfigError{Err: err}
	}
	if opts.Subagents != nil {
		if err := opts.Subagents.Validate(); err != nil {
			return nil, &ConfigError{Err: err}
		}
	}
	// Children's loops report their events from their own goroutines.
	opts.Observe = lockedObserver(opts.Observe)
	if opts.Budget.MaxCostUSD > 0 {
		opts.Budget.Stop = append(slices.Clip(opts.Budget.Stop), agent.MaxCostUSD(opts.Budget.MaxCostUSD))
	}
	r := &run{st: st, opts: opts}
	if instructions, ok := compactCommand(opts.Prompt); ok {
		if s.Resume == "" && s.ForkFrom == "" {
			return nil, configErrorf("%s compacts a stored conversation: resume the session to compact", CompactCommand)
		}
		r.compact, r.opts.Prompt = &instructions, ""
		r.opts.Result = nil // a compaction answers nothing
	}
	return r, nil
}

// CompactCommand, as a resumed run's prompt, compacts the conversation
// (a manual compaction) and ends the run without a model request; the
// text after it, if any, is the summary's focus.
const CompactCommand = "/compact"

// compactCommand reports whether prompt is CompactCommand, and returns
// the focus instructions that follow it.
func compactCommand(prompt string) (instructions string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(prompt), CompactCommand)
	if !ok || (rest != "" && !unicode.IsSpace(rune(rest[0]))) {
		return "", false
	}
	return strings.TrimSpace(rest), true
}

// ErrActive: the session to compact is active, in use by a run (or marked
// active by aerie session switch).
var ErrActive = errors.New("the session is active")

// open readies the session: the persona, the extensions and their MCP
// servers, the stored session (a new one is stored from start on, see
// pendingSession), the settings in force and the model.
func (r *run) open(ctx context.Context) error {
	var err error
	if r.persona, r.personaArts, err = applyPersona(&r.opts); err != nil {
		return err
	}
	opts := r.opts
	// The layers' digests read every file again: they are taken while
	// the extensions load, MCP servers start and the session opens, and
	// waited for before the journal's first entry records them. finish
	// waits for them too, so Run never returns before they are done.
	digests := make(chan []layer.Layer, 1)
	go func() { digests <- recordedLayers(opts) }()
	r.layers = sync.OnceValue(func() []layer.Layer { return <-digests })

	r.bg = tools.NewBackground(opts.Executor)
	execs := opts.executors()
	if r.eq, err = newEquipment(opts, tools.BuiltinOn(execs.places(execs.commands(), r.bg))); err != nil {
		return err
	}
	if err := r.eq.startMCP(ctx); err != nil {
		return err
	}
	if err := r.eq.expandCommand(ctx); err != nil {
		return err
	}
	if r.sess, r.snap, r.pending, err = openSession(ctx, r.st, opts); err != nil {
		return err
	}
	r.eq.pending = r.pending
	r.settings, r.changes = settle(r.sess, r.snap, opts.Model.Settings)
	if r.model, err = opts.Model.New(r.settings); err != nil {
		return &ConfigError{Err: fmt.Errorf("session %s: provider %s: %w", r.sess.ID, r.settings.Provider, err)}
	}
	if r.model, err = r.priced(r.model, r.settings.Model); err != nil {
		return err
	}
	r.summarizer, r.summarySettings = r.model, r.settings
	if m := opts.Model.CompactionModel; m != "" && m != r.settings.Model {
		r.summarySettings.Model = m
		if r.summarizer, err = opts.Model.New(r.summarySettings); err != nil {
			return &ConfigError{Err: fmt.Errorf("compaction.model %s: provider %s: %w", m, r.settings.Provider, err)}
		}
		if r.summarizer, err = r.priced(r.summarizer, m); err != nil {
			return err
		}
	}
	t, err := r.moaTool()
	if err != nil {
		return err
	}
	if t != nil {
		r.eq.builtin = append(r.eq.builtin, treeCharged{Tool: t, r: r})
	}
	r.prior = r.sess.State
	if r.compact != nil && opts.Session.Resume != "" && r.prior == store.StateActive {
		return &ConfigError{Err: fmt.Errorf("compact session %s: %w: a run may be writing to it; "+
			"compact it once it has ended, or after switching to another session", r.sess.ID, ErrActive)}
	}
	if opts.Session.Resume != "" {
		if err := r.st.SetState(ctx, opts.Session.Tenant, r.sess.ID, store.StateActive); err != nil {
			return fmt.Errorf("resume session %s: %w", r.sess.ID, err)
		}
	}
	r.window = provider.ContextWindow(r.settings.Model, opts.Model.ContextWindow)
	opts.Logger.Info("session settings", "session", r.sess.ID.String(),
		"provider", r.settings.Provider, "model", r.settings.Model,
		"persona", r.persona.Name, "toolset", opts.Toolset, "contextWindow", r.window)
	return nil
}

// priced returns m, a client of model, with the cost of each response in
// its usage when the model's price is known. Unknown, a cost budget could
// not be kept: with one, that is a configuration error.
func (r *run) priced(m agent.Model, model string) (agent.Model, error) {
	prices := r.opts.Model.Prices
	if prices == nil {
		prices = pricing.Bundled()
	}
	if p, ok := prices.Lookup(model); ok {
		return pricing.Priced(m, p), nil
	}
	if r.opts.Budget.MaxCostUSD > 0 {
		return nil, configErrorf("a cost budget is set, but the price of model %q is unknown: add it to config.toml "+
			"as [prices.%q] with input and output (and cache_read, cache_write) in US dollars per million tokens", model, model)
	}
	return m, nil
}

// start opens the journal, with the layers used and the settings changed,
// answers the tool calls the session's last run left open, and makes the
// session's hook engine and tools. A new session is stored from here on,
// with those first entries and the user's prompt (see pendingSession); the
// journal follows them.
func (r *run) start(ctx context.Context) error {
	opts := r.opts
	jopts := opts.Journal
	if jopts.Logger == nil {
		jopts.Logger = opts.Logger
	}
	first := append([]transcript.Payload{layersEntry(r.layers())}, r.changes...)
	next := r.snap.LastSeq + 1
	if r.pending.toCreate() {
		if r.eq.promptFinal() {
			first = append(first, agent.UserEntry(r.eq.prompt))
			r.eq.promptSeq = int64(len(first))
		}
		next, r.first = r.pending.create(ctx, r.st, first), len(first)
		first = nil
	}
	r.w = journal.New(ctx, afterCreate{r.st, r.pending}, opts.Session.Tenant, r.sess.ID, next, jopts)
	for _, e := range first {
		r.w.Append(e)
	}
	if err := r.newTree(ctx); err != nil {
		return err
	}
	r.eq.spawn, r.eq.stop = r.rootTool(), []agent.StopCondition{r.tree.Ledger().Stop()}
	// The children of spawn_agent calls left pending are resumed once the
	// loop is about to go on (see converse); the other open calls are
	// answered with them.
	if r.resumeChildren = r.eq.spawn != nil && len(pendingSpawns(r.snap)) > 0; !r.resumeChildren {
		r.snap.Entries = answerUnanswered(r.w, r.sess.ID, r.snap, opts.Logger, nil)
	}
	r.base = r.workspaceBase(ctx)
	if err := r.eq.start(r.sess.ID, r.w); err != nil {
		return err
	}
	emit(opts.Observe, events.Event{
		Type: events.SessionStart, Session: r.sess.ID.String(), Provider: r.settings.Provider, Model: r.settings.Model,
	})
	r.started = true
	return nil
}

// converse runs the SessionStart and UserPromptSubmit hooks and the loop.
// A new session that cannot be stored stops the loop (see pendingSession).
func (r *run) converse(ctx context.Context) {
	r.conversed = true
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() {
		if _, err := r.pending.wait(ctx); err != nil {
			stop(err)
		}
	}()
	source := "startup"
	if r.opts.Session.Resume != "" || r.opts.Session.ForkFrom != "" {
		source = "resume"
	}
	if r.eq.hasStartHooks() {
		// Hooks act on the workspace: the session exists first.
		_, _ = r.pending.wait(ctx)
	}
	switch {
	case r.pending.failed():
	case r.compact != nil:
		snap, _ := r.resumePending(ctx, r.snap)
		r.res = r.eq.compactNow(ctx, r.model, r.compactor(), r.w, snap, *r.compact)
	default:
		r.res = r.treeResult(r.eq.converse(ctx, source, r.tree.Ledger().Model(r.model), r.compactor(), r.w, r.snap,
			r.resumePending))
		r.settleResult()
	}
}

// resumePending resumes the children of the spawn_agent calls the
// session's last run left pending, and answers its other open calls (see
// answerPending); it returns snap with their answers, and the request a
// child paused on again, if one did. The root's SessionStart hooks have
// run by then: a child is part of the session.
func (r *run) resumePending(
	ctx context.Context, snap transcript.Snapshot,
) (transcript.Snapshot, *transcript.ApprovalRequest) {
	var await *transcript.ApprovalRequest
	if r.resumeChildren {
		snap.Entries, await = answerPending(ctx, r.w, r.sess.ID, snap, r.eq.spawn, r.eq.engine, r.opts.Logger)
	}
	return snap, await
}

// settleResult ends a run that was asked for a structured result: a run
// that completed without one ended result_invalid, and the result it got
// is journaled.
func (r *run) settleResult() {
	c := r.opts.Result
	if c == nil {
		return
	}
	r.res = c.Settle(r.res)
	if e, ok := c.Entry(); ok {
		r.structured = &Structured{Value: e.Value, Seq: r.w.Append(e)}
	}
}

// compactor is the policy that compacts the run's conversation (see
// compaction), and the session's hooks are told. With the window unknown
// it compacts only a request the model refused as too large.
func (r *run) compactor() *compaction.Policy {
	cfg := r.compaction(r.children)
	cfg.Restore = r.eq.restorer(cfg.Window)
	cfg.Hooks = compactHooks{r.eq}
	return compaction.New(cfg)
}

// compaction is the configuration of the compaction of the conversation
// of one agent of the tree, whose running children are children: the
// session's model (or the one [compaction] names) summarizes, within the
// window in force less the responses' cap, and what the summaries use is
// charged to the tree's ledger, so that the tree's budgets count it (the
// loop adds it to the agent's own usage).
func (r *run) compaction(children *subagent.Children) compaction.Config {
	return compaction.Config{
		Window:     compaction.UsableWindow(r.window, r.opts.Model.MaxOutputTokens),
		Summarizer: r.tree.Ledger().ToolModel(r.summarizer),
		Provider:   r.summarySettings.Provider,
		Model:      r.summarySettings.Model,
		Children:   children,
	}
}

// finish ends the session, whatever phase the run reached, and makes its
// report: it is Run's one cleanup path. err is what stopped an earlier
// phase. Everything here runs after a cancel too: the processes must end
// and the journal must drain whatever stopped the loop.
func (r *run) finish(ctx context.Context, err error) (Report, error) {
	ctx = context.WithoutCancel(ctx)
	defer r.settled()
	if r.conversed {
		// A new session that could not be stored fails the run as one
		// that did not start: nothing was stored and nothing ran in the
		// workspace.
		var stored store.Session
		if stored, err = r.pending.wait(ctx); err == nil {
			r.sess = stored
			r.eq.sessionEnd(ctx, r.res.Outcome)
		}
	}
	if r.eq != nil {
		r.eq.closeMCP()
		r.eq.closeFollower()
	}
	var rep Report
	if r.conversed && err == nil {
		rep = r.report()
		rep.Preserved = preserve(ctx, r.opts, r.bg, r.res, r.sess.ID)
	}
	if r.w == nil {
		// Nothing started in the workspace but the MCP servers.
		return rep, err
	}
	rep.Teardown = r.teardown(ctx)
	if r.conversed && err == nil {
		rep.Diff = r.workspaceDiff(ctx)
	}
	jerr := r.w.Close(ctx)
	if err != nil {
		if r.started {
			code := runconfig.ExitFailure
			emit(r.opts.Observe, events.Event{
				Type: events.SessionEnd, Session: r.sess.ID.String(),
				Outcome: transcript.OutcomeFailed, Reason: err.Error(), ExitCode: &code,
			})
		}
		return Report{}, err
	}
	if jerr != nil && r.res.JournalErr == nil {
		rep.Result.JournalErr = jerr
		r.opts.Logger.Error("the journal failed: the stored transcript is incomplete",
			"session", r.sess.ID.String(), "err", jerr)
	}
	if jerr := rep.Result.JournalErr; jerr != nil && rep.Result.Outcome == transcript.OutcomeCompleted {
		// Completed, but not on record: a failure (see ExitCode).
		rep.ExitCode = ExitCode(rep.Result)
		r.res.Reason = fmt.Sprintf("the agent completed but the journal failed (%v): the stored session ends "+
			"where the journal stopped, and a resume would continue from there", jerr)
		rep.Result.Reason = r.res.Reason
	}
	rep.Journal = r.w.Stats()
	if r.first > 0 {
		// The entries stored with the new session were its first batch.
		rep.Journal.Batches++
		rep.Journal.Entries += int64(r.first)
	}
	state := finalState(r.res.Outcome)
	if r.compact != nil && r.opts.Session.Resume != "" && r.prior != "" {
		state = r.prior // compacting changes the conversation, not how the session ended
	}
	if err := r.st.SetState(ctx, r.opts.Session.Tenant, r.sess.ID, state); err != nil {
		r.opts.Logger.Warn("record the session's final state", "session", r.sess.ID.String(), "err", err)
	}
	code := rep.ExitCode
	emit(r.opts.Observe, events.Event{
		Type: events.SessionEnd, Session: r.sess.ID.String(), Outcome: r.res.Outcome, Reason: r.res.Reason,
		Text: r.res.Answer, Turn: r.res.Turns, Usage: &rep.Result.Usage, ExitCode: &code, Subagents: rep.Subagents,
	})
	if s := rep.Structured; s != nil {
		// The last event, for a pipeline to read without a store.
		emit(r.opts.Observe, events.Event{Type: events.Result, Session: r.sess.ID.String(), Seq: s.Seq, Result: s.Value})
	}
	return rep, nil
}

// report is what the session did, as the loop ended it.
func (r *run) report() Report {
	rep := Report{
		Session: r.sess, Settings: r.settings, System: r.eq.systemPrompt(), Persona: r.persona, Layers: r.layers(),
		ContextWindow: r.window, Tools: r.eq.reg.Definitions(), Extensions: r.eq.report(), Result: r.res,
		ExitCode: ExitCode(r.res), Structured: r.structured,
	}
	if r.tree != nil {
		rep.Subagents = r.tree.Spawned()
		rep.AgentTypes = r.tree.Ledger().Totals().AgentTypes
	}
	rep.Extensions.Artifacts = append(rep.Extensions.Artifacts, r.personaArts...)
	return rep
}

// teardown ends every process group the session's executor still runs.
func (r *run) teardown(ctx context.Context) []process.Report {
	ctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	reps, err := r.opts.executors().teardownAll(ctx)
	if err != nil {
		r.opts.Logger.Warn("tear down process groups", "session", r.sess.ID.String(), "err", err)
	}
	return reps
}

// workspaceBase is the commit the workspace's git work tree stands on,
// which the diff at the end is taken against; "" when it is no work
// tree, or a manual compaction, which changes no file.
func (r *run) workspaceBase(ctx context.Context) string {
	if r.compact != nil {
		return ""
	}
	base, err := workdiff.Base(ctx, r.opts.Executor, r.opts.Extensions.Dir)
	if err != nil {
		r.opts.Logger.Warn("no workspace diff: the workspace's commit is unknown", "session", r.sess.ID.String(), "err", err)
	}
	return base
}

// workspaceDiff journals what the run changed in a git workspace, once
// its processes are down.
func (r *run) workspaceDiff(ctx context.Context) *transcript.WorkspaceDiff {
	if r.base == "" {
		return nil
	}
	d := workdiff.Take(ctx, r.opts.Executor, r.opts.Extensions.Dir, r.base, 0)
	if d.Error != "" {
		r.opts.Logger.Warn("the workspace diff is incomplete", "session", r.sess.ID.String(), "err", d.Error)
	}
	r.w.Append(d)
	return &d
}

// settled waits for what the run started in the background: the storing
// of a new session and the layers' digests. Run never returns before they
// are done. (A new session the run stopped before storing is not stored.)
func (r *run) settled() {
	if r.pending != nil && !r.pending.toCreate() {
		<-r.pending.done
	}
	if r.layers != nil {
		r.layers()
	}
}

// openSession creates, resumes or forks the session and loads what the
// loop continues from.
func openSession(
	ctx context.Context, st Store, opts Options,
) (store.Session, transcript.Snapshot, *pendingSession, error) {
	s := opts.Session
	var ref, verb string
	switch {
	case s.Resume != "":
		ref, verb = s.Resume, "resume"
	case s.ForkFrom != "":
		ref, verb = s.ForkFrom, "fork"
	default:
		settings := opts.Model.Settings
		if settings.Provider == "" || settings.Model == "" {
			return store.Session{}, transcript.Snapshot{}, nil, configErrorf("no provider or model: set --provider and --model")
		}
		ns := store.NewSession{
			ID: s.ID, Dir: opts.Extensions.Dir, Settings: settings, Kind: store.SessionHeadless, Label: s.Label,
		}
		if ns.ID == uuid.Nil {
			ns.ID = uuid.New()
		}
		// What the store will hold; the run goes on while it is written.
		sess := store.Session{
			ID: ns.ID, Tenant: s.Tenant, Dir: ns.Dir, Settings: ns.Settings, Kind: ns.Kind, Label: ns.Label,
			RootID: ns.ID, State: store.StateActive,
		}
		return sess, transcript.Snapshot{Settings: sess.Settings}, newSession(s.Tenant, ns), nil
	}
	src, err := st.Resolve(ctx, s.Tenant, ref)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAmbiguous) {
			return store.Session{}, transcript.Snapshot{}, nil, &ConfigError{Err: fmt.Errorf(
				"%s %q: %w (sessions are looked up in the current directory; see aerie session list)", verb, ref, err)}
		}
		return store.Session{}, transcript.Snapshot{}, nil, fmt.Errorf("%s %q: %w", verb, ref, err)
	}
	id := src.ID
	if s.ForkFrom != "" {
		child, err := st.Fork(ctx, s.Tenant, src.ID,
			store.ForkOptions{At: s.ForkAt, ID: s.ID, Label: s.Label, State: store.StateActive})
		if err != nil {
			if errors.Is(err, store.ErrInvalidCut) {
				return store.Session{}, transcript.Snapshot{}, nil, &ConfigError{Err: fmt.Errorf("fork %q: %w", ref, err)}
			}
			return store.Session{}, transcript.Snapshot{}, nil, fmt.Errorf("fork %q: %w", ref, err)
		}
		id = child.ID
	}
	sess, snap, err := st.Load(ctx, s.Tenant, id)
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
func answerUnanswered(
	w *journal.Writer, session uuid.UUID, snap transcript.Snapshot, log *slog.Logger, open map[string]bool,
) []transcript.Entry {
	es := slices.Clip(snap.Entries) // the snapshot's array is not this run's to write
	for _, p := range agent.Unanswered(snap) {
		if open[callOf(p)] {
			continue // a suspended subagent's call, pending for the next resume
		}
		seq := w.Append(p)
		es = append(es, transcript.Entry{Seq: seq, Payload: p, CreatedAt: time.Now()})
		if c, ok := p.(transcript.ToolCompletion); ok && c.Status == transcript.ToolInterrupted {
			log.Warn("a tool call was interrupted when the session last stopped; the model is told it may have partly run",
				"session", session.String(), "call", c.CallID)
		}
	}
	return es
}

// callOf is the call id of an answer Unanswered returns.
func callOf(p transcript.Payload) string {
	switch p := p.(type) {
	case transcript.ToolResult:
		return p.CallID
	case transcript.ToolCompletion:
		return p.CallID
	}
	return ""
}

// settle returns the settings the run uses: the stored ones of a resumed or
// forked session, overridden by those asked for (the persona always), each
// override recorded as a change entry.
func settle(
	sess store.Session, snap transcript.Snapshot, want transcript.Settings,
) (transcript.Settings, []transcript.Payload) {
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

// preserve detaches the background groups still running and records them,
// unless the run's budget ran out: the spec's rule is that budget expiration
// ends them too.
func preserve(
	ctx context.Context, opts Options, bg *tools.Background, res agent.Result, owner uuid.UUID,
) []process.Record {
	if opts.Preserve == nil || res.Outcome == transcript.OutcomeBudgetExceeded ||
		res.Outcome == transcript.OutcomeDeadlineExceeded {
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
		rec := process.Record{
			Group: info.Group, Command: strings.Join(info.Argv, " "), Dir: info.Dir,
			Owner: owner.String(), StartedAt: info.StartedAt,
		}
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
	case transcript.OutcomeAwaitingApproval:
		// Paused, to be resumed once someone decides.
		return store.StateIdle
	}
	return store.StateFailed
}

// lockedObserver serializes the calls of observe, nil staying nil.
func lockedObserver(observe func(events.Event)) func(events.Event) {
	if observe == nil {
		return nil
	}
	var mu sync.Mutex
	return func(e events.Event) {
		mu.Lock()
		defer mu.Unlock()
		observe(e)
	}
}

func emit(observe func(events.Event), e events.Event) {
	if observe != nil {
		e.Time = time.Now()
		observe(e)
	}
}
