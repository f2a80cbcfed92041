package extensions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/tools"
)

// Custom tool timeouts, from the spec.
const (
	DefaultToolTimeout = 300 * time.Second
	MaxToolTimeout     = 3600 * time.Second
)

// ValidToolName reports whether name is a custom tool's name: 1 to 64
// lowercase letters, digits or underscores (^[a-z0-9_]{1,64}$). A loop
// rather than a regexp, which every start would otherwise compile.
func ValidToolName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := range len(name) {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// schemaTypes are the JSON schema type names a parameter may have.
var schemaTypes = []string{"string", "number", "integer", "boolean", "array", "object", "null"}

// Manifest is a custom tool's tools/<file>.toml.
type Manifest struct {
	// Name is the name the model calls the tool by.
	Name string `toml:"name" json:"name"`
	// Description tells the model what the tool does.
	Description string `toml:"description" json:"description"`
	// Command is the program and its fixed arguments. A relative program
	// path starts at the manifest's directory.
	Command []string `toml:"command" json:"command"`
	// TimeoutSecs bounds a call; nil means DefaultToolTimeout.
	TimeoutSecs *int64 `toml:"timeout_secs" json:"timeout_secs,omitempty"`
	// Sandbox is parsed and reported but, as in the spec, not enforced.
	Sandbox bool `toml:"sandbox" json:"sandbox,omitempty"`
	// Parameters are the model-facing input fields.
	Parameters map[string]Parameter `toml:"parameters" json:"parameters,omitempty"`
	// Executor names the session's executor the tool runs on; empty is
	// the default.
	Executor string `toml:"executor" json:"executor,omitempty"`
}

// Parameter is one input field of a custom tool.
type Parameter struct {
	// Type is a JSON schema type name.
	Type string `toml:"type" json:"type"`
	// Description is shown to the model.
	Description string `toml:"description" json:"description,omitempty"`
	// Enum lists the allowed values of a string parameter.
	Enum []string `toml:"enum" json:"enum,omitempty"`
	// Required parameters must be present in every call.
	Required bool `toml:"required" json:"required,omitempty"`
}

// Timeout returns the manifest's call timeout.
func (m Manifest) Timeout() time.Duration {
	if m.TimeoutSecs == nil {
		return DefaultToolTimeout
	}
	return time.Duration(*m.TimeoutSecs) * time.Second
}

// ParseManifest parses and validates a custom tool manifest. path is used
// in errors only. Unknown keys are errors.
func ParseManifest(path string, doc []byte) (Manifest, error) {
	var m Manifest
	if err := layer.DecodeTOML(path, doc, &m); err != nil {
		return Manifest{}, err
	}
	if err := m.validate(); err != nil {
		return Manifest{}, layer.Placed(path, doc, err)
	}
	return m, nil
}

func (m Manifest) validate() error {
	switch {
	case m.Name == "":
		return layer.FieldErrorf("name", "missing; name the tool with 1 to 64 lowercase letters, digits or underscores")
	case !ValidToolName(m.Name):
		return layer.FieldErrorf("name", "%q is not 1 to 64 lowercase letters, digits or underscores", m.Name)
	case strings.TrimSpace(m.Description) == "":
		return layer.FieldErrorf("description", "missing; the model needs a description to use the tool")
	case len(m.Command) == 0:
		return layer.FieldErrorf("command", "missing; give the program and its arguments, as [\"./run.sh\", \"--json\"]")
	case m.Command[0] == "":
		return layer.FieldErrorf("command", "the program (the first item) is empty")
	}
	for i, arg := range m.Command {
		if strings.IndexByte(arg, 0) >= 0 {
			return layer.FieldErrorf(fmt.Sprintf("command[%d]", i), "contains a NUL byte")
		}
	}
	if t := m.TimeoutSecs; t != nil && (*t < 1 || *t > int64(MaxToolTimeout/time.Second)) {
		return layer.FieldErrorf("timeout_secs", "%d is not between 1 and %d seconds", *t, int64(MaxToolTimeout/time.Second))
	}
	for _, name := range sortedKeys(m.Parameters) {
		p := m.Parameters[name]
		key := "parameters." + name
		switch {
		case name == "":
			return layer.FieldErrorf("parameters", "a parameter has an empty name")
		case p.Type == "":
			return layer.FieldErrorf(key+".type", "missing; give a JSON schema type (%s)", strings.Join(schemaTypes, ", "))
		case !slices.Contains(schemaTypes, p.Type):
			return layer.FieldErrorf(key+".type", "%q is not a JSON schema type (%s)", p.Type, strings.Join(schemaTypes, ", "))
		case p.Enum != nil && p.Type != "string":
			return layer.FieldErrorf(key+".enum", "allowed values are strings, so the type must be \"string\", not %q", p.Type)
		case p.Enum != nil && len(p.Enum) == 0:
			return layer.FieldErrorf(key+".enum", "is empty, so no value would be allowed")
		}
	}
	return nil
}

// Schema returns the JSON schema of the manifest's parameters: an object
// with a property per parameter and the required ones listed.
func (m Manifest) Schema() json.RawMessage {
	props := map[string]any{}
	var req []string
	for _, name := range sortedKeys(m.Parameters) {
		p := m.Parameters[name]
		prop := map[string]any{"type": p.Type}
		if p.Description != "" {
			prop["description"] = p.Description
		}
		if p.Enum != nil {
			prop["enum"] = p.Enum
		}
		props[name] = prop
		if p.Required {
			req = append(req, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if req != nil {
		s["required"] = req
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("marshal tool schema: %v", err)) // strings and maps only
	}
	return b
}

// Commands is the part of the executor custom tools use. The executor
// tears a command's process group down when the context it was started
// with ends, which is how timeouts and cancellation kill the group.
type Commands interface {
	Start(ctx context.Context, cmd executor.Command) (executor.Process, error)
	Teardown(ctx context.Context, id string) (process.Report, error)
}

// Failure classifies a failed custom tool call. Every failure is final:
// a custom tool call is never retried, since the program may have had
// side effects.
type Failure string

// Failures.
const (
	FailureInput     Failure = "input"     // the arguments are not a valid call
	FailureUntrusted Failure = "untrusted" // the tool lost its trust since it was loaded
	FailureSpawn     Failure = "spawn"     // the program could not be started
	FailureWait      Failure = "wait"      // waiting for it failed
	FailureTimeout   Failure = "timeout"   // it ran past its timeout
	FailureCanceled  Failure = "canceled"  // the call's context ended
	FailureExit      Failure = "exit"      // it exited non-zero or was killed
)

// Outcome is everything about one call of a custom tool.
type Outcome struct {
	// Result is what the model sees.
	Result tools.Result
	// Failure is empty on success.
	Failure Failure
	// Exit is how the program ended, when it was started.
	Exit executor.Exit
	// StdoutBytes and StderrBytes count what the program wrote; the
	// result keeps StreamKeep bytes of each end of each stream.
	StdoutBytes, StderrBytes int64
}

// Tool is a custom tool: a program described by a manifest. It
// implements runner/tools.Tool.
type Tool struct {
	manifest Manifest
	layer    layer.Layer
	path     string   // the manifest
	argv     []string // program resolved, then the fixed arguments
	dir      string   // the program's directory: its working directory
	schema   json.RawMessage
	cmds     Commands
	env      []string
	// verify re-checks trust before each call, for tools that needed a
	// pin: a manifest or script changed after loading must not run.
	verify func() layer.Verdict
}

var _ tools.Tool = (*Tool)(nil)

// NewTool returns the tool of manifest m, found at path in layer l, run by
// cmds with environment env (empty: the executor's secret-free default).
// It does not check trust; LoadTools does.
func NewTool(l layer.Layer, path string, m Manifest, cmds Commands, env []string) *Tool {
	program := m.Command[0]
	if !filepath.IsAbs(program) {
		program = filepath.Join(filepath.Dir(path), program)
	}
	argv := append([]string{program}, m.Command[1:]...)
	return &Tool{
		manifest: m, layer: l, path: path, argv: argv, dir: filepath.Dir(program),
		schema: m.Schema(), cmds: cmds, env: env,
	}
}

func (t *Tool) Name() string            { return t.manifest.Name }
func (t *Tool) Description() string     { return t.manifest.Description }
func (t *Tool) Schema() json.RawMessage { return t.schema }

// ExecutorOf implements tools.Placed: the executor the manifest names,
// "" for the default; the hooks of the tool's calls run there.
func (t *Tool) ExecutorOf(json.RawMessage) string {
	if t.manifest.Executor == DefaultExecutor {
		return ""
	}
	return t.manifest.Executor
}

// Manifest returns the tool's manifest.
func (t *Tool) Manifest() Manifest { return t.manifest }

// Layer returns the layer the tool comes from.
func (t *Tool) Layer() layer.Layer { return t.layer }

// Path returns the manifest's path.
func (t *Tool) Path() string { return t.path }

// Argv returns the command the tool runs: the resolved program and its
// fixed arguments.
func (t *Tool) Argv() []string { return slices.Clone(t.argv) }

// Run implements tools.Tool.
func (t *Tool) Run(ctx context.Context, call json.RawMessage) tools.Result {
	return t.Call(ctx, call).Result
}

// Call runs the program once: the call's JSON object and a newline on its
// standard input, its standard output as the result. Standard error is
// shown to the model only when the call fails.
func (t *Tool) Call(ctx context.Context, call json.RawMessage) Outcome {
	input, err := t.input(call)
	if err != nil {
		return t.fail(FailureInput, "invalid arguments: %v", err)
	}
	if t.verify != nil {
		if v := t.verify(); v.Status != layer.Trusted {
			return t.fail(FailureUntrusted, "not run: it is %s since it was loaded: %s", v.Status, v.Reason)
		}
	}
	if t.cmds == nil {
		return t.fail(FailureSpawn, "start %s: %v", t.argv[0], errNoCommands)
	}
	timeout := t.manifest.Timeout()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := t.cmds.Start(tctx, executor.Command{Argv: t.argv, Dir: t.dir, Env: t.env, Stdin: true})
	if err != nil {
		return t.fail(FailureSpawn, "start %s: %v", t.argv[0], err)
	}
	// Whatever the program left running ends with the call.
	defer func() {
		cancel()
		_, _ = t.cmds.Teardown(context.WithoutCancel(ctx), p.ID()) // ErrNotFound: already gone
	}()

	go func() {
		// A program that never reads its input makes this fail with
		// EPIPE once it exits; that is its business.
		in := p.Stdin()
		_, _ = in.Write(input)
		_ = in.Close()
	}()
	stdout, stderr := newHeadTail(StreamKeep), newHeadTail(StreamKeep)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(stdout, p.Stdout()) })
	wg.Go(func() { _, _ = io.Copy(stderr, p.Stderr()) })
	wg.Wait()
	exit, werr := p.Wait(context.WithoutCancel(ctx))

	o := Outcome{Exit: exit, StdoutBytes: stdout.total, StderrBytes: stderr.total}
	timedOut := errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	var status string
	switch {
	case werr != nil:
		o.Failure, status = FailureWait, fmt.Sprintf("[wait for %s: %v]", t.manifest.Name, werr)
	case timedOut && (exit.TornDown || exit.Code != 0):
		o.Failure, status = FailureTimeout,
			fmt.Sprintf("[%s timed out after %s; its process group was terminated]", t.manifest.Name, timeout)
	case ctx.Err() != nil && (exit.TornDown || exit.Code != 0):
		o.Failure, status = FailureCanceled, fmt.Sprintf("[%s canceled; its process group was terminated]", t.manifest.Name)
	case exit.Signal != "":
		o.Failure, status = FailureExit, fmt.Sprintf("[%s killed by %s]", t.manifest.Name, exit.Signal)
	case exit.Code != 0:
		o.Failure, status = FailureExit, fmt.Sprintf("[%s exited with code %d]", t.manifest.Name, exit.Code)
	}
	if o.Failure == "" {
		out := stdout.String()
		if out == "" {
			out = "[no output]"
		}
		o.Result = tools.Result{Content: out}
		return o
	}
	var sb strings.Builder
	if stdout.total > 0 {
		sb.WriteString(stdout.String())
		ensureNewline(&sb)
	}
	if stderr.total > 0 {
		sb.WriteString("[stderr]\n")
		sb.WriteString(stderr.String())
		ensureNewline(&sb)
	}
	sb.WriteString(status)
	o.Result = tools.Result{Content: sb.String(), IsError: true}
	return o
}

func ensureNewline(sb *strings.Builder) {
	if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
		sb.WriteByte('\n')
	}
}

