package compaction

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/provider"
)

// Summarizer answers the summary request: an ordinary model request,
// through the session's provider or the one [compaction] model names.
// Every provider.Provider is one.
type Summarizer interface {
	Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error]
}

// MaxSummaryInput is the most serialized bytes of conversation the
// summarizer receives (the spec's limit).
const MaxSummaryInput = 262_144

// maxSummaryOutput caps the summary's tokens.
const maxSummaryOutput = 8_192

// maxPart caps each text of the rendered conversation, so that one large
// tool result cannot take the summarizer's whole input.
const maxPart = 16 << 10

// summaryInstructions is the system prompt of the summary request.
const summaryInstructions = "You summarize the first part of a conversation between a user and an AI coding agent, " +
	"so that the agent can continue the work with the summary in place of that part. The agent will see nothing of " +
	"it but your summary, followed by the most recent messages as they were.\n" +
	"\n" +
	"Write the summary in plain text, with these sections:\n" +
	"1. Task: what the user asked for, with every instruction and constraint they gave, quoting them where the " +
	"wording matters.\n" +
	"2. State: what has been done so far, and what was found: files read or changed (with their paths and what " +
	"changed), commands run and their results, errors met and how they were resolved.\n" +
	"3. Decisions: choices made and why, and approaches tried and abandoned.\n" +
	"4. Open: what remains to be done, and the step that was in progress when the conversation was cut.\n" +
	"\n" +
	"Be complete about facts the agent needs to continue (paths, names, identifiers, values, error messages); leave " +
	"out pleasantries and anything already superseded. Do not continue the conversation and do not call tools: answer " +
	"with the summary only."

// summaryRequest is the request that asks for a summary of input, with
// the user's focus instructions, if any, after the conversation.
func summaryRequest(input, instructions string, maxOutput int64) provider.Request {
	ask := "<conversation>\n" + input + "</conversation>\n\nSummarize the conversation above as instructed."
	if instructions = strings.TrimSpace(instructions); instructions != "" {
		ask += "\n\nThe user asked for this compaction with these instructions; follow them in the summary:\n" +
			"<instructions>\n" + instructions + "\n</instructions>"
	}
	return provider.Request{
		Messages: []provider.Message{
			provider.SystemMessage(summaryInstructions),
			provider.UserMessage(ask),
		},
		MaxOutputTokens: maxOutput,
	}
}

// summarize asks s for a summary of input and returns its text, and what
// the response used, an answer without text too.
func summarize(
	ctx context.Context, s Summarizer, input, instructions string, maxOutput int64,
) (string, provider.Usage, error) {
	resp, err := provider.Collect(s.Stream(ctx, summaryRequest(input, instructions, maxOutput)))
	if err != nil {
		return "", provider.Usage{}, err
	}
	text := strings.TrimSpace(resp.Message.Text())
	if text == "" {
		return "", resp.Usage, errors.New("the summarizer answered without text")
	}
	return text, resp.Usage, nil
}

// Replacement returns the text that stands in for the messages a
// compaction replaced: the summary, introduced for the model, and the
// child agents still running when it was made, which the spec has the
// summary name.
func Replacement(summary string, replaced int, pending []uuid.UUID) string {
	var b strings.Builder
	fmt.Fprintf(&b, "This conversation continues an earlier one whose first %d messages were compacted to save context. "+
		"The summary below stands in for them; the messages after it are the most recent ones, as they were.\n\n", replaced)
	b.WriteString("<summary>\n")
	b.WriteString(summary)
	b.WriteString("\n</summary>")
	if len(pending) > 0 {
		ids := make([]string, len(pending))
		for i, id := range pending {
			ids[i] = id.String()
		}
		fmt.Fprintf(&b, "\n\nChild agents still running when this summary was made, whose results are not in it: %s.",
			strings.Join(ids, ", "))
	}
	return b.String()
}

// Render serializes msgs for the summarizer in at most limit bytes: each
// message under a line naming its role, tool calls with their arguments,
// tool results with their call's id; reasoning is left out. Each text over
// a quarter of limit (at most 16 KiB) keeps its head and tail around a
// note of what was left out; when the whole is still over limit, the first
// message (the task, usually) and as many of the latest as fit are kept,
// with a note of how many were left out between them.
func Render(msgs []provider.Message, limit int) string {
	partLimit := min(maxPart, limit/4)
	parts := make([]string, len(msgs))
	total := 0
	for i, m := range msgs {
		parts[i] = renderMessage(m, partLimit)
		total += len(parts[i])
	}
	if total <= limit {
		return strings.Join(parts, "")
	}
	const noteMax = len("[9999999999 messages left out]\n\n")
	first := truncate(parts[0], max(limit-noteMax, 0))
	budget := limit - len(first) - noteMax
	from := len(parts)
	for from > 1 && len(parts[from-1]) <= budget {
		from--
		budget -= len(parts[from])
	}
	var b strings.Builder
	b.WriteString(first)
	if n := from - 1; n > 0 {
		fmt.Fprintf(&b, "[%d messages left out]\n\n", n)
	}
	for _, p := range parts[from:] {
		b.WriteString(p)
	}
	return truncate(b.String(), limit) // only a limit shorter than the note needs it
}

func renderMessage(m provider.Message, partLimit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s]\n", m.Role)
	for _, c := range m.Content {
		switch c.Type {
		case provider.ContentText:
			b.WriteString(clip(c.Text, partLimit))
		case provider.ContentToolCall:
			fmt.Fprintf(&b, "[tool call %s %s] %s", c.ToolCallID, c.ToolName, clip(c.Arguments, partLimit))
		case provider.ContentToolResult:
			status := ""
			if c.IsError {
				status = ", failed"
			}
			fmt.Fprintf(&b, "[tool result %s%s]\n%s", c.ToolCallID, status, clip(c.Text, partLimit))
		default:
			continue
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	return b.String()
}

// clip keeps the head and tail of a text longer than limit bytes, around a
// note of how many bytes were left out; the result is at most limit bytes
// (the note's length aside when limit is smaller than the note).
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	note := fmt.Sprintf("\n[%d bytes left out]\n", len(s))
	keep := max(limit-len(note), 0)
	head := truncate(s, keep/2)
	tail := s[runeAfter(s, len(s)-(keep-len(head))):]
	return head + note + tail
}

// truncate returns the longest prefix of s of at most n bytes that ends
// at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// runeAfter returns i, or the nearest index after it that starts a rune
// (len(s) if none does).
func runeAfter(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}
