// Package session runs one agent session to its end without a person at a
// terminal: it creates, resumes or forks the stored session, journals it,
// gives the model the built-in tools over an executor and what the
// extension layers add, runs the loop, and then tears down the session's
// processes and records the outcome. It is what `aerie run` on a laptop and
// the runner in a pod share; they differ only in the Options they pass.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/memory"
	"github.com/aerie-run/aerie/runner/pricing"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/result"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
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

// ExitCode is the exit status of a run that ended with r. A run whose
// journal failed is a storage failure even when the agent completed (the
// journal failed at the final barrier, after the last answer): the stored
// session ends where the journal stopped, and 0 must mean the session
// completed, its record included.
func ExitCode(r agent.Result) int {
	switch r.Outcome {
	case transcript.OutcomeCompleted:
		if r.JournalErr != nil {
			return runconfig.ExitFailure
		}
		return runconfig.ExitCompleted
	case transcript.OutcomeModelError:
		return runconfig.ExitModel
	case transcript.OutcomeBudgetExceeded, transcript.OutcomeDeadlineExceeded:
		return runconfig.ExitBudget
	case transcript.OutcomeAwaitingApproval:
		return runconfig.ExitAwaitingApproval
	case transcript.OutcomeResultInvalid:
		return runconfig.ExitResultInvalid
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
	List(ctx context.Context, tenant string, opts store.ListOptions) ([]store.Session, error)
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

// Options configure a session.
type Options struct {
	// Session says which session runs.
	Session Spec
	// Prompt is the user's task. It may be empty only when resuming, to
	// continue the conversation as it stands.
	Prompt string
	// Model is what the session talks to.
	Model Model
	// Extensions say where the session's extensions come from — custom
	// tools, prompts, tool descriptions, toolsets, trust pins, hooks,
	// plugins, skills and MCP servers — and where it works: Dir is the
	// agent's working directory, recorded with the session, Workspace the
	// workspace root. When one of the Layers is the $AERIE_HOME layer, the
	// model is offered extension_manage, which writes there; its changes
	// are loaded again at the next turn boundary. Commands is not read:
	// the Executor runs the custom tools.
	Extensions LoadOptions

	// Persona names the persona (personas/<name>.toml in a layer) whose
	// prompt replaces Extensions.System and whose toolset applies when
	// Toolset is empty; empty is the default persona, Extensions.System
	// itself. A resumed or forked session switches to it, the switch
	// recorded.
	Persona string
	// Toolset names the toolset (toolsets.toml) that selects the tools
	// offered; empty offers the persona's toolset, or every tool.
	Toolset string
	// Approve decides the tool calls a hook asks a person to approve
	// (permissionDecision "ask"); nil is hooks.DenyApprovals, since
	// nobody can approve in a headless run.
	Approve hooks.ApprovalPolicy
	// Approvals are decisions on the tool call a resumed session paused
	// on (an AgentSession's spec.approvals); the last one for the
	// pending call is journaled, unless the journal has it already, and
	// applied. Decisions for other calls are ignored.
	Approvals []transcript.ApprovalDecision
	// Budget bounds the run: the whole session tree, the root and every
	// subagent it spawns, charge it (see package subagent).
	Budget Budget
	// Subagents limit the children the session may spawn with
	// spawn_agent ([subagents] in config.toml); nil is
	// subagent.DefaultLimits, and a MaxDepth of 0 offers no spawn_agent.
	Subagents *subagent.Limits
	// Result, when set, asks for a structured result: the model is
	// offered its submit_result tool (whatever the toolset), and the run
	// ends when it submits a valid one, or with OutcomeResultInvalid
	// when it cannot (see package result). A run that compacts (a
	// /compact prompt) asks for none.
	Result *result.Contract
	// Memory, when set, is the session's built-in memory: the model is
	// offered the memory tool over it (the toolset permitting), and the
	// system prompt carries it as it was when the run started.
	Memory *memory.Memory

	// Executor runs the tools, the hooks and the stdio MCP servers: it is
	// the default executor, named DefaultExecutor.
	Executor Executor
	// Executors are the session's other executors, by name. With any, the
	// built-in tools take an "executor" argument naming where a call runs
	// (the default when absent), and its tool hooks run there; custom tool
	// manifests may name one (executor = "NAME") and MCP server
	// declarations list theirs (executors: [local, NAME]; local is the
	// default); the AGENTS.md of an executor's workspace root is added
	// to the conversation once the agent first uses a tool there. Every
	// executor is torn down at the end; the workspace diff is the
	// default's. Subagents get the same executors.
	Executors []NamedExecutor
	// CallsDefault names the executor of Executors that a call of a
	// built-in tool runs on when it names none (an AgentSession's
	// spec.executors[].default); empty is the default executor. Custom
	// tools, session hooks and the workspace diff stay on the default
	// executor.
	CallsDefault string
	// Preserve, when set, keeps background process groups still running at
	// the end of the run (after every outcome except a spent budget), with a
	// durable record in this registry, as the spec says of headless runs.
	// Nil tears every group down (in a pod, nothing outlives the pod).
	Preserve *process.Registry
	// Tools are offered after the built-in and custom ones (MCP tools).
	Tools []tools.Tool
	// Wrap, when set, wraps every tool (hooks, permissions).
	Wrap func(tools.Tool) tools.Tool
	// Capper caps tool results, and compresses them when it says so; nil
	// means the default limits. Its Originals are set by Originals.
	Capper *tools.Capper
	// Originals makes where the full output of the session's capped and
	// compressed tool results is kept (sidecar files locally; StoreOriginals
	// in a pod); nil keeps none, and then nothing is compressed and the
	// retrieve tool is not offered.
	Originals func(session uuid.UUID) tools.Originals

	// MoA offers the mixture_of_agents tool when it names reference
	// models.
	MoA MoA

	// Observe receives the run's events. Nil discards them.
	Observe func(events.Event)
	// Journal tunes the journal writer.
	Journal journal.Options
	// Logger receives warnings. Nil discards.
	Logger *slog.Logger
}

// Spec says which session runs: a new one, or a stored one continued or
// copied, and whose it is.
type Spec struct {
	// Tenant scopes the session: the namespace in a pod, the working
	// directory locally.
	Tenant string
	// ID is the id of a new session or of a fork's child; uuid.Nil picks
	// one. In a pod it is the AgentSession's UID.
	ID uuid.UUID
	// Label names a new session or a fork's child.
	Label string
	// Resume continues the session it names (an id, a unique prefix or a
	// label); ForkFrom copies the session it names into a new child and
	// continues that. At most one is set.
	Resume, ForkFrom string
	// ForkAt is the last sequence number a fork copies; 0 copies through
	// the latest.
	ForkAt int64
}

// Model is the model a session talks to.
type Model struct {
	// Settings are the provider and model asked for. When resuming or
	// forking, empty fields take the stored ones, and fields that differ
	// from them are recorded as changes.
	Settings transcript.Settings
	// New makes the model for the settings in force. An error (an unknown
	// provider, missing credentials) stops the launch.
	New func(transcript.Settings) (agent.Model, error)
	// ContextWindow is the model's context window in tokens as the
	// session's submitter states it (an AgentSession's
	// spec.model.contextWindow): it overrides aerie's table of known
	// models. The window in force (in the Report) is what automatic
	// compaction keeps the conversation within; unknown, only a request
	// the model refuses as too large is compacted.
	ContextWindow int64
	// MaxOutputTokens is the cap of each response New's models are made
	// with (0: the provider's default); the window less it is what a
	// request's input may fill.
	MaxOutputTokens int64
	// CompactionModel names the model, of the session's provider, that
	// writes the compaction summaries ([compaction] model); empty is the
	// session's model.
	CompactionModel string
	// Prices are the prices of models in force (the bundled ones with the
	// configuration's overrides; nil is the bundled ones). A model with a
	// price has the cost of each response counted in the session's usage.
	Prices pricing.Table
}

// Budget bounds a run.
type Budget struct {
	// Stop are the budgets checked before each model request.
	Stop []agent.StopCondition
	// MaxDuration is the wall-time budget; zero is none.
	MaxDuration time.Duration
	// MaxCostUSD is the cost budget in US dollars, charged across the
	// session tree; zero is none. The session's model must then have a
	// price (see Model.Prices), or the launch fails.
	MaxCostUSD float64
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
	// ContextWindow is the model's context window in tokens:
	// Options.Model.ContextWindow, else the known window of the model, else 0
	// (unknown).
	ContextWindow int64
	// Extensions reports the artifacts found in the layers.
	Extensions layer.Report
	// Tools are the tools the model was offered.
	Tools []provider.Tool
	// Result is how the root's loop ended; when it spawned subagents, its
	// Usage is the whole tree's.
	Result   agent.Result
	ExitCode int
	// Subagents counts the children the tree spawned.
	Subagents int
	// AgentTypes are the children's counts by agent type, by name.
	AgentTypes []subagent.AgentType
	// Preserved are the background groups left running, with their records.
	Preserved []process.Record
	// Teardown reports the process groups ended after the run.
	Teardown []process.Report
	// Journal counts what the journal wrote. The entries a new session
	// was stored with count as its first batch.
	Journal journal.Stats
	// Diff is what the run changed in its workspace, as journaled at the
	// end; nil when the workspace is no git work tree.
	Diff *transcript.WorkspaceDiff
	// Structured is the structured result Options.Result asked for, when
	// the model submitted a valid one.
	Structured *Structured
}

// Structured is a run's structured result and where the session keeps it.
type Structured struct {
	// Value is the result, compact JSON.
	Value json.RawMessage
	// Seq is the sequence number of its transcript.Result entry.
	Seq int64
}

// Run runs one session. An error means the run did not start (a
// *ConfigError for problems of the caller's making); once it has started,
// how it ended is in the Report, including failures.
//
// The run goes through its phases in order — open, start, converse — and
// finish, deferred, ends whatever they began: it is the one place where
// the session's processes, MCP servers and journal are ended.
func Run(ctx context.Context, st Store, opts Options) (rep Report, err error) {
	r, err := newRun(st, opts)
	if err != nil {
		return Report{}, err
	}
	defer func() { rep, err = r.finish(ctx, err) }()
	if err := r.open(ctx); err != nil {
		return Report{}, err
	}
	if err := r.start(ctx); err != nil {
		return Report{}, err
	}
	r.converse(ctx)
	return Report{}, nil
}
