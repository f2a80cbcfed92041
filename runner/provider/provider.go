package provider

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
)

// Provider is a model API.
//
// Stream sends one request and returns the model's answer as a sequence of
// parts. The request is sent when iteration starts, not when Stream is called,
// and ctx must stay alive until iteration ends; breaking out of the loop early
// closes the connection. A successful stream ends with exactly one PartFinish.
// An error is the last element of the sequence: after a non-nil error the
// iterator yields nothing more.
//
// Implementations are safe for concurrent use.
type Provider interface {
	// Name is the provider's name as Config.Provider spells it, for session
	// records and logs.
	Name() string
	Stream(ctx context.Context, req Request) iter.Seq2[Part, error]
}

// Request is one call to a model.
type Request struct {
	// Messages is the conversation so far. System messages, if any, come first.
	Messages []Message `json:"messages"`
	// Tools are the tools the model may call.
	Tools []Tool `json:"tools,omitempty"`
	// MaxOutputTokens caps the tokens the model may produce in this response;
	// zero means the provider's Config.MaxOutputTokens, and then its default.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
}

// Tool is a tool definition the model can call.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON schema of the tool's arguments, an object schema.
	// Empty means a tool without arguments.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// Role says who a message is from.
type Role string

// The roles of a conversation.
const (
	// RoleSystem is the system prompt. System messages must come before every
	// other message, because Anthropic and the Responses API take the system
	// prompt apart from the conversation.
	RoleSystem Role = "system"
	// RoleUser is the user (or the agent on the user's behalf).
	RoleUser Role = "user"
	// RoleAssistant is the model.
	RoleAssistant Role = "assistant"
	// RoleTool carries the results of the model's tool calls, one ToolResult
	// content per call.
	RoleTool Role = "tool"
)

// Message is one message of a conversation.
type Message struct {
	Role    Role      `json:"role"`
	Content []Content `json:"content"`
}

// ContentType says what a Content holds.
type ContentType string

// The kinds of content.
const (
	ContentText       ContentType = "text"
	ContentReasoning  ContentType = "reasoning"
	ContentToolCall   ContentType = "tool_call"
	ContentToolResult ContentType = "tool_result"
)

// Content is one piece of a message. Which fields are set depends on Type.
type Content struct {
	Type ContentType `json:"type"`

	// Text is the text of a text or reasoning content, and the output of a tool
	// result.
	Text string `json:"text,omitempty"`

	// Signature is the provider's opaque token for a reasoning content
	// (Anthropic's thinking signature). Anthropic needs it to accept the
	// reasoning back in a later request; reasoning without one is not sent back.
	Signature string `json:"signature,omitempty"`
	// Redacted marks reasoning the provider returned encrypted (Anthropic's
	// redacted_thinking): Signature holds the encrypted data and Text is empty.
	Redacted bool `json:"redacted,omitempty"`

	// ToolCallID links a tool call to its result.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolName is the name of the tool a tool call invokes.
	ToolName string `json:"tool_name,omitempty"`
	// Arguments is the JSON text of a tool call's arguments exactly as the
	// model produced it: it may be malformed, and the caller decides what to
	// do about that (usually: tell the model in the tool result).
	Arguments string `json:"arguments,omitempty"`
	// IsError marks a tool result that reports a failure. Anthropic has a field
	// for it; the OpenAI APIs do not, so there the Text alone must say so.
	IsError bool `json:"is_error,omitempty"`
}

// Text returns a text content.
func Text(text string) Content { return Content{Type: ContentText, Text: text} }

// ToolCall returns a tool call content.
func ToolCall(id, name, arguments string) Content {
	return Content{Type: ContentToolCall, ToolCallID: id, ToolName: name, Arguments: arguments}
}

// ToolResult returns a tool result content for the call with the given id.
func ToolResult(id, output string, isError bool) Content {
	return Content{Type: ContentToolResult, ToolCallID: id, Text: output, IsError: isError}
}

// SystemMessage returns a system message with one text content.
func SystemMessage(text string) Message {
	return Message{Role: RoleSystem, Content: []Content{Text(text)}}
}

