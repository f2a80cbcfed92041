// Package tools provides the agent's built-in tools — bash, process, the file
// tools, apply_patch — and the Registry the agent loop calls them through.
//
// A tool never returns a Go error for something the model did: bad
// arguments, a missing file, a command that failed or timed out all come
// back as a Result with IsError set, for the model to read and correct.
// Every result passes through one Capper, so no tool can flood the
// model's context; with compression on, it replaces large structured
// outputs with views of them (package compress), and the retrieve tool
// returns the originals it kept.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Tool is one tool the model can call.
type Tool interface {
	// Name is the name the model calls the tool by.
	Name() string
	// Description tells the model what the tool does and when to use it.
	Description() string
	// Schema is the JSON schema of the tool's arguments, an object schema.
	Schema() json.RawMessage
	// Run runs one call with its JSON arguments. Failures the model should
	// see are results with IsError set; Run does not panic on bad input.
	Run(ctx context.Context, call json.RawMessage) Result
}

// Result is what a tool call returns to the model.
type Result struct {
	Content string
	IsError bool
	// Process is how long the command the tool ran lived, from its start
	// to its exit as the executor saw them (executor.Exit.Duration); zero
	// for tools that run none. It is not shown to the model: it tells the
	// people watching a run the command's own time from the time around it.
	Process time.Duration
	// EndTurn, when set, ends the turn after this call, for the reason it
	// gives: the calls after it in the same response are not run, and the
	// run ends without another model request. A lifecycle hook that
	// answers continue: false sets it.
	EndTurn string
	// Usage is what the model requests the tool made itself used
	// (mixture_of_agents asks other models): the loop adds it to the
	// session's usage, where the token budget counts it. Not shown to the
	// model.
	Usage provider.Usage
	// Await, when set, pauses the session on this call: a hook asked a
	// person to approve it and nobody has decided. The call did not run;
	// the loop journals it as pending, leaves the calls after it unrun,
	// and ends the run awaiting approval (Content is not the model's to
	// read: a resumed run answers the call once someone decided).
	Await *Await
	// Suspended says the call stopped before it ended, its work kept to go
	// on when the session resumes: a subagent stopped with its run, or one
	// paused for a person's approval (then Await.Request is what it asks).
	// The loop journals no result for it, so that a resumed run finds the
	// call pending and continues it (Content is not the model's to read).
	Suspended bool
	// Entries are journaled before the call's result, in the session's
	// stream: what the call did that the transcript records besides its
	// result (a subagent's outcome). The model does not see them.
	Entries []transcript.Payload
}

// Await is a tool call left to a person's approval.
type Await struct {
	// Hooks are the hooks that asked, and Reason their reasons.
	Hooks  []string
	Reason string
	// Request, for a suspended call, is the request of the call it waits
	// on, in another session of the tree (a subagent's), which journaled
	// it.
	Request *transcript.ApprovalRequest
}

// errorf returns an error result.
func errorf(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true}
}

// Files is the part of the executor the file tools use: every path is
// resolved inside the workspace, and nothing outside it can be reached.
type Files interface {
	ReadFile(ctx context.Context, name string) ([]byte, error)
	WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error
	Stat(ctx context.Context, name string) (executor.FileInfo, error)
	ReadDir(ctx context.Context, name string) ([]executor.FileInfo, error)
	Walk(ctx context.Context, name string, opts executor.WalkOptions) iter.Seq2[executor.FileInfo, error]
}

// Commands is the part of the executor bash, process and apply_patch use.
type Commands interface {
	Start(ctx context.Context, cmd executor.Command) (executor.Process, error)
	List(ctx context.Context) ([]executor.ProcessInfo, error)
	Teardown(ctx context.Context, id string) (process.Report, error)
}

// skipDirs are the directories the file tools never descend into.
var skipDirs = []string{".git"}

// decode parses a call's arguments into v, strictly: unknown fields are
// an error, so a misspelt argument is reported rather than ignored.
func decode(tool string, call json.RawMessage, v any) *Result {
	if len(bytes.TrimSpace(call)) == 0 {
		call = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(call))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		r := errorf("%s: invalid arguments: %v", tool, err)
		return &r
	}
	if dec.More() {
		r := errorf("%s: invalid arguments: trailing data after the JSON object", tool)
		return &r
	}
	return nil
}

// argPath is the argument of the file tools that names the file or
// directory they act on, relative to the workspace root.
const argPath = "path"

