package testenv

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ModelServer is a fake model API for tests: an HTTP server that answers each
// request with the next scripted Turn, in the real wire format of the endpoint
// the request was sent to, streamed (server-sent events) or not, as the
// request's "stream" field asks:
//
//   - POST /v1/messages: the Anthropic Messages API;
//   - POST /v1/chat/completions: the OpenAI Chat Completions API (also what
//     OpenAI-compatible servers speak);
//   - POST /v1/responses: the OpenAI Responses API.
//
// Turns are served in order whatever the endpoint, so one list of turns can
// drive any provider. The server records every request it receives, headers
// included, so that a test can check what the client sent, and how long it
// took to answer each (ServerTimes), so that a benchmark can tell the
// client's time from the server's. A request with no turn left, or to an
// unknown path, fails the test.
//
// A server given a context window (SetContextWindow) refuses every request
// whose estimated size (RequestTokens) exceeds it, as the real API would:
// with the API's own overflow status and body, or those of the
// OpenAI-compatible server it stands in for. A refused request is recorded
// (Overflow) and takes no turn, so a client that shrinks its conversation
// and sends it again gets the answer the turn holds.
//
// Each request records how many bytes of its body repeat the start of the
// previous request's body (ModelRequest.Prefix): the share a provider's
// prompt cache could reuse.
//
// Anthropic clients take URL() as their base URL; OpenAI clients take
// OpenAIURL(), which includes the /v1 that OpenAI base URLs carry.
type ModelServer struct {
	t   testing.TB
	srv *httptest.Server

	mu sync.Mutex
	// main is the script of every request no conversation claims.
	main     script
	requests []ModelRequest
	served   []time.Duration // parallel to requests; 0 until answered
	// answers is closed, and replaced, at each answer (see ServerTimes).
	answers chan struct{}
	// window is the context window requests are held to; zero tokens
	// means none.
	window ContextWindow
	// last is the body of the last request, for ModelRequest.Prefix.
	last []byte
	// conversations are the scripts of conversations apart from the
	// main one (see Conversation).
	conversations []*conversation
}

// conversation is the script of one conversation: the requests whose first
// user message starts with key.
type conversation struct {
	key string
	script
}

// script is a list of turns and how far they are answered.
type script struct {
	turns  []Turn
	next   int    // index of the first turn not yet answered
	done   []bool // parallel to turns: answered
	faults []int  // parallel to turns: faults already served
}

// add appends turns to the script.
func (sc *script) add(turns []Turn) {
	sc.turns = append(sc.turns, turns...)
	sc.done = append(sc.done, make([]bool, len(turns))...)
	sc.faults = append(sc.faults, make([]int, len(turns))...)
}

// remaining is the number of the script's turns not yet answered.
func (sc *script) remaining() int {
	n := 0
	for _, d := range sc.done {
		if !d {
			n++
		}
	}
	return n
}

// ContextWindow is the context window of a ModelServer's model.
type ContextWindow struct {
	// Tokens is the window's size; a request whose RequestTokens exceed it
	// is refused. Zero means no window.
	Tokens int64
	// Server is the OpenAI-compatible server whose overflow error
	// /v1/chat/completions answers with; empty is OpenAI's own. The other
	// endpoints answer as Anthropic and OpenAI do.
	Server CompatibleServer
}

// CompatibleServer names a server that speaks the Chat Completions API,
// for the shape of its context overflow error.
type CompatibleServer string

// The servers whose overflow errors the fake server can answer with, each
// with HTTP status 400. The bodies are those the servers send.
const (
	// ServerOpenAI: {"error": {"message": "This model's maximum context
	// length is N tokens. However, your messages resulted in M tokens...",
	// "type": "invalid_request_error", "param": "messages", "code":
	// "context_length_exceeded"}}.
	ServerOpenAI CompatibleServer = ""
	// ServerVLLM: vLLM's {"error": {"message": "This model's maximum
	// context length is N tokens. However, you requested M tokens (...).
	// ...", "type": "BadRequestError", "param": null, "code": 400}}.
	ServerVLLM CompatibleServer = "vllm"
	// ServerVLLMLegacy: vLLM before it nested its errors, the same fields
	// at the top level with "object": "error".
	ServerVLLMLegacy CompatibleServer = "vllm-legacy"
	// ServerLlamaCpp: llama.cpp's server, {"error": {"code": 400,
	// "message": "the request exceeds the available context size, try
	// increasing it", "type": "exceed_context_size_error",
	// "n_prompt_tokens": M, "n_ctx": N}}.
	ServerLlamaCpp CompatibleServer = "llama.cpp"
	// ServerOllama: Ollama's OpenAI-compatible endpoint, {"error":
	// {"message": "prompt too long; exceeded max context length by K
	// tokens", "type": "invalid_request_error", "param": null, "code":
	// null}}.
	ServerOllama CompatibleServer = "ollama"
	// ServerLMStudio: LM Studio, whose error is a string: {"error": "The
	// number of tokens to keep from the initial prompt is greater than the
	// context length (n_keep: M>= n_ctx: N). Try to load the model with a
	// larger context length, or provide a shorter input."}.
	ServerLMStudio CompatibleServer = "lmstudio"
)