func (t *Tool) fail(f Failure, format string, args ...any) Outcome {
	return Outcome{Failure: f, Result: tools.Result{
		Content: t.manifest.Name + ": " + fmt.Sprintf(format, args...), IsError: true,
	}}
}

// input checks a call's arguments against the parameters and returns them
// as one line of compact JSON and a newline.
func (t *Tool) input(call json.RawMessage) ([]byte, error) {
	call = bytes.TrimSpace(call)
	if len(call) == 0 {
		call = json.RawMessage("{}")
	}
	var args map[string]json.RawMessage
	if call[0] != '{' || json.Unmarshal(call, &args) != nil {
		return nil, errors.New("want a JSON object")
	}
	for _, name := range sortedKeys(t.manifest.Parameters) {
		p := t.manifest.Parameters[name]
		v, ok := args[name]
		if !ok || string(v) == "null" {
			if p.Required {
				return nil, fmt.Errorf("missing required parameter %q", name)
			}
			continue
		}
		if p.Enum != nil {
			var s string
			if json.Unmarshal(v, &s) != nil || !slices.Contains(p.Enum, s) {
				return nil, fmt.Errorf("parameter %q must be one of %s", name, quoteList(p.Enum))
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, call); err != nil {
		return nil, errors.New("want a JSON object")
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}
