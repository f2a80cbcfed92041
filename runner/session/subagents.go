package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/instructions"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// newTree makes the session tree of the run: its limits, and the ledger
// that holds the run's budget. The ledger starts from the root's stored
// usage and, for a resumed root, its stored descendants' (which also count
// toward max_total), so that a resumed tree keeps to the budget of the
// whole tree.
func (r *run) newTree(ctx context.Context) error {
	limits := subagent.DefaultLimits()
	if r.opts.Subagents != nil {
		limits = *r.opts.Subagents
	}
	var start transcript.Usage
	if r.snap.Usage != nil {
		start = *r.snap.Usage
	}
	var stored []uuid.UUID
	if r.opts.Session.Resume != "" {
		ids, usage, err := storedTree(ctx, r.st, r.opts.Session.Tenant, r.sess.ID)
		if err != nil {
			return fmt.Errorf("resume session %s: %w", r.sess.ID, err)
		}
		stored, start = ids, addUsage(start, usage)
	}
	r.tree = subagent.NewTree(limits, subagent.NewLedger(start, r.opts.Budget.Stop), stored...)
	if plugs := r.eq.ext.Plugins; plugs != nil {
		var types []subagent.Type
		for _, a := range plugs.Agents() {
			types = append(types, subagent.Type{Name: a.Name, Description: a.Description})
		}
		r.tree.WithTypes(types...)
	}
	r.children = &subagent.Children{}
	return nil
}

// rootTool is the spawn_agent tool of the root, nil when the limits allow
// no child.
func (r *run) rootTool() tools.Tool {
	if r.opts.Subagents != nil && r.opts.Subagents.MaxDepth == 0 {
		return nil
	}
	return subagent.NewTool(r.tree, 0, r.sess.ID, &spawner{r: r, parent: r.sess.ID}, r.children)
}

// treeResult is res with the tree's totals when the run spawned children:
// the usage across the tree (the root's own context size kept).
func (r *run) treeResult(res agent.Result) agent.Result {
	t := r.tree.Ledger().Totals()
	if r.tree.Spawned() == 0 {
		return res
	}
	u := t.Usage
	u.ContextTokens, u.ReasoningTokens = res.Usage.ContextTokens, res.Usage.ReasoningTokens
	res.Usage = u
	return res
}

// spawner makes and runs the children of one agent of the tree (the root's
// or a child's): each is a session of kind subagent whose parent is that
// agent's, with its own journal, tools, hooks and loop, in this process.
type spawner struct {
	r      *run
	parent uuid.UUID
}

// child is one child being made.
type child struct {
	id      uuid.UUID
	req     subagent.Request
	persona extensions.Persona
	system  string
	toolset string
	// only, when not nil, are the names of the tools the child may have
	// (a plugin agent's tools field), within the parent's.
	only    []string
	observe func(events.Event)
	engine  *hooks.Engine
	w       *journal.Writer
	// cmds are the child's commands on each executor, the default's
	// first.
	cmds []*trackedCommands
	// children are the child's own running children.
	children *subagent.Children
}

func (s *spawner) Spawn(ctx context.Context, req subagent.Request) (subagent.Outcome, error) {
	r := s.r
	c := &child{id: req.ID, req: req}
	if err := s.persona(c); err != nil {
		return subagent.Outcome{}, err
	}
	// The root may still be being stored; its children follow it.
	if _, err := r.pending.wait(ctx); err != nil {
		return subagent.Outcome{}, fmt.Errorf("the session is not stored: %w", err)
	}
	c.observe = func(e events.Event) {
		e.AgentID, e.ParentID = c.id.String(), s.parent.String()
		emit(r.opts.Observe, e)
	}
	settings := r.settings
	settings.Persona = req.AgentType
	sess, snap, err := r.st.Load(ctx, r.opts.Session.Tenant, c.id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s.fresh(ctx, c, settings)
	case err != nil:
		return subagent.Outcome{}, fmt.Errorf("load the subagent's session %s: %w", c.id, err)
	case sess.ParentID != s.parent:
		return subagent.Outcome{}, fmt.Errorf("session %s is not a subagent of %s", c.id, s.parent)
	}
	if res, ok := finished(sess, snap); ok {
		// Its outcome was stored and not delivered: it does not run again.
		r.opts.Logger.Info("delivering the stored outcome of a finished subagent", "session", c.id.String())
		return subagent.Outcome{Session: c.id, Result: res}, nil
	}
	if err := r.st.SetState(ctx, r.opts.Session.Tenant, c.id, store.StateActive); err != nil {
		return subagent.Outcome{}, fmt.Errorf("resume the subagent's session %s: %w", c.id, err)
	}
	c.engine = s.engine(c)
	req.Started(c.id)
	c.observe(events.Event{
		Type: events.SubagentStart, Session: c.id.String(), AgentType: req.AgentType, Text: req.Task,
		Provider: settings.Provider, Model: settings.Model,
	})
	res := s.resume(ctx, c, snap)
	s.end(ctx, c, res)
	return subagent.Outcome{Session: c.id, Result: res}, nil
}

