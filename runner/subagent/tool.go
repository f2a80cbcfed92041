package subagent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Name is the tool's name; hooks also match it as Agent.
const Name = "spawn_agent"

// Spawner makes and runs a child agent: the session that offers the tool.
// Spawn returns an error only when the child could not be made (an unknown
// agent type, a store that failed); the error is for the model to read.
// How the child ended, however it ended, is the Outcome.
type Spawner interface {
	Spawn(ctx context.Context, req Request) (Outcome, error)
}

// Request is one child to spawn.
type Request struct {
	// ID is the child's session id: ChildID of the parent and CallID, so
	// that a resumed parent finds the child of a call left pending.
	ID uuid.UUID
	// CallID is the parent's spawn_agent call.
	CallID string
	// Task is the child's first user message.
	Task string
	// AgentType names the child's persona; empty is the session's own
	// system prompt.
	AgentType string
	// Toolset names the toolset that narrows the child's tools (never
	// beyond the parent's); empty is the persona's, or all of the
	// parent's.
	Toolset string
	// MaxTurns bounds the child's model requests; zero is no bound of its
	// own (the tree's budget still holds).
	MaxTurns int
	// Depth is the child's depth in the tree (the root's children are at 1).
	Depth int
	// Started, called once the child's session exists, tells the parent
	// the child's id.
	Started func(id uuid.UUID)
}

// Outcome is how a child ended.
type Outcome struct {
	Session uuid.UUID
	Result  agent.Result
}

// ChildID is the session id of the child that the spawn_agent call callID
// of session parent spawns: a name-based (version 5) UUID of the two, the
// same in every run, so that a parent resumed with the call pending finds
// the child's session and its journal. An empty callID (a call made
// outside a loop) gets a random id.
func ChildID(parent uuid.UUID, callID string) uuid.UUID {
	if callID == "" {
		return uuid.New()
	}
	return uuid.NewSHA1(parent, []byte(callID))
}

// Tool is spawn_agent for the agent at one depth of a tree.
type Tool struct {
	tree     *Tree
	depth    int
	parent   uuid.UUID
	spawner  Spawner
	children *Children
}

// NewTool returns the spawn_agent tool of the agent at depth (0 for the
// root) whose session is parent and whose children spawner makes;
// children, when not nil, tracks the ones running.
func NewTool(tree *Tree, depth int, parent uuid.UUID, spawner Spawner, children *Children) *Tool {
	if children == nil {
		children = &Children{}
	}
	return &Tool{tree: tree, depth: depth, parent: parent, spawner: spawner, children: children}
}

func (*Tool) Name() string { return Name }

func (t *Tool) Description() string {
	d := description
	if len(t.tree.types) > 0 {
		var b strings.Builder
		b.WriteString(d)
		b.WriteString("\n\nAgent types besides personas:")
		for _, ty := range t.tree.types {
			fmt.Fprintf(&b, "\n- %s", ty.Name)
			if desc := firstLine(ty.Description); desc != "" {
				b.WriteString(": " + desc)
			}
		}
		d = b.String()
	}
	return d
}

// firstLine is s up to its first line end, at most 300 bytes: a catalog
// entry, not the whole of a long description.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "…"
	}
	return s
}

const description = "Delegate a self-contained task to a subagent: a new agent with its own conversation, " +
	"which sees only the task you give it (say everything it needs), works with your tools, " +
	"and returns its final answer, how it ended and what it used. " +
	"Several spawn_agent calls in one response run at the same time. " +
	"agent_type picks a persona; toolset narrows its tools; max_turns bounds its model requests."

