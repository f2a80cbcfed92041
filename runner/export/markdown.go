package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// markdown writes a transcript for a person. It walks the entries once,
// remembering the tool calls the model made (so that a result names its
// tool and the harness's record of a call is not shown twice) and the
// latest usage snapshot, which ends the transcript.
type markdown struct {
	w *bufio.Writer
	// calls names the tool of each call id seen so far.
	calls map[string]string
	// shown are the call ids whose call the transcript already shows.
	shown     map[string]bool
	lastUsage *transcript.Usage
	// command and original are Input's OriginalCommand and Original.
	command  func(callID string) string
	original func(callID string) ([]byte, error)
	// depth is 0 for the exported session, 1 for its subagents, and so
	// on: headings go that many levels deeper.
	depth int
	// children are the session's subagent sessions by id; nested are
	// those already rendered under their outcome.
	children map[uuid.UUID]Input
	nested   map[uuid.UUID]bool
}

func writeMarkdown(w io.Writer, in Input) error {
	bw := bufio.NewWriter(w)
	renderMarkdown(bw, in, 0)
	return bw.Flush()
}

// renderMarkdown writes the transcript of in at a depth of the tree. Each
// child is rendered under the subagent outcome that names it, which its
// parent journals right after the spawning call; a child without one (it
// had not finished) comes at the end, before the usage.
func renderMarkdown(w *bufio.Writer, in Input, depth int) {
	m := &markdown{
		w: w, calls: map[string]string{}, shown: map[string]bool{}, depth: depth,
		command: in.OriginalCommand, original: in.Original,
		children: make(map[uuid.UUID]Input, len(in.Children)), nested: map[uuid.UUID]bool{},
	}
	for _, c := range in.Children {
		m.children[c.Session.ID] = c
	}
	m.header(in)
	for _, e := range in.Entries {
		m.entry(e)
	}
	var pending []Input
	for _, c := range in.Children {
		if !m.nested[c.Session.ID] {
			pending = append(pending, c)
		}
	}
	if len(pending) > 0 {
		m.printf("%s Subagent sessions without an outcome\n\n", m.hashes(2))
		m.printf("No subagent outcome in this session names them: they had not finished when it was exported, " +
			"or the run that spawned them ended first.\n\n")
		for _, c := range pending {
			m.child(c)
		}
	}
	m.usage()
}

// hashes is the Markdown of a heading of level at the writer's depth;
// Markdown has six levels.
func (m *markdown) hashes(level int) string { return strings.Repeat("#", min(6, level+m.depth)) }

// child renders a subagent session as a block quote nested in this
// transcript, one level deeper.
func (m *markdown) child(c Input) {
	m.nested[c.Session.ID] = true
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	renderMarkdown(bw, c, m.depth+1)
	_ = bw.Flush() // a bytes.Buffer does not fail
	for l := range strings.Lines(strings.TrimRight(buf.String(), "\n")) {
		if l = strings.TrimRight(l, "\n"); l == "" {
			m.printf(">\n")
		} else {
			m.printf("> %s\n", l)
		}
	}
	m.printf("\n")
}

// printf writes to the buffered writer, which keeps the first error for
// Flush to return.
func (m *markdown) printf(format string, args ...any) { _, _ = fmt.Fprintf(m.w, format, args...) }

func (m *markdown) header(in Input) {
	s := in.Session
	if m.depth == 0 {
		m.printf("# Session %s\n\n", s.ID)
	} else {
		m.printf("%s Subagent session %s\n\n", m.hashes(1), s.ID)
	}
	field := func(name, value string) {
		if value != "" {
			m.printf("- %s: %s\n", name, value)
		}
	}
	field("Label", s.Label)
	field("Kind", s.Kind)
	if !s.CreatedAt.IsZero() {
		field("Created", s.CreatedAt.UTC().Format(time.RFC3339))
	}
	field("Provider", s.Settings.Provider)
	field("Model", s.Settings.Model)
	field("Persona", s.Settings.Persona)
	field("Reasoning effort", s.Settings.Reasoning)
	if s.ParentID != uuid.Nil {
		field("Parent session", s.ParentID.String())
	}
	compacted := 0
	for _, e := range in.Entries {
		if e.CompactedBy != 0 {
			compacted++
		}
	}
	field("Entries", fmt.Sprint(len(in.Entries)))
	m.printf("\n")
	if compacted > 0 {
		m.printf("%d entries are marked compacted: a compaction checkpoint replaced them in the model's context "+
			"with its summary. They are shown as they were.\n\n", compacted)
	}
}

