package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/executor"
)

const (
	bashDefaultTimeout = 120
	bashMaxTimeout     = 3600
)

// Bash runs shell commands in the workspace.
type Bash struct {
	cmds Commands
	bg   *Background
	// Env is the commands' environment; empty means the executor's default
	// allow-listed environment.
	Env []string
}

// NewBash returns the bash tool. Background commands are recorded in bg,
// which the process tool shares; a nil bg disables background mode.
func NewBash(cmds Commands, bg *Background) *Bash {
	return &Bash{cmds: cmds, bg: bg}
}

func (*Bash) Name() string { return "bash" }

func (*Bash) Description() string {
	return "Run a bash command in the workspace and return its combined standard output and error, " +
		"followed by the exit code when it is not zero. The command runs in its own process group, " +
		"which is torn down when it times out (default 120 s, at most 3600 s). " +
		"Set validation=true for tests, builds and linters: the script stops at the first failing command " +
		"(errexit, pipefail). Set background=true for servers and watchers: the call returns a process id " +
		"at once, ignores the timeout, and the process tool polls, writes to or kills it. " +
		"validation and background cannot be combined."
}

func (*Bash) Schema() json.RawMessage {
	return schema(map[string]any{
		"command":    prop("string", "The bash script to run."),
		"timeout":    prop("integer", "Timeout in seconds (default 120, max 3600); ignored in background mode."),
		"validation": prop("boolean", "Stop at the first failing command (set -o errexit -o pipefail)."),
		"background": prop("boolean", "Start the command in the background and return its process id."),
	}, "command")
}

type bashArgs struct {
	Command    string `json:"command"`
	Timeout    *int   `json:"timeout"`
	Validation bool   `json:"validation"`
	Background bool   `json:"background"`
}

func (b *Bash) Run(ctx context.Context, call json.RawMessage) Result {
	var a bashArgs
	if r := decode("bash", call, &a); r != nil {
		return *r
	}
	if r := required("bash", "command", a.Command); r != nil {
		return *r
	}
	if a.Validation && a.Background {
		return errorf("bash: validation and background cannot be combined")
	}
	cmd := executor.Command{Script: a.Command, Shell: "bash", Env: b.Env, CombinedOutput: true}
	if a.Background {
		if b.bg == nil {
			return errorf("bash: background mode is not available")
		}
		id, err := b.bg.start(ctx, cmd, a.Command)
		if err != nil {
			return errorf("bash: start: %v", err)
		}
		return Result{Content: fmt.Sprintf("started background process %s\n"+
			"Use the process tool with id %q to poll its output, write to it or kill it.", id, id)}
	}
	timeout := bashDefaultTimeout
	if a.Timeout != nil {
		timeout = *a.Timeout
	}
	if timeout <= 0 || timeout > bashMaxTimeout {
		return errorf("bash: timeout must be between 1 and %d seconds, got %d", bashMaxTimeout, timeout)
	}
	if a.Validation {
		cmd.Script = "set -o errexit -o pipefail\n" + a.Command
	}
	return b.foreground(ctx, cmd, time.Duration(timeout)*time.Second)
}

func (b *Bash) foreground(ctx context.Context, cmd executor.Command, timeout time.Duration) Result {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := b.cmds.Start(tctx, cmd)
	if err != nil {
		return errorf("bash: start: %v", err)
	}
	// Whatever the command left behind (`server &`) ends with the call; the
	// teardown is waited for so that nothing outlives the result.
	defer func() {
		cancel()
		_, err := b.cmds.Teardown(context.WithoutCancel(ctx), p.ID())
		_ = err // ErrNotFound: already gone
	}()
	out, _ := io.ReadAll(p.Stdout())
	exit, werr := p.Wait(context.WithoutCancel(ctx))
	res := bashResult(ctx, tctx, timeout, out, exit, werr)
	res.Process = exit.Duration
	return res
}

// bashResult is what the model reads of a finished foreground command.
func bashResult(ctx, tctx context.Context, timeout time.Duration, out []byte, exit executor.Exit, werr error) Result {
	var sb strings.Builder
	sb.Write(out)
	timedOut := errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil && exit.TornDown
	cancelled := ctx.Err() != nil
	switch {
	case werr != nil:
		return errorf("%s\nbash: wait: %v", sb.String(), werr)
	case timedOut:
		appendLine(&sb, fmt.Sprintf("[command timed out after %s; its process group was torn down]", timeout))
		return Result{Content: sb.String(), IsError: true}
	case cancelled:
		appendLine(&sb, "[command cancelled]")
		return Result{Content: sb.String(), IsError: true}
	case exit.Signal != "":
		appendLine(&sb, fmt.Sprintf("[killed by %s]", exit.Signal))
		return Result{Content: sb.String(), IsError: true}
	case exit.Code != 0:
		appendLine(&sb, fmt.Sprintf("[exit code %d]", exit.Code))
		return Result{Content: sb.String(), IsError: true}
	}
	if sb.Len() == 0 {
		return Result{Content: "[no output]"}
	}
	return Result{Content: sb.String()}
}

func appendLine(sb *strings.Builder, line string) {
	if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
		sb.WriteByte('\n')
	}
	sb.WriteString(line)
}
