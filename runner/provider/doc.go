// Package provider puts the model APIs aerie talks to behind one small
// interface: a Provider takes a Request (messages, tools, an output cap) and
// streams the model's answer back as a sequence of Parts.
//
// The types here are provider-neutral: a conversation is a list of Messages
// whose Content is text, reasoning, tool calls and tool results; each
// provider translates them to and from its wire format, so the agent loop,
// the journal and the tests never see an SDK type, and this package links
// none. An Accumulator (or Collect) turns a stream back into a complete
// Response: the assistant Message, the token Usage and the StopReason. An
// APIError is a model API's error answer, whichever the API; ContextWindow
// knows the context windows of the models.
//
// The providers of the real APIs live in packages of their own, each with
// its SDK: provider/anthropic (the Anthropic Messages API) and
// provider/openai (the OpenAI Responses and Chat Completions APIs, the
// latter also spoken by OpenAI-compatible servers such as vLLM, Ollama and
// LiteLLM). The program picks one from a Config. This package has the
// Scripted provider, which replays a file of model turns for demos and CI
// dry runs (see ParseScript for the format), and what the providers share:
// the Config and its checks, the conversation's rules (SplitSystem), the
// logging of retried attempts (RetryLog) and the errors of a call
// (CallError).
//
// Retries are the SDKs' own: a provider of a real API retries 408, 409,
// 429, 5xx and connection errors (unless the server sends x-should-retry:
// false) up to Config.MaxRetries times, waiting what retry-after-ms or
// retry-after say, else backing off exponentially; each provider's package
// says how its SDK waits. Only the request is retried: an error in the
// middle of a stream ends the call, because its parts have already been
// delivered.
//
// Every call has its own deadline (Config.Timeout), which bounds connecting,
// retrying and reading the whole stream. Within it, a stream that sends
// nothing for Config.StreamIdleTimeout fails its attempt with ErrStreamIdle
// (see IdleTimeout); an attempt that stalled before it delivered a part is
// made again like a connection error, up to Config.MaxRetries times. An
// answer larger than Config.MaxAnswerBytes is cut and fails the call with
// ErrAnswerTooLarge, without a retry, so that a misbehaving server cannot
// run the caller out of memory (see Guard). API keys come from the caller, are
// never read from the environment (the SDKs' ANTHROPIC_* and OPENAI_*
// variables are ignored), and never formatted or logged (see Secret).
package provider