// heading starts the section of an entry: its sequence number, what it is
// and, for a compacted entry, the checkpoint that replaced it.
func (m *markdown) heading(level int, e transcript.Entry, title string) {
	m.printf("%s #%d · %s%s\n\n", m.hashes(level), e.Seq, title, compactedMark(e))
}

// note is an entry of one line: a record rather than a message.
func (m *markdown) note(e transcript.Entry, format string, args ...any) {
	m.printf("`#%d` %s%s\n\n", e.Seq, fmt.Sprintf(format, args...), compactedMark(e))
}

func compactedMark(e transcript.Entry) string {
	if e.CompactedBy == 0 {
		return ""
	}
	return fmt.Sprintf(" · compacted by #%d", e.CompactedBy)
}

func (m *markdown) entry(e transcript.Entry) {
	switch p := e.Payload.(type) {
	case transcript.UserMessage:
		m.heading(2, e, "User")
		m.blocks(p.Content)
	case transcript.AssistantMessage:
		m.heading(2, e, "Assistant")
		m.blocks(p.Content)
	case transcript.ToolCall:
		m.toolCall(e, p)
	case transcript.ToolResult:
		m.toolResult(e, p)
	case transcript.ToolCompletion:
		m.toolCompletion(e, p)
	case transcript.ProviderChange:
		m.note(e, "provider: %s", p.Provider)
	case transcript.ModelChange:
		m.note(e, "model: %s", p.Model)
	case transcript.PersonaChange:
		m.note(e, "persona: %s", orDefault(p.Persona))
	case transcript.ReasoningChange:
		m.note(e, "reasoning effort: %s", orDefault(p.Effort))
	case transcript.Usage:
		m.lastUsage = &p
	case transcript.Checkpoint:
		m.note(e, "turn %d ended: %s", p.Turn, p.Outcome)
	case transcript.Compaction:
		m.compaction(e, p)
	case transcript.Fork:
		m.note(e, "forked from session %s at entry %d: the entries through #%d were copied from it",
			p.Source, p.SourceSeq, p.SourceSeq)
	case transcript.SubagentOutcome:
		m.subagent(e, p)
	case transcript.Layers:
		names := make([]string, len(p.Layers))
		for i, l := range p.Layers {
			names[i] = fmt.Sprintf("%s (%s)", l.Name, l.Kind)
		}
		m.note(e, "extension layers of this run: %s", orNone(strings.Join(names, ", ")))
	case transcript.HookVerdict:
		m.hookVerdict(e, p)
	case transcript.WorkspaceDiff:
		m.note(e, "workspace diff against %s: %s (aerie session diff shows it)", p.Base, diffSummary(p))
	default:
		m.note(e, "an entry of kind %T", e.Payload)
	}
}

// subagent writes a subagent's outcome and, nested under it, the child
// session's transcript.
func (m *markdown) subagent(e transcript.Entry, o transcript.SubagentOutcome) {
	title := fmt.Sprintf("Subagent %s: %s", o.Session, o.Outcome)
	if o.CallID != "" {
		title += fmt.Sprintf(" · for `%s` · `%s`", orUnknown(m.calls[o.CallID]), o.CallID)
	}
	m.heading(3, e, title)
	var facts []string
	if o.AgentType != "" {
		facts = append(facts, "agent type "+o.AgentType)
	}
	if u := o.Usage; u != nil {
		facts = append(facts, fmt.Sprintf("%d input and %d output tokens", u.InputTokens, u.OutputTokens))
	}
	if o.AnswerDigest != "" {
		facts = append(facts, "answer "+o.AnswerDigest)
	}
	if len(facts) > 0 {
		m.printf("%s.\n\n", strings.Join(facts, " · "))
	}
	if o.Summary != "" {
		m.printf("%s\n\n", strings.TrimRight(o.Summary, "\n"))
	}
	if c, ok := m.children[o.Session]; ok && !m.nested[o.Session] {
		m.child(c)
	}
}

