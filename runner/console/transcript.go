package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/transcript"
)

// maxText bounds the text of one value shown (a tool result, an input):
// what is longer is cut there, and the export has all of it.
const maxText = 64 << 10

// maxDepth bounds how deep subagent threads nest in a transcript.
const maxDepth = 4

// item is one thing of a transcript as the page shows it: a message, a
// tool call with its result, a compaction, a fork or a note.
type item struct {
	Seq  int64
	Time time.Time
	// Kind is user, assistant, tool, compaction, fork, approval or note.
	Kind  string
	Title string
	// Text is the item's text, Detail what is shown collapsed under it.
	Text, Detail string
	Thinking     string
	// CompactedBy is the compaction that replaced the entry in the model's
	// context, 0 if none did.
	CompactedBy int64
	Tool        *toolView
	Fork        *transcript.Fork
}

// toolView is a tool call with its result and completion.
type toolView struct {
	CallID, Name, Input string
	Result              string
	HasResult, IsError  bool
	Status              transcript.ToolStatus
	Duration            time.Duration
	Error               string
	// Subagent is the thread of the subagent a spawn_agent call ran.
	Subagent *thread
	Outcome  *transcript.SubagentOutcome
}

// thread is a subagent's transcript nested in its parent's.
type thread struct {
	Session store.Session
	Items   []item
	// Missing says the subagent's session is not stored (never created,
	// or deleted).
	Missing bool
}

// redact is how every text of a stream is shown: credentials masked as in
// the report, and cut at maxText.
func redact(s string) string {
	s = layer.Redact(s)
	if len(s) > maxText {
		s = fmt.Sprintf("%s\n… (%d bytes more; the export has all of it)", s[:maxText], len(s)-maxText)
	}
	return s
}

// blockText is the text of content: its text blocks, an image as its
// media type; thinking separately.
func blockText(content []transcript.Block) (text, thinking string) {
	var t, th []string
	for _, b := range content {
		switch b.Type {
		case transcript.BlockText:
			t = append(t, b.Text)
		case transcript.BlockThinking:
			th = append(th, b.Text)
		case transcript.BlockImage:
			t = append(t, "[image "+b.MediaType+"]")
		case transcript.BlockToolUse:
		default:
			t = append(t, "["+string(b.Type)+"]")
		}
	}
	return redact(strings.Join(t, "\n\n")), redact(strings.Join(th, "\n\n"))
}

// prettyJSON is data indented, or as it is when it is not JSON.
func prettyJSON(data []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		return redact(string(data))
	}
	return redact(b.String())
}

// items turns a stream into the transcript's items, in order: a tool call
// is one item, its result and completion fold into it.
func items(entries []transcript.Entry) []item {
	b := itemBuilder{calls: map[string]int{}}
	for _, e := range entries {
		b.add(e)
	}
	return b.out
}

type itemBuilder struct {
	out   []item
	calls map[string]int // call id → index of its tool item
}

func (b *itemBuilder) push(e transcript.Entry, it item) {
	it.Seq, it.Time, it.CompactedBy = e.Seq, e.CreatedAt, e.CompactedBy
	b.out = append(b.out, it)
}

// tool is the tool item of call id, made at e when there is none yet.
func (b *itemBuilder) tool(e transcript.Entry, id string) *toolView {
	if i, ok := b.calls[id]; ok {
		return b.out[i].Tool
	}
	b.calls[id] = len(b.out)
	b.push(e, item{Kind: "tool", Tool: &toolView{CallID: id}})
	return b.out[len(b.out)-1].Tool
}

