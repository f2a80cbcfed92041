// Package provider puts the model APIs aerie talks to behind one small
// interface: a Provider takes a Request (messages, tools, an output cap) and
// streams the model's answer back as a sequence of Parts.
//
// Implementations: the Anthropic Messages API (Anthropic), the OpenAI Chat
// Completions API (OpenAIChat, also used for OpenAI-compatible servers such as
// vLLM, Ollama and LiteLLM), the OpenAI Responses API (OpenAIResponses) and a
// Scripted provider that replays a file of model turns for demos and CI dry
// runs (see ParseScript for the format). New selects one from a Config:
// provider openai speaks the Responses API unless Config.API says
// "chat-completions"; provider openai-compatible speaks Chat Completions
// unless Config.API says "responses".
//
// The types here are provider-neutral: a conversation is a list of Messages
// whose Content is text, reasoning, tool calls and tool results; each
// implementation translates them to and from its wire format, so the agent
// loop, the journal and the tests never see an SDK type. An Accumulator (or
// Collect) turns a stream back into a complete Response: the assistant
// Message, the token Usage and the StopReason.
//
// Retries are the SDKs' own. Both retry 408, 409, 429, 5xx and connection
// errors (unless the server sends x-should-retry: false), up to
// Config.MaxRetries times, and both wait what retry-after-ms or retry-after
// (seconds or an HTTP date) say; without those headers they back off
// exponentially from half a second to at most eight, with jitter. The
// Anthropic SDK honours any retry-after; the OpenAI SDK honours up to two
// minutes and gives up on a longer one, returning the 429. Only the request
// is retried: an error in the middle of a stream ends the call, because its
// parts have already been delivered.
//
// Every call has its own deadline (Config.Timeout), which bounds connecting,
// retrying and reading the whole stream. API keys come from the caller, are
// never read from the environment (the SDKs' ANTHROPIC_* and OPENAI_*
// variables are ignored), and never formatted or logged (see Secret).
package provider
