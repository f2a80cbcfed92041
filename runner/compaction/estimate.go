package compaction

import (
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

// BytesPerToken is the estimate's rate: one token for every four bytes of
// text, the figure the model APIs give for English and close to what they
// count for code and JSON. A provider's own count, when a response reports
// it, replaces the estimate for everything that response saw.
const BytesPerToken = 4

// messageOverhead is the estimated tokens every message costs besides its
// content (role, separators), and contentOverhead those of each content
// (its type, a tool call's id and name).
const (
	messageOverhead = 4
	contentOverhead = 4
)

// Estimate returns the estimated tokens of a message: its text, reasoning,
// tool names, ids and arguments at BytesPerToken, plus a few for its
// framing. It is O(number of contents): a string's length is known without
// reading it.
func Estimate(m provider.Message) int64 {
	n := int64(messageOverhead)
	for _, c := range m.Content {
		b := len(c.Text) + len(c.Signature) + len(c.ToolCallID) + len(c.ToolName) + len(c.Arguments)
		n += contentOverhead + int64(b+BytesPerToken-1)/BytesPerToken
	}
	return n
}

// EstimateText returns the estimated tokens of a text, such as a system
// prompt.
func EstimateText(s string) int64 { return int64(len(s)+BytesPerToken-1) / BytesPerToken }

// EstimateTools returns the estimated tokens of tool definitions.
func EstimateTools(tools []provider.Tool) int64 {
	var n int64
	for _, t := range tools {
		n += contentOverhead + EstimateText(t.Name) + EstimateText(t.Description) + EstimateText(string(t.InputSchema))
	}
	return n
}

// Tracker keeps the estimated size of a conversation as it grows, in time
// proportional to what was added since the last look, not to the
// conversation's length: it holds the running sum of the messages'
// estimates, so that the size of any tail is one subtraction.
//
// When the provider reports the tokens a response's request and answer
// took (transcript.Usage.ContextTokens), that count stands for every
// message up to the response, and only what came after it is estimated.
//
// The zero value is ready to use. A Tracker follows one conversation: the
// messages it is given must extend those it was given before, or be
// shorter (a compacted conversation), which starts the count over.
type Tracker struct {
	// sums[i] is the estimate of the first i messages; len(sums) is one
	// more than the messages seen.
	sums []int64
	// fixed is the estimate of what every request carries besides the
	// messages: the system prompt and the tools.
	fixed int64
	// reported is the provider's count for the first reportedAt messages,
	// when reportedAt > 0; requests is the Usage.Requests it came with,
	// so that each report is taken once.
	reported   int64
	reportedAt int
	requests   int64
}

// SetFixed sets the estimate of what every request carries besides the
// messages (see EstimateText, EstimateTools).
func (t *Tracker) SetFixed(tokens int64) { t.fixed = tokens }

// Observe brings the count up to msgs, the conversation without its system
// prompt, and takes u's count when it reports a response not seen yet: that
// response is the last assistant message of msgs.
func (t *Tracker) Observe(msgs []provider.Message, u transcript.Usage) {
	t.extend(msgs)
	if u.Requests == t.requests || u.ContextTokens <= 0 {
		return
	}
	t.requests = u.Requests
	k := len(msgs)
	for k > 0 && msgs[k-1].Role != provider.RoleAssistant {
		k-- // the tool results and user messages after the response
	}
	if k > 0 {
		t.reported, t.reportedAt = u.ContextTokens, k
	}
}

// extend brings the estimate up to msgs, starting over if they are fewer
// than those seen.
func (t *Tracker) extend(msgs []provider.Message) {
	if len(t.sums) == 0 || len(msgs) < len(t.sums)-1 {
		t.restart()
	}
	for i := len(t.sums) - 1; i < len(msgs); i++ {
		t.sums = append(t.sums, t.sums[i]+Estimate(msgs[i]))
	}
}

// restart forgets the messages (and the provider's count of them), keeping
// the fixed part and the last report's request number, so that the report
// of a conversation since replaced is not taken again.
func (t *Tracker) restart() {
	t.sums = append(t.sums[:0], 0)
	t.reported, t.reportedAt = 0, 0
}

// Tokens returns the estimated tokens of the next request: the provider's
// count of what its last response saw plus the estimate of the messages
// after it, or, before any report, the estimate of everything.
func (t *Tracker) Tokens() int64 {
	if len(t.sums) == 0 {
		return t.fixed
	}
	total := t.sums[len(t.sums)-1]
	if t.reportedAt > 0 && t.reportedAt < len(t.sums) {
		return t.reported + total - t.sums[t.reportedAt]
	}
	return t.fixed + total
}

// Tail returns the estimated tokens of the messages from index from on.
func (t *Tracker) Tail(from int) int64 {
	if len(t.sums) == 0 {
		return 0
	}
	return t.sums[len(t.sums)-1] - t.sums[min(from, len(t.sums)-1)]
}

// Len returns the number of messages counted.
func (t *Tracker) Len() int { return max(len(t.sums)-1, 0) }