// RequestTokens is the fake server's estimate of the tokens of a request
// body: one token for every four bytes, rounded up. Real tokenizers give
// three to four bytes of English or code per token; what matters to a test
// is that the estimate is fixed and known, so that it can size a
// conversation to a window.
func RequestTokens(body []byte) int64 { return (int64(len(body)) + 3) / 4 }

// SetContextWindow holds the requests from now on to w.
func (s *ModelServer) SetContextWindow(w ContextWindow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = w
}

// Turn is one answer of the model.
type Turn struct {
	// Reasoning is the model's visible reasoning: an Anthropic thinking block
	// (with a signature), a Responses reasoning summary, or a Chat Completions
	// reasoning_content delta as vLLM and DeepSeek send it.
	Reasoning string
	// Text is the answer's text.
	Text string
	// ToolCalls are the tools the model calls, after the text.
	ToolCalls []ToolCall
	// Usage is reported at the end of the answer.
	Usage TokenUsage
	// StopReason is "end_turn", "tool_use", "max_tokens", "stop_sequence" or
	// "refusal", translated into each API's own terms. Empty means tool_use
	// when there are tool calls, else end_turn.
	StopReason string

	// Faults are error responses served, one per request, before the answer:
	// a client that retries sees them first and then gets the answer.
	Faults []Fault
	// Delay holds the answer back (not the faults) for this long, or until
	// the client gives up; for timeout tests.
	Delay time.Duration
	// StreamError, when set, ends a streamed answer after its content with the
	// API's error event carrying this message, instead of the normal end.
	StreamError string

	// Break, when set, breaks a streamed answer partway, as a failing
	// server or network does; a non-streamed answer is unaffected.
	Break *StreamBreak

	// Model, when set, makes the turn answer only a request for this
	// model (the body's "model"); the turns for other models, and those
	// for any, are kept for the requests they fit. Concurrent requests to
	// several models then get their own answers whatever order they
	// arrive in.
	Model string

	// Respond, when set, makes the answer from the request it answers,
	// replacing this turn's other fields but Faults: a test's model can then
	// use what a tool returned, such as a background process id. It runs
	// on the server's goroutine; report failures with t.Errorf, not Fatal.
	Respond func(req ModelRequest) Turn
}

// StreamBreak is how a streamed answer breaks after its first After
// events: with Raw written in place of the rest (malformed SSE or JSON),
// stalled (Stall: nothing more is sent, the connection held open until the
// client gives up), or else with the connection closed in the middle of
// the next event.
type StreamBreak struct {
	After int
	Raw   string
	Stall bool
}

// ToolCall is a tool call of a Turn.
type ToolCall struct {
	// ID is the call's id; empty means call_<turn>_<n>, both counted from 1.
	ID string
	// Name is the tool's name. Nothing checks that the client offered such a
	// tool, so a test can make the model call one that does not exist.
	Name string
	// Arguments is the JSON text of the arguments, streamed in several pieces.
	// It is sent as it is, so it may be malformed JSON to test the error path
	// (a non-streamed Anthropic answer, which carries the input as a JSON
	// value, then carries it as a JSON string). Empty means {}.
	Arguments string
}

// TokenUsage is the token count of a Turn, in provider-neutral terms: input
// tokens include the cached ones, which the server splits out as each API
// does (Anthropic counts cache reads and writes apart from input_tokens).
type TokenUsage struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
}

// Fault is an error response.
type Fault struct {
	// Status is the HTTP status, for example 429, 500 or 400.
	Status int
	// Header is added to the response, for example
	// http.Header{"Retry-After": {"1"}} or {"Retry-After-Ms": {"200"}}.
	Header http.Header
	// Message is the error's message; empty means a generic one.
	Message string
	// Type is the API's error type; empty means the usual one for Status
	// (Anthropic rate_limit_error, OpenAI invalid_request_error, ...).
	Type string
	// Code is the OpenAI error code, for example "context_length_exceeded".
	Code string
}