// fresh stores a new child and runs it from its task.
func (s *spawner) fresh(ctx context.Context, c *child, settings transcript.Settings) (subagent.Outcome, error) {
	r := s.r
	prompt := s.start(ctx, c)
	_, err := r.st.Create(ctx, r.opts.Session.Tenant, store.NewSession{
		ID: c.id, Dir: r.opts.Extensions.Dir, Settings: settings, Kind: store.SessionSubagent, Parent: s.parent,
		Entries: []transcript.Entry{{Seq: 1, Payload: agent.UserEntry(prompt), CreatedAt: time.Now()}},
	})
	if err != nil {
		return subagent.Outcome{}, fmt.Errorf("store the subagent's session: %w", err)
	}
	c.req.Started(c.id)
	c.observe(events.Event{
		Type: events.SubagentStart, Session: c.id.String(), AgentType: c.req.AgentType, Text: c.req.Task,
		Provider: settings.Provider, Model: settings.Model,
	})
	res := s.run(ctx, c, prompt)
	s.end(ctx, c, res)
	return subagent.Outcome{Session: c.id, Result: res}, nil
}

// persona finds the child's system prompt and toolset: the persona
// agent_type names, or the parent's prompt.
func (s *spawner) persona(c *child) error {
	r := s.r
	c.system, c.toolset = r.eq.systemPrompt(), c.req.Toolset
	if c.req.AgentType == "" {
		return nil
	}
	if plugs := r.eq.ext.Plugins; plugs != nil && strings.Contains(c.req.AgentType, ":") {
		if a, ok := plugs.Agent(c.req.AgentType); ok {
			c.system, c.only = a.Prompt, a.Tools
			return nil
		}
	}
	x := r.opts.Extensions
	src := layer.Source{Layers: x.Layers, Workspace: x.Workspace, WorkDir: x.Dir}
	p, _, err := extensions.LoadPersona(src, c.req.AgentType)
	if errors.Is(err, extensions.ErrUnknownPersona) || errors.Is(err, extensions.ErrInvalidPersonaName) {
		names, _ := extensions.PersonaNames(src)
		if plugs := r.eq.ext.Plugins; plugs != nil {
			for _, a := range plugs.Agents() {
				names = append(names, a.Name)
			}
		}
		known := "none are defined (personas/<name>.toml in a layer, or a plugin's agents)"
		if len(names) > 0 {
			known = "known: " + strings.Join(names, ", ")
		}
		return fmt.Errorf("unknown agent_type %q: %s; or leave agent_type out for your own prompt", c.req.AgentType, known)
	}
	if err != nil {
		return fmt.Errorf("agent_type %q: %w", c.req.AgentType, err)
	}
	c.persona = p
	if p.Prompt != "" {
		c.system = p.Prompt
	}
	if c.toolset == "" {
		c.toolset = p.Toolset
	}
	return nil
}

// start makes the child's hook engine and runs its SubagentStart hooks,
// whose context follows the task; it returns the child's first message.
func (s *spawner) start(ctx context.Context, c *child) string {
	c.engine = s.engine(c)
	prompt := c.req.Task
	v, err := c.engine.SubagentStart(ctx, c.id.String(), c.req.AgentType)
	if err != nil {
		s.r.opts.Logger.Warn("SubagentStart hooks", "agent", c.id.String(), "err", err)
	} else if v.Context != "" {
		prompt += "\n\n" + v.Context
	}
	return prompt
}