func (b *itemBuilder) add(e transcript.Entry) {
	switch p := e.Payload.(type) {
	case transcript.UserMessage:
		text, th := blockText(p.Content)
		b.push(e, item{Kind: "user", Title: "User", Text: text, Thinking: th})
	case transcript.AssistantMessage:
		text, th := blockText(p.Content)
		if text != "" || th != "" {
			b.push(e, item{Kind: "assistant", Title: "Assistant", Text: text, Thinking: th})
		}
		for _, bl := range p.Content {
			if bl.Type == transcript.BlockToolUse {
				t := b.tool(e, bl.ID)
				t.Name, t.Input = bl.Name, prettyJSON(bl.Input)
			}
		}
	case transcript.ToolCall:
		t := b.tool(e, p.CallID)
		t.Name, t.Input = p.Name, prettyJSON(p.Input)
	case transcript.ToolResult:
		t := b.tool(e, p.CallID)
		t.Result, _ = blockText(p.Content)
		t.HasResult, t.IsError = true, p.IsError
	case transcript.ToolCompletion:
		t := b.tool(e, p.CallID)
		t.Status, t.Duration, t.Error = p.Status, p.Duration, redact(p.Error)
	case transcript.SubagentOutcome:
		if p.CallID != "" {
			o := p
			o.Summary = redact(o.Summary)
			b.tool(e, p.CallID).Outcome = &o
		}
	case transcript.Compaction:
		text, _ := blockText(p.Replacement)
		b.push(e, item{Kind: "compaction", Title: compactionTitle(p), Detail: text})
	case transcript.Fork:
		f := p
		b.push(e, item{Kind: "fork", Title: fmt.Sprintf("Forked from %s at entry %d", p.Source, p.SourceSeq), Fork: &f})
	case transcript.ApprovalRequest:
		b.push(e, item{Kind: "approval", Title: "Awaits approval: " + p.Tool,
			Text: redact(p.Preview), Detail: redact(p.Reason)})
	case transcript.Usage:
		// The header shows the latest; each snapshot is noise in the thread.
	default:
		if it, ok := note(e.Payload); ok {
			b.push(e, it)
		}
	}
}

func compactionTitle(c transcript.Compaction) string {
	t := fmt.Sprintf("Compaction (%s): %d messages replaced by a summary", c.Provenance.Trigger, c.Provenance.Messages)
	if c.Provenance.TokensBefore > 0 {
		t += fmt.Sprintf(", %d → %d tokens", c.Provenance.TokensBefore, c.Provenance.TokensAfter)
	}
	return t
}

// note is the one-line item of a record entry.
func note(p transcript.Payload) (item, bool) {
	it := item{Kind: "note"}
	switch p := p.(type) {
	case transcript.ProviderChange:
		it.Title = "Provider: " + p.Provider
	case transcript.ModelChange:
		it.Title = "Model: " + p.Model
	case transcript.PersonaChange:
		it.Title = "Persona: " + orDefault(p.Persona)
	case transcript.ReasoningChange:
		it.Title = "Reasoning effort: " + orDefault(p.Effort)
	case transcript.Checkpoint:
		it.Title = fmt.Sprintf("Turn %d ended: %s", p.Turn, p.Outcome)
		it.Detail = redact(p.Result)
	case transcript.Layers:
		names := make([]string, 0, len(p.Layers))
		for _, l := range p.Layers {
			names = append(names, l.Name)
		}
		it.Title = "Run started with layers: " + strings.Join(names, ", ")
	case transcript.HookVerdict:
		it.Title = strings.TrimSpace(fmt.Sprintf("Hooks on %s %s: %s", p.Event, p.Tool, orDefault(p.Decision)))
		it.Detail = redact(strings.TrimSpace(p.Reason + "\n" + p.Context))
	case transcript.ApprovalDecision:
		verb := "Denied"
		if p.Allowed {
			verb = "Approved"
		}
		it.Title = fmt.Sprintf("%s call %s (by %s)", verb, p.CallID, orDefault(p.By))
		it.Detail = redact(p.Reason)
	case transcript.WorkspaceDiff:
		it.Title = "Workspace diff against " + p.Base
		it.Detail = redact(p.Stat)
	case transcript.Result:
		it.Title = "Result"
		it.Detail = prettyJSON(p.Value)
	default:
		it.Title = string(p.EntryKind())
	}
	return it, true
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// nest reads the threads of the subagents the spawn_agent calls of its
// items ran, depth levels down from a session at depth.
func nest(ctx context.Context, st Store, tenant string, parent uuid.UUID, its []item, depth int) error {
	if depth >= maxDepth {
		return nil
	}
	for _, it := range its {
		if it.Tool == nil || it.Tool.Name != subagent.Name {
			continue
		}
		id := subagent.ChildID(parent, it.Tool.CallID)
		if it.Tool.Outcome != nil && it.Tool.Outcome.Session != uuid.Nil {
			id = it.Tool.Outcome.Session
		}
		th := &thread{}
		it.Tool.Subagent = th
		sess, err := st.Session(ctx, tenant, id)
		if err != nil {
			th.Missing = true
			continue
		}
		entries, err := st.Entries(ctx, tenant, id)
		if err != nil {
			return fmt.Errorf("read subagent %s: %w", id, err)
		}
		th.Session, th.Items = sess, items(entries)
		if err := nest(ctx, st, tenant, id, th.Items, depth+1); err != nil {
			return err
		}
	}
	return nil
}