// blocks writes message content: text as it is (the model writes
// Markdown), thinking folded away, tool calls with their arguments.
func (m *markdown) blocks(content []transcript.Block) {
	for _, b := range content {
		switch b.Type {
		case transcript.BlockThinking:
			if b.Text != "" {
				m.printf("<details><summary>Thinking</summary>\n\n%s\n\n</details>\n\n", strings.TrimRight(b.Text, "\n"))
			}
		case transcript.BlockToolUse:
			m.calls[b.ID] = b.Name
			m.shown[b.ID] = true
			m.printf("**Tool call** `%s` · `%s`\n\n", b.Name, b.ID)
			m.arguments(b.Input)
		case transcript.BlockImage:
			m.printf("[image: %s, %d bytes]\n\n", orUnknown(b.MediaType), len(b.Data))
		default:
			if b.Text != "" {
				m.printf("%s\n\n", strings.TrimRight(b.Text, "\n"))
			}
		}
	}
}

// arguments writes a tool call's arguments: indented JSON, or the text the
// model sent when it is not JSON.
func (m *markdown) arguments(input json.RawMessage) {
	in := bytes.TrimSpace(input)
	var s string
	if len(in) > 0 && in[0] == '"' && json.Unmarshal(in, &s) == nil {
		in = bytes.TrimSpace([]byte(s)) // arguments held as a JSON string
	}
	if len(in) == 0 {
		return
	}
	if pretty, ok := indentJSON(in); ok {
		m.fenced("json", pretty)
		return
	}
	m.fenced("", string(in))
}

// indentJSON returns data indented, with the characters JSON encoders
// escape for HTML (<, >, &) as they are, which a person reads better; the
// keys of objects come sorted.
func indentJSON(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers as written, not through float64
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return "", false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return "", false
	}
	return b.String(), true
}

// toolCall shows a call the harness ran without a model response (a
// hook's); the harness's record of a call the model made adds nothing to
// the assistant message that holds it.
func (m *markdown) toolCall(e transcript.Entry, c transcript.ToolCall) {
	m.calls[c.CallID] = c.Name
	if m.shown[c.CallID] {
		return
	}
	m.shown[c.CallID] = true
	m.heading(3, e, fmt.Sprintf("Tool call by aerie `%s` · `%s`", c.Name, c.CallID))
	m.arguments(c.Input)
}

func (m *markdown) toolResult(e transcript.Entry, r transcript.ToolResult) {
	title := fmt.Sprintf("Result of `%s` · `%s`", orUnknown(m.calls[r.CallID]), r.CallID)
	if r.IsError {
		title += " · error"
	}
	m.heading(3, e, title)
	var texts []string
	for _, b := range r.Content {
		switch {
		case b.Type == transcript.BlockImage:
			texts = append(texts, fmt.Sprintf("[image: %s, %d bytes]", orUnknown(b.MediaType), len(b.Data)))
		case b.Text != "":
			texts = append(texts, b.Text)
		}
	}
	if len(texts) == 0 {
		m.printf("(no output)\n\n")
		return
	}
	text := strings.Join(texts, "\n\n")
	m.fenced("", text)
	if Shortened(text, r.CallID) {
		m.shortened(r.CallID)
	}
}

// Shortened reports whether a tool result's text is one the model saw
// shortened with its original kept: a compressed view, or a capped output
// whose full text was kept, both of which say where.
func Shortened(text, callID string) bool {
	return strings.Contains(text, "retrieve(handle="+callID+")") ||
		strings.Contains(text, " bytes dropped; full output in ")
}

// shortened says, under a shortened result, how to read its original,
// and shows it when the export inlines originals.
func (m *markdown) shortened(callID string) {
	switch {
	case m.command != nil:
		m.printf("The model saw this result shortened. The original: `%s`\n\n", m.command(callID))
	default:
		m.printf("The model saw this result shortened; its original was kept.\n\n")
	}
	if m.original == nil {
		return
	}
	b, err := m.original(callID)
	if err != nil {
		m.printf("Original of `%s`: not available (%v).\n\n", callID, err)
		return
	}
	m.printf("Original of `%s` (%d bytes):\n\n", callID, len(b))
	m.fenced("", string(b))
}

func (m *markdown) toolCompletion(e transcript.Entry, c transcript.ToolCompletion) {
	msg := fmt.Sprintf("`%s` %s", orUnknown(m.calls[c.CallID]), c.Status)
	if c.Duration > 0 {
		msg += " in " + c.Duration.Round(time.Millisecond).String()
	}
	if c.Error != "" {
		msg += ": " + c.Error
	}
	m.note(e, "%s", msg)
}