// ModelRequest is a request the server received.
type ModelRequest struct {
	Time   time.Time
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Turn is the 1-based number of the turn the request was answered from,
	// 0 when none was left or the request overflowed; Fault says whether it
	// got one of the turn's faults.
	Turn  int
	Fault bool
	// Tokens is the body's RequestTokens, and Overflow says whether the
	// request was refused for exceeding the context window.
	Tokens   int64
	Overflow bool
	// Prefix is the number of bytes at the start of the body that repeat
	// the start of the previous request's body (0 for the first request).
	Prefix int
	// Prompt is the body's prompt in the order the APIs' prompt caches
	// read it, whatever the order of the body's keys: the tools, then
	// the system prompt (Anthropic's system, the Responses API's
	// instructions), then the conversation (messages or input), each as
	// the body has it. PromptPrefix is the number of its bytes that
	// repeat the start of the previous request's Prompt.
	Prompt       []byte
	PromptPrefix int
}

// Decode decodes the request's JSON body into v.
func (r ModelRequest) Decode(v any) error { return json.Unmarshal(r.Body, v) }

// PrefixShare is the share of the body's bytes that repeat the previous
// request's prefix, from 0 to 1; 0 for an empty body.
func (r ModelRequest) PrefixShare() float64 {
	if len(r.Body) == 0 {
		return 0
	}
	return float64(r.Prefix) / float64(len(r.Body))
}

// PromptShare is the share of the prompt's bytes that repeat the previous
// request's prompt from its start (see Prompt), from 0 to 1; 0 for an
// empty prompt.
func (r ModelRequest) PromptShare() float64 {
	if len(r.Prompt) == 0 {
		return 0
	}
	return float64(r.PromptPrefix) / float64(len(r.Prompt))
}

// cachedPrompt returns the prompt of a request body in the order the
// prompt caches read it (see ModelRequest.Prompt); nil for a body that is
// not a JSON object.
func cachedPrompt(body []byte) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return nil
	}
	var b []byte
	for _, k := range []string{"tools", "system", "instructions", "messages", "input"} {
		b = append(b, fields[k]...)
	}
	return b
}

