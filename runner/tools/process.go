package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/executor"
)

// ProcessTool manages the commands bash started in the background.
type ProcessTool struct {
	bg *Background
}

// NewProcess returns the process tool for the background processes in bg.
func NewProcess(bg *Background) *ProcessTool { return &ProcessTool{bg: bg} }

func (*ProcessTool) Name() string { return "process" }

func (*ProcessTool) Description() string {
	return "Manage commands started with bash(background=true). " +
		"list: the background processes and their state. poll: output since the previous poll. " +
		"write: send input to the process (a newline is appended unless newline=false). " +
		"kill: terminate the process and its whole process group. poll, write and kill need the id."
}

// The process tool's actions.
const (
	actionList  = "list"
	actionPoll  = "poll"
	actionWrite = "write"
	actionKill  = "kill"
)

func (*ProcessTool) Schema() json.RawMessage {
	return schema(map[string]any{
		"action":  enum("What to do.", actionList, actionPoll, actionWrite, actionKill),
		"id":      prop("string", "The background process id returned by bash."),
		"input":   prop("string", "Input to send (write)."),
		"newline": prop("boolean", "Append a newline to the input (default true)."),
	}, "action")
}

type processArgs struct {
	Action  string `json:"action"`
	ID      string `json:"id"`
	Input   string `json:"input"`
	Newline *bool  `json:"newline"`
}

func (t *ProcessTool) Run(ctx context.Context, call json.RawMessage) Result {
	var a processArgs
	if r := decode("process", call, &a); r != nil {
		return *r
	}
	switch a.Action {
	case actionList:
		return t.list()
	case actionPoll, actionWrite, actionKill:
	case "":
		return errorf("process: missing required argument \"action\"")
	default:
		return errorf("process: unknown action %q; use list, poll, write or kill", a.Action)
	}
	if a.ID == "" {
		return errorf("process: %s needs the id of a background process", a.Action)
	}
	bp, err := t.bg.lookup(a.ID)
	if err != nil {
		return errorf("process: %v", err)
	}
	switch a.Action {
	case actionPoll:
		out, status := bp.poll()
		if out == "" {
			out = "[no new output]"
		}
		return Result{Content: fmt.Sprintf("%s\n[process %s: %s]", strings.TrimSuffix(out, "\n"), a.ID, status)}
	case actionWrite:
		in := a.Input
		if a.Newline == nil || *a.Newline {
			in += "\n"
		}
		if err := bp.write(in); err != nil {
			return errorf("process: write to %s (%s): %v", a.ID, bp.status(), err)
		}
		return Result{Content: fmt.Sprintf("wrote %d bytes to process %s", len(in), a.ID)}
	default: // kill
		rep, err := t.bg.cmds.Teardown(context.WithoutCancel(ctx), a.ID)
		if err != nil && !errors.Is(err, executor.ErrNotFound) {
			return errorf("process: kill %s: %v", a.ID, err)
		}
		// Let the collector see the end, so a poll after kill reports it.
		select {
		case <-bp.done:
		case <-time.After(2 * time.Second):
		}
		status := string(rep.Status)
		if status == "" {
			status = "already exited"
		}
		return Result{Content: fmt.Sprintf("process %s: %s", a.ID, status)}
	}
}

func (t *ProcessTool) list() Result {
	ps := t.bg.list()
	if len(ps) == 0 {
		return Result{Content: "no background processes"}
	}
	var sb strings.Builder
	for _, bp := range ps {
		fmt.Fprintf(&sb, "%s\t%s\tstarted %s\t%s\n",
			bp.p.ID(), bp.status(), bp.started.UTC().Format(time.RFC3339), oneLine(bp.command))
	}
	return Result{Content: sb.String()}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	if len(s) > 120 {
		s = s[:cutBack(s, 117)] + "..."
	}
	return s
}