// engine is the child's hook engine.
func (s *spawner) engine(c *child) *hooks.Engine {
	r := s.r
	opts := r.opts
	return hooks.New(opts.Executor, r.eq.ext.Hooks.Hooks, hooks.Options{
		SessionID: r.eq.session,
		Dir:       opts.Extensions.Dir,
		Observe: func(_ context.Context, v hooks.Verdict) {
			emitHook(c.observe, v)
			if e, ok := hookEntry(v); ok && c.w != nil {
				c.w.Append(e)
			}
		},
		Approve: opts.Approve,
		Logger:  opts.Logger,
		On:      opts.executors().hookOn,
	}).ForAgent(c.id.String(), c.req.AgentType)
}

// run runs the child's loop from its task to its end.
func (s *spawner) run(ctx context.Context, c *child, prompt string) agent.Result {
	c.w = s.journal(ctx, c, 2)
	reg, _, err := s.tools(c)
	if err != nil {
		return agent.Result{Outcome: transcript.OutcomeFailed, Reason: err.Error(), Err: err}
	}
	return s.loop(c, reg, nil, nil, transcript.Usage{}, c.req.MaxTurns).Run(ctx, prompt)
}

// resume continues the child from its journal, snap: its pending calls
// are answered first (its own children resumed, see answerPending), then
// its loop goes on with no new prompt. Its max_turns counts the requests
// it made before.
func (s *spawner) resume(ctx context.Context, c *child, snap transcript.Snapshot) agent.Result {
	r := s.r
	c.w = s.journal(ctx, c, snap.LastSeq+1)
	reg, spawn, err := s.tools(c)
	if err != nil {
		return agent.Result{Outcome: transcript.OutcomeFailed, Reason: err.Error(), Err: err}
	}
	usage := usageOf(snap)
	if p, ok := agent.PendingApproval(snap); ok {
		// It paused for a person's approval: with a decision the call is
		// answered, without one it pauses again, and so does the tree.
		var paused bool
		if snap, paused = resolveApproval(ctx, r.opts.Approvals, reg, c.w, snap, p, c.observe); paused {
			return agent.Paused(ctx, c.w, p, c.observe, usage)
		}
	}
	var await *transcript.ApprovalRequest
	if snap.Entries, await = answerPending(ctx, c.w, c.id, snap, spawn, c.engine, r.opts.Logger); await != nil {
		return agent.AwaitingOther(ctx, c.w, *await, c.observe, usage)
	}
	history, seqs := agent.HistoryWithSeqs(snap)
	if res, ok := answeredAlready(history, snap); ok {
		c.w.Append(transcript.Checkpoint{Outcome: res.Outcome, Result: res.Answer})
		return res
	}
	turns := c.req.MaxTurns
	if turns > 0 {
		// Its bound is what remains of it, one request at least, so that a
		// resumed child at its bound still ends with the budget's outcome.
		turns = max(turns-int(usage.Requests), 1)
	}
	return s.loop(c, reg, history, seqs, usage, turns).Run(ctx, "")
}

// journal is the child's journal writer, from sequence number next on.
func (s *spawner) journal(ctx context.Context, c *child, next int64) *journal.Writer {
	opts := s.r.opts
	jopts := opts.Journal
	if jopts.Logger == nil {
		jopts.Logger = opts.Logger
	}
	c.cmds = nil
	for _, cmds := range opts.executors().commands() {
		c.cmds = append(c.cmds, &trackedCommands{Commands: cmds})
	}
	return journal.New(ctx, s.r.st, opts.Session.Tenant, c.id, next, jopts)
}

// tools are the child's tools, and its own spawn_agent.
func (s *spawner) tools(c *child) (*tools.Registry, tools.Tool, error) {
	r := s.r
	c.children = &subagent.Children{}
	spawn := subagent.NewTool(r.tree, c.req.Depth, c.id, &spawner{r: r, parent: c.id}, c.children)
	cmds := make([]tools.Commands, len(c.cmds))
	for i, t := range c.cmds {
		cmds[i] = t
	}
	reg, err := r.eq.childTools(c.id, cmds, spawn, c.toolset, c.only, c.engine)
	return reg, spawn, err
}