// UserMessage returns a user message with one text content.
func UserMessage(text string) Message {
	return Message{Role: RoleUser, Content: []Content{Text(text)}}
}

// Text returns the message's text contents, concatenated.
func (m Message) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == ContentText {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// ToolCalls returns the message's tool call contents, in order.
func (m Message) ToolCalls() []Content {
	var calls []Content
	for _, c := range m.Content {
		if c.Type == ContentToolCall {
			calls = append(calls, c)
		}
	}
	return calls
}

// PartType says what a streamed Part carries.
type PartType string

// The kinds of streamed parts.
const (
	// PartTextDelta carries the next piece of the answer's text in Text.
	PartTextDelta PartType = "text_delta"
	// PartReasoningDelta carries the next piece of the model's reasoning
	// (thinking, reasoning summary) in Text.
	PartReasoningDelta PartType = "reasoning_delta"
	// PartReasoningEnd ends a reasoning block; Signature and Redacted are as in
	// Content. A redacted block has no deltas, only its end.
	PartReasoningEnd PartType = "reasoning_end"
	// PartToolCallStart starts a tool call: ToolCallID and ToolName.
	PartToolCallStart PartType = "tool_call_start"
	// PartToolCallDelta carries the next fragment of the call's JSON arguments
	// in Text. Calls may interleave; ToolCallID says which one it belongs to.
	PartToolCallDelta PartType = "tool_call_delta"
	// PartToolCallEnd ends the tool call ToolCallID.
	PartToolCallEnd PartType = "tool_call_end"
	// PartFinish ends a successful response with its Usage and StopReason.
	PartFinish PartType = "finish"
)

// Part is one element of a streamed response. Which fields are set depends on
// Type.
type Part struct {
	Type       PartType   `json:"type"`
	Text       string     `json:"text,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	Signature  string     `json:"signature,omitempty"`
	Redacted   bool       `json:"redacted,omitempty"`
	Usage      Usage      `json:"usage,omitzero"`
	StopReason StopReason `json:"stop_reason,omitempty"`
}

// Usage counts the tokens of one response.
type Usage struct {
	// InputTokens counts every input token, including those read from or
	// written to the prompt cache, so that it measures how much of the context
	// window the request used. (Anthropic reports cached tokens apart from
	// input_tokens; they are added here.)
	InputTokens int64 `json:"input_tokens" yaml:"input_tokens"`
	// OutputTokens counts the generated tokens, reasoning included.
	OutputTokens int64 `json:"output_tokens" yaml:"output_tokens"`
	// CacheReadTokens is the part of InputTokens read from the prompt cache.
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty" yaml:"cache_read_tokens,omitempty"`
	// CacheWriteTokens is the part of InputTokens written to the prompt cache.
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty" yaml:"cache_write_tokens,omitempty"`
	// CostUSD is what the response cost in US dollars, when its model's
	// price is known (see package pricing); providers leave it zero.
	CostUSD float64 `json:"cost_usd,omitempty" yaml:"-"`
}

// Add returns the sum of u and v, for totals over several responses.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		CostUSD:          u.CostUSD + v.CostUSD,
	}
}

// StopReason says why the model stopped. Values other than the constants are
// the provider's own reason, passed through.
type StopReason string

// The normalized stop reasons.
const (
	// StopEndTurn: the model finished its answer.
	StopEndTurn StopReason = "end_turn"
	// StopToolUse: the model wants the results of its tool calls.
	StopToolUse StopReason = "tool_use"
	// StopMaxTokens: the answer hit the output token cap and is cut off.
	StopMaxTokens StopReason = "max_tokens"
	// StopSequence: the model produced a stop sequence.
	StopSequence StopReason = "stop_sequence"
	// StopRefusal: the provider's safety system stopped the answer (Anthropic
	// refusal, OpenAI content_filter).
	StopRefusal StopReason = "refusal"
	// StopContextWindow: the input and output together filled the model's
	// context window (Anthropic model_context_window_exceeded).
	StopContextWindow StopReason = "context_window_exceeded"
)