// required reports the first of the named fields that is empty.
func required(tool string, fields ...string) *Result {
	for i := 0; i+1 < len(fields); i += 2 {
		if strings.TrimSpace(fields[i+1]) == "" {
			r := errorf("%s: missing required argument %q", tool, fields[i])
			return &r
		}
	}
	return nil
}

// schema builds a JSON object schema from a properties map and the
// required names. It panics on a value that cannot be encoded, which
// would be a programming error in a tool definition.
func schema(props map[string]any, req ...string) json.RawMessage {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(req) > 0 {
		s["required"] = req
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tool schema: %v", err))
	}
	return b
}

func prop(typ, desc string) map[string]any {
	return map[string]any{"type": typ, "description": desc}
}

// enum is a string property that takes one of values.
func enum(desc string, values ...string) map[string]any {
	p := prop("string", desc)
	p["enum"] = values
	return p
}

// Registry holds the tools offered to the model, in order, and runs calls
// by name with every result capped.
//
// A registered tool's Name, Description and Schema are read once, when the
// registry first describes its tools, and kept: every model request offers
// them, and building a schema costs an encoding each time. A tool whose
// description changes is registered again in a new registry, as a reload
// of the extensions does.
type Registry struct {
	tools  []Tool
	byName map[string]Tool
	capper *Capper

	defsMu sync.Mutex
	defs   []provider.Tool // nil until Definitions, and after Register
}

// NewRegistry returns a registry whose results pass through capper (nil:
// not capped) and registers tools in order.
func NewRegistry(capper *Capper, tools ...Tool) (*Registry, error) {
	r := &Registry{byName: map[string]Tool{}, capper: capper}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t after the tools already registered. A second tool of
// the same name is refused.
func (r *Registry) Register(t Tool) error {
	name := t.Name()
	if name == "" {
		return fmt.Errorf("register tool: empty name")
	}
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("register tool %q: already registered", name)
	}
	r.tools = append(r.tools, t)
	r.byName[name] = t
	r.defsMu.Lock()
	r.defs = nil
	r.defsMu.Unlock()
	return nil
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Tools returns the registered tools in order.
func (r *Registry) Tools() []Tool { return append([]Tool(nil), r.tools...) }

// Definitions describes the tools to the model, in registration order.
// The slice is the caller's; the schemas are shared and must not be
// modified.
func (r *Registry) Definitions() []provider.Tool {
	r.defsMu.Lock()
	defer r.defsMu.Unlock()
	if r.defs == nil {
		r.defs = make([]provider.Tool, 0, len(r.tools))
		for _, t := range r.tools {
			r.defs = append(r.defs, provider.Tool{Name: t.Name(), Description: t.Description(), InputSchema: t.Schema()})
		}
	}
	return slices.Clone(r.defs)
}

// Run runs the call id of the tool name with its JSON arguments and caps
// the result. An unknown tool, invalid JSON or a panic in a tool is an
// error result, never a Go error.
func (r *Registry) Run(ctx context.Context, id, name string, args json.RawMessage) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = errorf("%s: internal error: %v", name, p)
		}
		// The original is kept even when the call was cancelled.
		res = r.capper.Cap(context.WithoutCancel(ctx), id, name, res)
	}()
	t, ok := r.byName[name]
	if !ok {
		names := make([]string, len(r.tools))
		for i, t := range r.tools {
			names[i] = t.Name()
		}
		return errorf("unknown tool %q; available tools: %s", name, strings.Join(names, ", "))
	}
	if len(bytes.TrimSpace(args)) > 0 && !json.Valid(args) {
		return errorf("%s: arguments are not valid JSON", name)
	}
	return t.Run(WithCallID(ctx, id), args)
}

type callIDKey struct{}

// WithCallID returns a context carrying the id of the model's tool call,
// which a Tool's Run does not otherwise receive: Registry.Run sets it, and
// decorators (hooks) read it with CallID.
func WithCallID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, callIDKey{}, id)
}

// CallID returns the tool call id ctx carries, "" if none.
func CallID(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

// Builtin returns the built-in tools in the order they are offered to
// the model: bash and process sharing the table bg of background processes
// (nil: a table of their own), then the file tools. The caller keeps bg to
// learn, when the session ends, which background groups are still running.
func Builtin(files Files, cmds Commands, bg *Background) []Tool {
	if bg == nil {
		bg = NewBackground(cmds)
	}
	return []Tool{
		NewBash(cmds, bg),
		NewProcess(bg),
		NewReadFile(files),
		NewWriteFile(files),
		NewEditFile(files),
		NewApplyPatch(files, cmds),
		NewListDirectory(files),
		NewTree(files),
		NewFindFiles(files),
		NewGrep(files),
	}
}