// loop is the child's loop, continuing history (nil for a new child) with
// its usage so far; maxTurns bounds its requests, zero is no bound of its
// own.
func (s *spawner) loop(
	c *child, reg *tools.Registry, history []provider.Message, seqs []int64, usage transcript.Usage, maxTurns int,
) *agent.Loop {
	r := s.r
	opts := r.opts
	stop := []agent.StopCondition{r.tree.Ledger().Stop()}
	if maxTurns > 0 {
		stop = append(stop, agent.MaxTurns(maxTurns))
	}
	policy := compaction.New(r.compaction(c.children))
	policy.SetFixed(c.system, reg.Definitions())
	promptSeq := int64(1)
	if history != nil {
		promptSeq = 0
	}
	var loopTools agent.Tools = reg
	if len(opts.Executors) > 0 {
		// The child is a conversation of its own: the other executors'
		// instructions follow its own first calls there.
		elsewhere := instructions.NewExecutors(opts.executors().files)
		elsewhere.Seed(history)
		loopTools = elsewhere.Tools(reg)
	}
	return agent.New(agent.Config{
		Model:      r.tree.Ledger().ChildModel(c.req.AgentType, r.model),
		Tools:      loopTools,
		Journal:    c.w,
		System:     c.system,
		Stop:       stop,
		Concurrent: concurrent,
		OnStop: stopHook(opts.Logger, "SubagentStop", func(ctx context.Context, in hooks.StopInput) (hooks.Verdict, error) {
			return c.engine.SubagentStop(ctx, c.id.String(), c.req.AgentType, in)
		}),
		Compactor:   policy,
		PromptSeq:   promptSeq,
		HistorySeqs: seqs,
		Observe:     c.observe,
		Logger:      opts.Logger.With("session", c.id.String(), "parent", s.parent.String()),
	}, history, usage)
}

// end tears down the child's processes, closes its journal and records how
// it ended.
func (s *spawner) end(ctx context.Context, c *child, res agent.Result) {
	r := s.r
	ctx = context.WithoutCancel(ctx)
	for _, cmds := range c.cmds {
		cmds.teardown(ctx, r.opts.Logger)
	}
	if err := c.w.Close(ctx); err != nil {
		r.opts.Logger.Error("the subagent's journal failed: its stored transcript is incomplete",
			"session", c.id.String(), "err", err)
	}
	if err := r.st.SetState(ctx, r.opts.Session.Tenant, c.id, finalState(res.Outcome)); err != nil {
		r.opts.Logger.Warn("record the subagent's final state", "session", c.id.String(), "err", err)
	}
	u := res.Usage
	c.observe(events.Event{
		Type: events.SubagentStop, Session: c.id.String(), AgentType: c.req.AgentType, Outcome: res.Outcome,
		Reason: res.Reason, Text: res.Answer, Turn: res.Turns, Usage: &u,
	})
}

// concurrent names the tools whose calls of one response run at once.
func concurrent(tool string) bool { return tool == subagent.Name }

// trackedCommands are the executor's commands as one child agent runs
// them: each process it starts is remembered, so that when the child ends
// every group it started — a background server, a build it left running —
// is torn down, and no other agent's.
type trackedCommands struct {
	tools.Commands

	mu  sync.Mutex
	ids []string
}

func (t *trackedCommands) Start(ctx context.Context, cmd executor.Command) (executor.Process, error) {
	p, err := t.Commands.Start(ctx, cmd)
	if err == nil {
		t.mu.Lock()
		t.ids = append(t.ids, p.ID())
		t.mu.Unlock()
	}
	return p, err
}

// teardown ends the groups still running, all at once.
func (t *trackedCommands) teardown(ctx context.Context, log interface{ Warn(string, ...any) }) []process.Report {
	t.mu.Lock()
	ids := t.ids
	t.ids = nil
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	running, err := t.List(ctx)
	if err != nil {
		log.Warn("list the subagent's processes", "err", err)
		return nil
	}
	live := map[string]bool{}
	for _, p := range running {
		live[p.ID] = true
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		reps []process.Report
	)
	for _, id := range ids {
		if !live[id] {
			continue
		}
		wg.Go(func() {
			rep, err := t.Teardown(ctx, id)
			if err != nil {
				log.Warn("tear down the subagent's process group", "id", id, "err", err)
			}
			mu.Lock()
			reps = append(reps, rep)
			mu.Unlock()
		})
	}
	wg.Wait()
	return reps
}