// StartModelServer starts a fake model server that serves turns, and closes
// it in t.Cleanup.
func StartModelServer(t testing.TB, turns ...Turn) *ModelServer {
	t.Helper()
	s := &ModelServer{t: t}
	s.Add(turns...)
	s.srv = NewServiceServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server's root URL, the base URL of an Anthropic client.
func (s *ModelServer) URL() string { return s.srv.URL }

// OpenAIURL is the base URL of an OpenAI client: URL() with /v1.
func (s *ModelServer) OpenAIURL() string { return s.srv.URL + "/v1" }

// Add appends turns to serve after the ones already given.
func (s *ModelServer) Add(turns ...Turn) {
	s.t.Helper()
	for i, turn := range turns {
		u := turn.Usage
		if u.CacheReadTokens+u.CacheWriteTokens > u.InputTokens {
			s.t.Fatalf("modelserver: turn %d: cache read and write tokens are parts of InputTokens and cannot add up to more", i+1)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.main.add(turns)
}

// Conversation scripts a conversation apart from the main one: a request
// whose first user message starts with key is answered from these turns,
// in order, and takes none of the main script's. Agents that run at once —
// subagents, each with its own conversation whose first message is its
// task — so each get their own answers whatever order their requests
// arrive in. When several keys match, the longest wins. Turn numbers (in
// call ids and ModelRequest.Turn) count within the conversation.
func (s *ModelServer) Conversation(key string, turns ...Turn) {
	s.t.Helper()
	if key == "" {
		s.t.Fatal("modelserver: a conversation needs a key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conversations {
		if c.key == key {
			c.add(turns)
			return
		}
	}
	c := &conversation{key: key}
	c.add(turns)
	s.conversations = append(s.conversations, c)
}

// Requests returns the requests received so far, in order.
func (s *ModelServer) Requests() []ModelRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ModelRequest(nil), s.requests...)
}

// ServerTimes returns, for each request received so far and in the same
// order as Requests, the server's own time answering it: from the request's
// arrival at the handler to the last byte of the response written and
// flushed to the connection, a Turn's Delay included. The server's clock
// stops after the flush, when the client may already have read the answer:
// ServerTimes waits until every request received has been answered, or
// until ctx ends, when those still being answered have 0.
func (s *ModelServer) ServerTimes(ctx context.Context) []time.Duration {
	for {
		s.mu.Lock()
		if s.answers == nil {
			s.answers = make(chan struct{})
		}
		times, answers := append([]time.Duration(nil), s.served...), s.answers
		s.mu.Unlock()
		if !slices.Contains(times, 0) {
			return times
		}
		select {
		case <-answers:
		case <-ctx.Done():
			return times
		}
	}
}

// Remaining returns the number of turns not yet answered, the
// conversations' included.
func (s *ModelServer) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.main.remaining()
	for _, c := range s.conversations {
		n += c.remaining()
	}
	return n
}

// modelAPI is the wire format of an endpoint.
type modelAPI int

const (
	modelAPIAnthropic modelAPI = iota
	modelAPIChat
	modelAPIResponses
)

func (s *ModelServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == "PRI" && r.ProtoMajor == 2 {
		// The preface of a cleartext HTTP/2 client, which no model client
		// is: another process's gRPC connection (an API server's to an
		// etcd that has stopped) to a port this server now has. Not a
		// request of the test's.
		s.t.Logf("modelserver: ignored the HTTP/2 preface of a stray client from %s", r.RemoteAddr)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	arrived := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := ModelRequest{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Tokens: RequestTokens(body)}
	// Every recorded request is timed to the end of its answer. The
	// answers carry a Content-Length or are streamed, so flushing here
	// sends what net/http would have sent when the handler returned, only
	// at a moment the server can time.
	idx, flush := -1, true
	defer func() {
		if idx < 0 {
			return
		}
		if f, ok := w.(http.Flusher); ok && flush {
			f.Flush()
		}
		s.answered(idx, time.Since(arrived))
	}()

	var api modelAPI
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		api = modelAPIAnthropic
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		api = modelAPIChat
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		api = modelAPIResponses
	default:
		idx, flush = s.record(rec), false // http.NotFound sets no Content-Length
		s.t.Errorf("modelserver: unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}

	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		idx = s.record(rec)
		writeModelError(w, api, Fault{Status: http.StatusBadRequest, Message: "the body is not JSON: " + err.Error()}, 0)
		return
	}

	if win := s.contextWindow(); win.Tokens > 0 && rec.Tokens > win.Tokens {
		rec.Overflow = true
		idx = s.record(rec)
		writeOverflow(w, api, win, rec.Tokens, idx+1)
		return
	}

	turn, n, fault, ok := s.take(firstUserText(body), req.Model)
	rec.Turn, rec.Fault = n, fault != nil
	if !ok {
		rec.Turn = 0
	}
	idx = s.record(rec)
	switch {
	case !ok:
		s.t.Errorf("modelserver: request %d (%s %s) has no turn left to answer it", len(s.Requests()), r.Method, r.URL.Path)
		// Tell the SDKs not to retry: more requests would not find a turn either.
		w.Header().Set("X-Should-Retry", "false")
		writeModelError(w, api, Fault{Status: http.StatusInternalServerError, Message: "modelserver: no turn left"}, 0)
		return
	case fault != nil:
		writeModelError(w, api, *fault, n)
		return
	}

	if turn.Respond != nil {
		turn = turn.Respond(rec)
	}
	if turn.Delay > 0 {
		select {
		case <-time.After(turn.Delay):
		case <-r.Context().Done():
			return
		}
	}
	a := modelAnswer{Turn: turn, n: n, model: req.Model}
	switch {
	case api == modelAPIAnthropic && req.Stream:
		a.anthropicStream(newModelEventWriter(w, r, turn.Break))
	case api == modelAPIAnthropic:
		writeModelJSON(w, a.anthropicMessage())
	case api == modelAPIChat && req.Stream:
		a.chatStream(newModelEventWriter(w, r, turn.Break), req.StreamOptions.IncludeUsage)
	case api == modelAPIChat:
		writeModelJSON(w, a.chatCompletion())
	case api == modelAPIResponses && req.Stream:
		a.responsesStream(newModelEventWriter(w, r, turn.Break))
	default:
		writeModelJSON(w, a.response("completed"))
	}
}

// record records r, with the prefix it shares with the request before it,
// and returns its index.
func (s *ModelServer) record(r ModelRequest) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Prompt = cachedPrompt(r.Body)
	if len(s.requests) > 0 {
		r.Prefix = commonPrefix(s.last, r.Body)
		r.PromptPrefix = commonPrefix(s.requests[len(s.requests)-1].Prompt, r.Prompt)
	}
	s.last = r.Body
	s.requests = append(s.requests, r)
	s.served = append(s.served, 0)
	return len(s.requests) - 1
}

// answered records the server's time answering request i.
func (s *ModelServer) answered(i int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served[i] = d
	if s.answers != nil {
		close(s.answers)
		s.answers = nil
	}
}

func (s *ModelServer) contextWindow() ContextWindow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.window
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// take returns what the next request, for model, gets: a fault of the
// first turn not yet answered that fits the model, or the turn itself,
// with the turn's 1-based number.
//
// first is the text of the request's first user message, which picks the
// conversation (see Conversation).
func (s *ModelServer) take(first, model string) (turn Turn, n int, fault *Fault, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := &s.main
	var best *conversation
	for _, c := range s.conversations {
		if strings.HasPrefix(first, c.key) && (best == nil || len(c.key) > len(best.key)) {
			best = c
		}
	}
	if best != nil {
		sc = &best.script
	}
	return sc.take(model)
}

// take returns the script's next answer for model (see ModelServer.take).
func (sc *script) take(model string) (turn Turn, n int, fault *Fault, ok bool) {
	for sc.next < len(sc.turns) && sc.done[sc.next] {
		sc.next++
	}
	for i := sc.next; i < len(sc.turns); i++ {
		turn = sc.turns[i]
		if sc.done[i] || (turn.Model != "" && turn.Model != model) {
			continue
		}
		if sc.faults[i] < len(turn.Faults) {
			f := turn.Faults[sc.faults[i]]
			sc.faults[i]++
			return turn, i + 1, &f, true
		}
		sc.done[i] = true
		return turn, i + 1, nil, true
	}
	return Turn{}, len(sc.turns) + 1, nil, false
}

// firstUserText returns the text of the first user message of a request
// body in any of the three APIs ("" when it has none): the messages of
// Anthropic and Chat Completions, the input of Responses.
func firstUserText(body []byte) string {
	var req struct {
		Messages []json.RawMessage `json:"messages"`
		Input    json.RawMessage   `json:"input"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	var input string
	if json.Unmarshal(req.Input, &input) == nil {
		return input
	}
	items := req.Messages
	if len(items) == 0 {
		_ = json.Unmarshal(req.Input, &items)
	}
	for _, raw := range items {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Role != "user" {
			continue
		}
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			return text
		}
		var blocks []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(m.Content, &blocks)
		var b strings.Builder
		for _, bl := range blocks {
			b.WriteString(bl.Text)
		}
		return b.String()
	}
	return ""
}

// writeModelJSON writes v as a JSON body with its Content-Length, as
// net/http would set it for a body written in one piece.
func writeModelJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	writeModelBody(w, http.StatusOK, v)
}

func writeModelBody(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// writeModelError writes f as the API's error response.
func writeModelError(w http.ResponseWriter, api modelAPI, f Fault, turn int) {
	for k, vs := range f.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	msg := f.Message
	if msg == "" {
		msg = fmt.Sprintf("modelserver: injected %d %s", f.Status, http.StatusText(f.Status))
	}
	requestID := fmt.Sprintf("req_modelserver_%d", turn)
	w.Header().Set("Content-Type", "application/json")
	var body any
	if api == modelAPIAnthropic {
		w.Header().Set("Request-Id", requestID)
		body = map[string]any{
			"type":       "error",
			"error":      map[string]any{"type": cmp.Or(f.Type, anthropicErrorType(f.Status)), "message": msg},
			"request_id": requestID,
		}
	} else {
		w.Header().Set("X-Request-Id", requestID)
		body = map[string]any{"error": map[string]any{
			"message": msg,
			"type":    cmp.Or(f.Type, openAIErrorType(f.Status)),
			"param":   nil,
			"code":    modelNullable(f.Code),
		}}
	}
	writeModelBody(w, f.Status, body)
}

// writeOverflow writes the error the API (or the compatible server win
// names) answers a request of tokens that exceeds win with.
func writeOverflow(w http.ResponseWriter, api modelAPI, win ContextWindow, tokens int64, request int) {
	requestID := fmt.Sprintf("req_modelserver_overflow_%d", request)
	w.Header().Set("Content-Type", "application/json")
	var body any
	switch api {
	case modelAPIAnthropic:
		w.Header().Set("Request-Id", requestID)
		body = map[string]any{
			"type": "error",
			"error": map[string]any{
				"type":    "invalid_request_error",
				"message": fmt.Sprintf("prompt is too long: %d tokens > %d maximum", tokens, win.Tokens),
			},
			"request_id": requestID,
		}
	case modelAPIResponses:
		w.Header().Set("X-Request-Id", requestID)
		body = map[string]any{"error": map[string]any{
			"message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
			"type":    "invalid_request_error",
			"param":   "input",
			"code":    "context_length_exceeded",
		}}
	default:
		w.Header().Set("X-Request-Id", requestID)
		body = chatOverflowBody(win, tokens)
	}
	writeModelBody(w, http.StatusBadRequest, body)
}

// chatOverflowBody is the overflow error of the Chat Completions server
// win names.
func chatOverflowBody(win ContextWindow, tokens int64) any {
	// vLLM counts the completion's tokens too; the fake server asks for none.
	vllm := fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, 0 in the completion). "+
		"Please reduce the length of the messages or completion.", win.Tokens, tokens, tokens)
	switch win.Server {
	case ServerVLLM:
		return map[string]any{"error": map[string]any{"message": vllm, "type": "BadRequestError", "param": nil, "code": 400}}
	case ServerVLLMLegacy:
		return map[string]any{"object": "error", "message": vllm, "type": "BadRequestError", "param": nil, "code": 400}
	case ServerLlamaCpp:
		return map[string]any{"error": map[string]any{
			"code":            400,
			"message":         "the request exceeds the available context size, try increasing it",
			"type":            "exceed_context_size_error",
			"n_prompt_tokens": tokens,
			"n_ctx":           win.Tokens,
		}}
	case ServerOllama:
		return map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("prompt too long; exceeded max context length by %d tokens", tokens-win.Tokens),
			"type":    "invalid_request_error",
			"param":   nil,
			"code":    nil,
		}}
	case ServerLMStudio:
		return map[string]any{"error": fmt.Sprintf("The number of tokens to keep from the initial prompt is greater than the context length (n_keep: %d>= n_ctx: %d). "+
			"Try to load the model with a larger context length, or provide a shorter input.", tokens, win.Tokens)}
	}
	return map[string]any{"error": map[string]any{
		"message": fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. "+
			"Please reduce the length of the messages.", win.Tokens, tokens),
		"type":  "invalid_request_error",
		"param": "messages",
		"code":  "context_length_exceeded",
	}}
}

func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

func openAIErrorType(status int) string {
	switch {
	case status == 429:
		return "requests"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func modelNullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// modelEventWriter writes server-sent events, flushing each one so that the client
// sees a real stream.
type modelEventWriter struct {
	w http.ResponseWriter
	f http.Flusher
	r *http.Request
	// brk breaks the stream after brk.After events (see StreamBreak);
	// sent counts the events so far, and broken is set once it broke.
	brk    *StreamBreak
	sent   int
	broken bool
}

func newModelEventWriter(w http.ResponseWriter, r *http.Request, brk *StreamBreak) *modelEventWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &modelEventWriter{w: w, f: f, r: r, brk: brk}
}

// event writes one event; an empty name writes a data-only event, as Chat
// Completions streams are.
func (e *modelEventWriter) event(name string, data any) {
	if e.broken {
		return
	}
	if e.brk != nil && e.sent == e.brk.After {
		e.breakStream(name)
		return
	}
	e.sent++
	var b bytes.Buffer
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	raw, ok := data.(string)
	if !ok {
		js, _ := json.Marshal(data)
		raw = string(js)
	}
	fmt.Fprintf(&b, "data: %s\n\n", raw)
	_, _ = e.w.Write(b.Bytes())
	if e.f != nil {
		e.f.Flush()
	}
}

// breakStream breaks the stream as e.brk says, in place of the event
// named name.
func (e *modelEventWriter) breakStream(name string) {
	e.broken = true
	switch {
	case e.brk.Raw != "":
		_, _ = io.WriteString(e.w, e.brk.Raw)
	case e.brk.Stall:
		if e.f != nil {
			e.f.Flush()
		}
		<-e.r.Context().Done()
		return
	default:
		// Half an event, then the connection is closed under it: net/http
		// aborts the response of a handler that panics with
		// ErrAbortHandler, once the deferred flush has sent the half.
		_, _ = fmt.Fprintf(e.w, "event: %s\ndata: {\"type\": \"%s\", \"ind", name, name)
		panic(http.ErrAbortHandler)
	}
	if e.f != nil {
		e.f.Flush()
	}
}

// modelChunks splits s into three pieces (fewer if it is shorter, more of
// at most maxChunk bytes if it is long, as real APIs stream), at rune
// boundaries, so that every streamed string arrives in several deltas for
// the client to join.
func modelChunks(s string) []string {
	r := []rune(s)
	n := min(max(3, (len(s)+maxChunk-1)/maxChunk), len(r))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}

// maxChunk bounds the size of a streamed delta of a long string.
const maxChunk = 64 << 10

// modelAnswer renders a Turn in the three wire formats.
type modelAnswer struct {
	Turn
	n     int
	model string
}

func (a modelAnswer) stop() string {
	if a.StopReason != "" {
		return a.StopReason
	}
	if len(a.ToolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func (a modelAnswer) callID(i int) string {
	if id := a.ToolCalls[i].ID; id != "" {
		return id
	}
	return fmt.Sprintf("call_%d_%d", a.n, i+1)
}

func (a modelAnswer) arguments(i int) string {
	if args := a.ToolCalls[i].Arguments; args != "" {
		return args
	}
	return "{}"
}

func (a modelAnswer) signature() string { return fmt.Sprintf("modelserver-signature-%d", a.n) }

// Anthropic Messages.

func (a modelAnswer) anthropicUsage() map[string]any {
	u := a.Usage
	return map[string]any{
		"input_tokens":                u.InputTokens - u.CacheReadTokens - u.CacheWriteTokens,
		"cache_read_input_tokens":     u.CacheReadTokens,
		"cache_creation_input_tokens": u.CacheWriteTokens,
		"output_tokens":               u.OutputTokens,
	}
}

func (a modelAnswer) anthropicStream(e *modelEventWriter) {
	start := a.anthropicUsage()
	start["output_tokens"] = 1 // as the API does: the final count comes in message_delta
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", a.n), "type": "message", "role": "assistant", "model": a.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start,
	}})
	e.event("ping", map[string]any{"type": "ping"})
	index := 0
	block := func(start map[string]any, deltas []map[string]any) {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": start})
		for _, d := range deltas {
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if a.Reasoning != "" {
		var deltas []map[string]any
		for _, c := range modelChunks(a.Reasoning) {
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": c})
		}
		deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": a.signature()})
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, deltas)
	}
	if a.Text != "" {
		var deltas []map[string]any
		for _, c := range modelChunks(a.Text) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": c})
		}
		block(map[string]any{"type": "text", "text": ""}, deltas)
	}
	for i, call := range a.ToolCalls {
		var deltas []map[string]any
		for _, c := range modelChunks(a.arguments(i)) {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": c})
		}
		block(map[string]any{"type": "tool_use", "id": a.callID(i), "name": call.Name, "input": map[string]any{}}, deltas)
	}
	if a.StreamError != "" {
		e.event("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": a.StreamError}})
		return
	}
	e.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": a.stop(), "stop_sequence": nil},
		"usage": a.anthropicUsage(),
	})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

func (a modelAnswer) anthropicMessage() map[string]any {
	content := []any{}
	if a.Reasoning != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": a.Reasoning, "signature": a.signature()})
	}
	if a.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": a.Text})
	}
	for i, call := range a.ToolCalls {
		var input any = json.RawMessage(a.arguments(i))
		if !json.Valid([]byte(a.arguments(i))) {
			input = a.arguments(i)
		}
		content = append(content, map[string]any{"type": "tool_use", "id": a.callID(i), "name": call.Name, "input": input})
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_%d", a.n), "type": "message", "role": "assistant", "model": a.model,
		"content": content, "stop_reason": a.stop(), "stop_sequence": nil, "usage": a.anthropicUsage(),
	}
}

// OpenAI Chat Completions.

func (a modelAnswer) chatFinishReason() string {
	switch a.stop() {
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	case "refusal":
		return "content_filter"
	}
	return "stop"
}

func (a modelAnswer) chatUsage() map[string]any {
	u := a.Usage
	return map[string]any{
		"prompt_tokens":     u.InputTokens,
		"completion_tokens": u.OutputTokens,
		"total_tokens":      u.InputTokens + u.OutputTokens,
		"prompt_tokens_details": map[string]any{
			"cached_tokens":      u.CacheReadTokens,
			"cache_write_tokens": u.CacheWriteTokens,
			"audio_tokens":       0,
		},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0},
	}
}

func (a modelAnswer) chatStream(e *modelEventWriter, includeUsage bool) {
	chunk := func(delta map[string]any, finish any) {
		c := map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", a.n), "object": "chat.completion.chunk",
			"created": time.Now().Unix(), "model": a.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
		if includeUsage {
			c["usage"] = nil
		}
		e.event("", c)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, c := range modelChunks(a.Reasoning) {
		chunk(map[string]any{"reasoning_content": c}, nil)
	}
	for _, c := range modelChunks(a.Text) {
		chunk(map[string]any{"content": c}, nil)
	}
	for i, call := range a.ToolCalls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": a.callID(i), "type": "function",
			"function": map[string]any{"name": call.Name, "arguments": ""},
		}}}, nil)
		for _, c := range modelChunks(a.arguments(i)) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": c},
			}}}, nil)
		}
	}
	if a.StreamError != "" {
		e.event("", map[string]any{"error": map[string]any{"message": a.StreamError, "type": "server_error", "param": nil, "code": nil}})
		return
	}
	chunk(map[string]any{}, a.chatFinishReason())
	if includeUsage {
		e.event("", map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", a.n), "object": "chat.completion.chunk",
			"created": time.Now().Unix(), "model": a.model, "choices": []any{}, "usage": a.chatUsage(),
		})
	}
	e.event("", "[DONE]")
}

func (a modelAnswer) chatCompletion() map[string]any {
	msg := map[string]any{"role": "assistant", "content": modelNullable(a.Text), "refusal": nil}
	if a.Reasoning != "" {
		msg["reasoning_content"] = a.Reasoning
	}
	if len(a.ToolCalls) > 0 {
		var calls []any
		for i, call := range a.ToolCalls {
			calls = append(calls, map[string]any{
				"id": a.callID(i), "type": "function",
				"function": map[string]any{"name": call.Name, "arguments": a.arguments(i)},
			})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", a.n), "object": "chat.completion", "created": time.Now().Unix(), "model": a.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": a.chatFinishReason()}},
		"usage":   a.chatUsage(),
	}
}

// OpenAI Responses.

func (a modelAnswer) reasoningItem() map[string]any {
	return map[string]any{
		"id": fmt.Sprintf("rs_%d", a.n), "type": "reasoning",
		"summary": []any{map[string]any{"type": "summary_text", "text": a.Reasoning}},
	}
}

func (a modelAnswer) messageItem(status string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = append(content, map[string]any{"type": "output_text", "text": a.Text, "annotations": []any{}})
	}
	return map[string]any{"id": fmt.Sprintf("msg_%d", a.n), "type": "message", "status": status, "role": "assistant", "content": content}
}

func (a modelAnswer) callItem(i int, status string) map[string]any {
	args := ""
	if status == "completed" {
		args = a.arguments(i)
	}
	return map[string]any{
		"id": fmt.Sprintf("fc_%d_%d", a.n, i+1), "type": "function_call", "status": status,
		"call_id": a.callID(i), "name": a.ToolCalls[i].Name, "arguments": args,
	}
}

func (a modelAnswer) outputItems() []any {
	items := []any{}
	if a.Reasoning != "" {
		items = append(items, a.reasoningItem())
	}
	if a.Text != "" {
		items = append(items, a.messageItem("completed"))
	}
	for i := range a.ToolCalls {
		items = append(items, a.callItem(i, "completed"))
	}
	return items
}

// response is the Response object in the given status; finished ones carry
// their output and usage.
func (a modelAnswer) response(status string) map[string]any {
	r := map[string]any{
		"id": fmt.Sprintf("resp_%d", a.n), "object": "response", "created_at": time.Now().Unix(),
		"status": status, "model": a.model, "output": []any{}, "usage": nil,
		"error": nil, "incomplete_details": nil, "instructions": nil,
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "temperature": 1, "top_p": 1,
	}
	if status == "in_progress" {
		return r
	}
	u := a.Usage
	r["output"] = a.outputItems()
	r["usage"] = map[string]any{
		"input_tokens":          u.InputTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CacheReadTokens, "cache_write_tokens": u.CacheWriteTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          u.InputTokens + u.OutputTokens,
	}
	switch a.stop() {
	case "max_tokens":
		r["status"] = "incomplete"
		r["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
	case "refusal":
		r["status"] = "incomplete"
		r["incomplete_details"] = map[string]any{"reason": "content_filter"}
	}
	return r
}

func (a modelAnswer) responsesStream(e *modelEventWriter) {
	seq := 0
	event := func(name string, fields map[string]any) {
		fields["type"] = name
		fields["sequence_number"] = seq
		seq++
		e.event(name, fields)
	}
	event("response.created", map[string]any{"response": a.response("in_progress")})
	event("response.in_progress", map[string]any{"response": a.response("in_progress")})
	out := 0
	if a.Reasoning != "" {
		id := fmt.Sprintf("rs_%d", a.n)
		event("response.output_item.added", map[string]any{"output_index": out, "item": map[string]any{"id": id, "type": "reasoning", "summary": []any{}}})
		event("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": out, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
		for _, c := range modelChunks(a.Reasoning) {
			event("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": out, "summary_index": 0, "delta": c})
		}
		event("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": out, "summary_index": 0, "text": a.Reasoning})
		event("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": out, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": a.Reasoning}})
		event("response.output_item.done", map[string]any{"output_index": out, "item": a.reasoningItem()})
		out++
	}
	if a.Text != "" {
		id := fmt.Sprintf("msg_%d", a.n)
		part := func(text string) map[string]any {
			return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
		}
		event("response.output_item.added", map[string]any{"output_index": out, "item": a.messageItem("in_progress")})
		event("response.content_part.added", map[string]any{"item_id": id, "output_index": out, "content_index": 0, "part": part("")})
		for _, c := range modelChunks(a.Text) {
			event("response.output_text.delta", map[string]any{"item_id": id, "output_index": out, "content_index": 0, "delta": c, "logprobs": []any{}})
		}
		event("response.output_text.done", map[string]any{"item_id": id, "output_index": out, "content_index": 0, "text": a.Text, "logprobs": []any{}})
		event("response.content_part.done", map[string]any{"item_id": id, "output_index": out, "content_index": 0, "part": part(a.Text)})
		event("response.output_item.done", map[string]any{"output_index": out, "item": a.messageItem("completed")})
		out++
	}
	for i := range a.ToolCalls {
		id := fmt.Sprintf("fc_%d_%d", a.n, i+1)
		event("response.output_item.added", map[string]any{"output_index": out, "item": a.callItem(i, "in_progress")})
		for _, c := range modelChunks(a.arguments(i)) {
			event("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": out, "delta": c})
		}
		event("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": out, "arguments": a.arguments(i)})
		event("response.output_item.done", map[string]any{"output_index": out, "item": a.callItem(i, "completed")})
		out++
	}
	if a.StreamError != "" {
		event("error", map[string]any{"code": "server_error", "message": a.StreamError, "param": nil})
		return
	}
	final := a.response("completed")
	name := "response.completed"
	if final["status"] == "incomplete" {
		name = "response.incomplete"
	}
	event(name, map[string]any{"response": final})
}
