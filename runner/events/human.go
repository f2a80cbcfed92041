package events

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Human writes a run for a person at a terminal: the model's text as it
// streams, a line per tool call with its outcome, and a closing summary.
type Human struct {
	mu sync.Mutex
	w  io.Writer
	// midLine is true while streamed text has not ended with a newline.
	midLine bool
	err     error
}

// NewHuman returns a Human writer to w.
func NewHuman(w io.Writer) *Human { return &Human{w: w} }

// maxPreview is how much of a tool call's arguments or result a line shows.
const maxPreview = 160

// Observe writes e. A write error is kept (see Err) and later events are
// dropped: a closed terminal must not stop the agent.
func (h *Human) Observe(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return
	}
	if e.AgentID != "" {
		h.subagent(e)
		return
	}
	switch e.Type {
	case SessionStart:
		h.linef("● session %s · %s/%s", short(e.Session), e.Provider, e.Model)
	case TextDelta:
		if e.Text != "" {
			h.printf("%s", e.Text)
			h.midLine = !strings.HasSuffix(e.Text, "\n")
		}
	case ToolCall:
		h.linef("▸ %s %s", e.Tool, preview(e.Arguments))
	case ToolResult:
		mark := "✓"
		if e.IsError {
			mark = "✗"
		}
		h.linef("  %s %s (%s) %s", mark, e.Tool, e.Duration.Round(time.Millisecond), preview(e.Text))
	case Warning:
		h.linef("! %s", e.Reason)
	case Hook:
		// What hooks say to the user; their decisions show in the tool
		// results and the session's end.
		for _, m := range e.Messages {
			h.linef("◆ %s hook: %s", strings.SplitN(e.Status, ":", 2)[0], m)
		}
	case ApprovalRequested:
		line := fmt.Sprintf("⏸ %s %s awaits a person's approval (call %s)", e.Tool, preview(e.Arguments), e.CallID)
		if e.Reason != "" {
			line += ": " + e.Reason
		}
		h.linef("%s", line)
	case Reload:
		line := "↻ extensions " + e.Status
		if e.Reason != "" {
			line += ": " + e.Reason
		}
		h.linef("%s", line)
		for l := range strings.Lines(e.Text) {
			h.linef("  %s", strings.TrimRight(l, "\n"))
		}
	case Compaction:
		if c := e.Compaction; c != nil {
			h.linef("⇊ conversation compacted (%s): %d messages summarized · ~%d → ~%d tokens",
				c.Trigger, c.Messages, c.TokensBefore, c.TokensAfter)
		}
	case Result:
		h.linef("● result %s", e.Result)
	case SessionEnd:
		line := fmt.Sprintf("● %s after %d turns", e.Outcome, e.Turn)
		if e.Usage != nil {
			line += fmt.Sprintf(" · %d tokens in, %d out", e.Usage.InputTokens, e.Usage.OutputTokens)
		}
		if e.Reason != "" {
			line += " · " + e.Reason
		}
		h.linef("%s", line)
	}
}

// subagent writes an event of a child's loop: only its start and its end,
// so that children running at once do not interleave their text.
func (h *Human) subagent(e Event) {
	who := short(e.AgentID)
	if e.AgentType != "" {
		who += " (" + e.AgentType + ")"
	}
	switch e.Type {
	case SubagentStart:
		h.linef("  ↳ subagent %s started: %s", who, preview(e.Text))
	case SubagentStop:
		line := fmt.Sprintf("  ↳ subagent %s %s after %d turns", who, e.Outcome, e.Turn)
		if e.Reason != "" {
			line += " · " + e.Reason
		}
		h.linef("%s", line)
	}
}

// Err returns the first write error.
func (h *Human) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// linef writes a line of its own, ending streamed text first.
func (h *Human) linef(format string, args ...any) {
	if h.midLine {
		h.printf("\n")
		h.midLine = false
	}
	h.printf(format+"\n", args...)
}

// printf writes to h.w unless an earlier write failed, and keeps its error.
func (h *Human) printf(format string, args ...any) {
	if h.err == nil {
		_, h.err = fmt.Fprintf(h.w, format, args...)
	}
}

func preview(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxPreview {
		cut := maxPreview
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut-- // not inside a UTF-8 sequence
		}
		s = s[:cut] + "…"
	}
	return s
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
