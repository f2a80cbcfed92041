package instructions

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/tools"
)

// FileName is the project instructions' file on the session's other
// executors: only AGENTS.md is read there.
const FileName = "AGENTS.md"

// Files reads a file of an executor's workspace.
type Files interface {
	ReadFile(ctx context.Context, name string) ([]byte, error)
}

// Executors adds the project instructions of the session's executors
// besides the default to one conversation: the AGENTS.md at an executor's
// workspace root (its working directory) follows the result of the
// agent's first call of a tool there (a tools.Placed tool routed to it),
// once per conversation. Like a Follower's, the reminder is part of the
// call's result, so it is journaled with it; Seed finds it in a resumed
// conversation, and Restore brings it back after a compaction that drops
// it. It is safe for concurrent use.
type Executors struct {
	// files returns the files of the executor name; false for the default
	// or an executor the session does not have.
	files func(name string) (Files, bool)

	mu sync.Mutex
	// added maps each executor whose instructions are in the context (or
	// were looked for: it had none) to the tool call whose result
	// carries them (replacement: the last compaction's); order has them
	// in the order they were first added.
	added map[string]string
	order []string
}

// NewExecutors returns the Executors of one conversation, reading each
// executor's files through files.
func NewExecutors(files func(name string) (Files, bool)) *Executors {
	return &Executors{files: files, added: map[string]string{}}
}

// executorHeader finds the executors a reminder holds the instructions of.
var executorHeader = regexp.MustCompile(`(?m)^Project instructions of executor ([a-z0-9-]+), from ` + FileName + `:$`)

// Used returns the reminder that follows the result of a call (id) run on
// executor name: its instructions when the conversation does not hold them
// yet, "" otherwise, or when the executor has none.
func (e *Executors) Used(ctx context.Context, id, name string) string {
	if name == "" {
		return ""
	}
	e.mu.Lock()
	_, in := e.added[name]
	e.mu.Unlock()
	if in {
		return ""
	}
	text, ok := e.read(ctx, name)
	if !ok {
		return "" // tried again at the next call
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, in := e.added[name]; in {
		return "" // a concurrent call added it
	}
	e.add(name, id)
	if text == "" {
		return ""
	}
	return reminder(name, text, false)
}

// add records name's instructions as carried by carrier; e.mu is held.
func (e *Executors) add(name, carrier string) {
	e.added[name] = carrier
	if !slices.Contains(e.order, name) {
		e.order = append(e.order, name)
	}
}

// read reads the instructions of executor name, within
// extensions.InstructionBudget: "" when it has none, false when they
// cannot be read (the executor is gone, say).
func (e *Executors) read(ctx context.Context, name string) (string, bool) {
	f, ok := e.files(name)
	if !ok {
		return "", false
	}
	b, err := f.ReadFile(ctx, FileName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", true
	case err != nil:
		return "", false
	}
	text := strings.TrimSpace(string(b))
	if len(text) > extensions.InstructionBudget {
		text = text[:extensions.InstructionBudget] + "\n" + extensions.TruncatedMarker
	}
	return text, true
}

// reminder is the reminder of executor name's instructions text.
func reminder(name, text string, restored bool) string {
	intro := " of another executor, added after the first tool call there."
	if restored {
		intro = " of another executor, which the conversation held before it was compacted."
	}
	return reminderStart + intro + " They apply to the calls that run on that executor.\n\n" +
		"Project instructions of executor " + name + ", from " + FileName + ":\n" + text + "\n</system-reminder>"
}

// Seed records the executors whose instructions a resumed conversation
// already holds, in its tool results and in a compaction's replacement.
func (e *Executors) Seed(history []provider.Message) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for carrier, text := range carriers(history) {
		for _, sm := range executorHeader.FindAllStringSubmatch(text, -1) {
			if _, in := e.added[sm[1]]; !in {
				e.add(sm[1], carrier)
			}
		}
	}
}

// Restore returns what a compaction that keeps tail must bring back: the
// instructions of the executors whose carrying results the tail does not
// hold, read again, "" when there are none.
func (e *Executors) Restore(ctx context.Context, tail []provider.Message) string {
	kept := map[string]bool{}
	for _, m := range tail {
		for _, c := range m.Content {
			if c.Type == provider.ContentToolResult {
				kept[c.ToolCallID] = true
			}
		}
	}
	e.mu.Lock()
	var gone []string
	for _, name := range e.order {
		if c, in := e.added[name]; in && !kept[c] {
			gone = append(gone, name)
			delete(e.added, name)
		}
	}
	e.mu.Unlock()
	var parts []string
	for _, name := range gone {
		text, ok := e.read(ctx, name)
		if !ok {
			continue
		}
		e.mu.Lock()
		e.add(name, replacement)
		e.mu.Unlock()
		if text != "" {
			parts = append(parts, reminder(name, text, true))
		}
	}
	return strings.Join(parts, "\n\n")
}

// Tools returns t with the reminders after the results of the calls that
// run on another executor.
func (e *Executors) Tools(t Tools) Tools { return &elsewhere{Tools: t, e: e} }

type elsewhere struct {
	Tools
	e *Executors
}

func (w *elsewhere) Run(ctx context.Context, id, name string, args json.RawMessage) tools.Result {
	res := w.Tools.Run(ctx, id, name, args)
	if res.Await != nil || res.Suspended {
		return res
	}
	t, ok := w.Lookup(name)
	if !ok {
		return res
	}
	p, ok := tools.PlacedOf(t)
	if !ok {
		return res
	}
	if r := w.e.Used(context.WithoutCancel(ctx), id, p.ExecutorOf(args)); r != "" {
		res.Content += "\n\n" + r
	}
	return res
}