func (m *markdown) compaction(e transcript.Entry, c transcript.Compaction) {
	m.heading(2, e, "Compaction checkpoint")
	p := c.Provenance
	facts := []string{"trigger " + orUnknown(p.Trigger)}
	if p.Messages > 0 {
		facts = append(facts, fmt.Sprintf("%d messages replaced", p.Messages))
	}
	if p.TokensBefore > 0 || p.TokensAfter > 0 {
		facts = append(facts, fmt.Sprintf("%d → %d tokens", p.TokensBefore, p.TokensAfter))
	}
	if p.Model != "" {
		facts = append(facts, "summarized by "+strings.TrimPrefix(p.Provider+"/"+p.Model, "/"))
	}
	facts = append(facts, fmt.Sprintf("the context keeps the entries from #%d", c.FirstKept))
	m.printf("%s.\n\n", strings.Join(facts, " · "))
	var texts []string
	for _, b := range c.Replacement {
		if b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	m.printf("The summary that replaced the earlier entries:\n\n")
	for l := range strings.Lines(strings.Join(texts, "\n\n")) {
		m.printf("> %s\n", strings.TrimRight(l, "\n"))
	}
	m.printf("\n")
}

func (m *markdown) hookVerdict(e transcript.Entry, v transcript.HookVerdict) {
	what := "hooks at " + v.Event
	if v.Tool != "" {
		what += fmt.Sprintf(" for `%s`", v.Tool)
	}
	var parts []string
	if v.Decision != "" {
		parts = append(parts, v.Decision)
	}
	if v.Reason != "" {
		parts = append(parts, v.Reason)
	}
	if a := v.Approval; a != nil {
		verdict := "denied"
		if a.Allowed {
			verdict = "allowed"
		}
		parts = append(parts, fmt.Sprintf("approval %s by policy %s", verdict, orUnknown(a.Policy)))
	}
	if v.Stop {
		parts = append(parts, "stopped the turn: "+orUnknown(v.StopReason))
	}
	if len(v.UpdatedInput) > 0 {
		parts = append(parts, "rewrote the arguments")
	}
	if v.Context != "" {
		parts = append(parts, "added context")
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%d ran", len(v.Runs)))
	}
	m.note(e, "%s: %s", what, strings.Join(parts, "; "))
}

// usage ends the transcript with the session's totals, the latest usage
// snapshot's.
func (m *markdown) usage() {
	m.printf("%s Usage\n\n", m.hashes(2))
	u := m.lastUsage
	if u == nil {
		m.printf("No usage recorded.\n")
		return
	}
	m.printf("| | |\n| --- | ---: |\n")
	for _, r := range []struct {
		name string
		n    int64
	}{
		{"Input tokens", u.InputTokens},
		{"Output tokens", u.OutputTokens},
		{"Cache read tokens", u.CacheReadTokens},
		{"Cache write tokens", u.CacheWriteTokens},
		{"Reasoning tokens", u.ReasoningTokens},
		{"Requests", u.Requests},
		{"Context tokens (last request)", u.ContextTokens},
	} {
		m.printf("| %s | %d |\n", r.name, r.n)
	}
	if u.CostUSD > 0 {
		m.printf("| Cost (USD) | %.4f |\n", u.CostUSD)
	}
}

// fenced writes text as a fenced code block whose fence is longer than
// any run of backticks in it, so that no output can close it early.
func (m *markdown) fenced(lang, text string) {
	longest, run := 0, 0
	for _, r := range text {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	m.printf("%s%s\n%s\n%s\n\n", fence, lang, strings.TrimRight(text, "\n"), fence)
}

func orDefault(s string) string {
	if s == "" {
		return "the default"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// diffSummary is the last line of a workspace diff's stat ("2 files
// changed, ..."), or what the diff says of itself without one.
func diffSummary(d transcript.WorkspaceDiff) string {
	stat := strings.TrimSpace(d.Stat)
	switch {
	case d.Error != "":
		return "incomplete: " + d.Error
	case stat == "":
		return "no changes"
	}
	if i := strings.LastIndexByte(stat, '\n'); i >= 0 {
		stat = stat[i+1:]
	}
	return strings.TrimSpace(stat)
}