func (*Tool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"task":{"type":"string","description":"The task, with all the context the subagent needs."},` +
		`"agent_type":{"type":"string","description":` +
		`"A persona name (personas/<name>.toml) or a plugin agent (plugin:agent); empty is your own system prompt."},` +
		`"toolset":{"type":"string","description":` +
		`"A toolset name (toolsets.toml) narrowing the subagent's tools; never more than yours."},` +
		`"max_turns":{"type":"integer","minimum":1,"description":"The most model requests the subagent may make."}` +
		`},"required":["task"],"additionalProperties":false}`)
}

type args struct {
	Task      string `json:"task"`
	AgentType string `json:"agent_type"`
	Toolset   string `json:"toolset"`
	MaxTurns  int    `json:"max_turns"`
}

func parseArgs(call json.RawMessage) (args, error) {
	var a args
	if len(bytes.TrimSpace(call)) == 0 {
		call = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(call))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("invalid arguments: %w; "+
			"want {\"task\": \"...\"} with optional agent_type, toolset, max_turns", err)
	}
	switch {
	case strings.TrimSpace(a.Task) == "":
		return a, errors.New("missing required argument \"task\": say what the subagent should do")
	case a.MaxTurns < 0:
		return a, fmt.Errorf("max_turns %d: want 1 or more, or leave it out", a.MaxTurns)
	}
	return a, nil
}

func failed(format string, v ...any) tools.Result {
	return tools.Result{Content: Name + ": " + fmt.Sprintf(format, v...), IsError: true}
}

// Run spawns the child and waits for it; its result is the child's answer
// with a line saying how it ended, and it carries the SubagentOutcome the
// parent journals before the result.
func (t *Tool) Run(ctx context.Context, call json.RawMessage) tools.Result {
	a, err := parseArgs(call)
	if err != nil {
		return failed("%v", err)
	}
	callID := tools.CallID(ctx)
	child := ChildID(t.parent, callID)
	release, err := t.tree.admit(t.depth, child, a.AgentType)
	if err != nil {
		return failed("%v", err)
	}
	defer release()
	var id uuid.UUID
	req := Request{
		ID: child, CallID: callID, Task: a.Task, AgentType: a.AgentType, Toolset: a.Toolset,
		MaxTurns: a.MaxTurns, Depth: t.depth + 1,
		Started: func(child uuid.UUID) { id = child; t.children.add(child) },
	}
	out, err := t.spawner.Spawn(ctx, req)
	if id != uuid.Nil {
		t.children.done(id)
	}
	if err != nil {
		return failed("%v", err)
	}
	if res, ok := suspended(ctx, out); ok {
		return res
	}
	return result(req, out)
}

// Suspended reports whether a child that ended with res, in a run whose
// context is ctx, is to go on when the session resumes: it paused for a
// person's approval, or it was stopped with its run (a lost pod, a
// signal). Its parent's call stays pending for the resume, which
// continues the child from its journal.
func Suspended(ctx context.Context, res agent.Result) bool {
	return res.Outcome == transcript.OutcomeAwaitingApproval ||
		(res.Outcome == transcript.OutcomeCancelled && ctx.Err() != nil)
}

// suspended is the result of a suspended child (see Suspended): no result
// for the model, the call left pending, and the run paused on the request
// the child paused on.
func suspended(ctx context.Context, out Outcome) (tools.Result, bool) {
	r := out.Result
	if !Suspended(ctx, r) {
		return tools.Result{}, false
	}
	res := tools.Result{Suspended: true, Content: fmt.Sprintf("subagent %s: %s", out.Session, r.Outcome)}
	if a := r.Approval; r.Outcome == transcript.OutcomeAwaitingApproval && a != nil {
		req := *a
		if req.AgentID == "" { // the child's own call, not a grandchild's
			req.AgentID = out.Session.String()
		}
		res.Await = &tools.Await{Hooks: a.Hooks, Reason: a.Reason, Request: &req}
	}
	return res, true
}

// result is the tool result of a child that ran.
func result(req Request, out Outcome) tools.Result {
	r := out.Result
	u := r.Usage
	sum := sha256.Sum256([]byte(r.Answer))
	entry := transcript.SubagentOutcome{
		Session: out.Session, Outcome: r.Outcome, Summary: r.Reason, Usage: &u, CallID: req.CallID,
		AgentType: req.AgentType, AnswerDigest: "sha256:" + hex.EncodeToString(sum[:]),
	}
	var b strings.Builder
	answer := strings.TrimSpace(r.Answer)
	if answer == "" {
		answer = "(the subagent gave no answer)"
	}
	b.WriteString(answer)
	fmt.Fprintf(&b, "\n\noutcome: %s · %s · %s tokens · session %s", r.Outcome, plural(r.Turns, "turn"),
		thousands(u.InputTokens+u.OutputTokens), out.Session)
	if r.Outcome != transcript.OutcomeCompleted && r.Reason != "" {
		fmt.Fprintf(&b, "\nreason: %s", r.Reason)
	}
	return tools.Result{
		Content: b.String(), IsError: r.Outcome != transcript.OutcomeCompleted,
		Entries: []transcript.Payload{entry},
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
