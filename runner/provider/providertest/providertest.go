// Package providertest is the conformance suite every provider of a model
// API passes: the providers' tests run it against the fake model server of
// hack/testenv, which speaks each API's real wire format, through the real
// SDKs.
//
//	providertest.Run(t, providertest.Kind{Name: "anthropic", New: ..., ...})
//
// It is imported by tests only.
package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/provider"
)

// Key is the API key the kinds' configurations carry, which no error and no
// log may show.
const Key = "sk-test-0123456789abcdef"

// Kind is one way of reaching a model API.
type Kind struct {
	// Name names the kind in the names of subtests, for example
	// "openai-chat".
	Name string
	// New makes the provider.
	New func(provider.Config) (provider.Provider, error)
	// Config is the configuration that reaches ms, with Key as its API key.
	Config func(ms *testenv.ModelServer) provider.Config
	// CheckKey checks that the API key arrived in the header the API
	// expects.
	CheckKey func(t *testing.T, h http.Header)
	// ReasoningSignature is the signature the kind's reasoning carries, for
	// an API that signs its reasoning to accept it back; the fake server
	// signs the first turn's "modelserver-signature-1".
	ReasoningSignature string
	// RequestBody is the JSON body the API receives for BodyRequest.
	RequestBody string
	// Servers are the OpenAI-compatible servers, besides the API's own,
	// whose context overflow errors the kind must recognise: those of the
	// servers that speak its API.
	Servers []testenv.CompatibleServer
}

// Run runs the suite for each kind: each case runs every kind in parallel,
// each kind against a fake server of its own. One case sets environment
// variables, so t must not be parallel.
func Run(t *testing.T, kinds ...Kind) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, kinds []Kind)
	}{
		{"Text", testText},
		{"ToolCalls", testToolCalls},
		{"Reasoning", testReasoning},
		{"StopReasons", testStopReasons},
		{"RetryAfter", testRetryAfter},
		{"ServerErrorRetried", testServerErrorRetried},
		{"RetriesBounded", testRetriesBounded},
		{"BadRequestNotRetried", testBadRequestNotRetried},
		{"ContextOverflow", testContextOverflow},
		{"ContextWindow", testContextWindow},
		{"Timeout", testTimeout},
		{"StreamError", testStreamError},
		{"StreamIdleRetried", testStreamIdleRetried},
		{"StreamIdleMidAnswer", testStreamIdleMidAnswer},
		{"AnswerTooLarge", testAnswerTooLarge},
		{"MalformedToolCall", testMalformedToolCall},
		{"Conversation", testConversation},
		{"RequestBody", testRequestBody},
		{"Encode", testEncode},
		{"IgnoresEnvironment", testIgnoresEnvironment},
		{"EarlyBreak", testEarlyBreak},
		{"InvalidRequest", testInvalidRequest},
		{"RetryLog", testRetryLog},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, kinds) })
	}
}

// BodyRequest is the conversation whose request RequestBody is: a system
// prompt, user text, an assistant's signed reasoning, text and tool call,
// the call's failed result, a tool definition and an output cap.
func BodyRequest() provider.Request {
	return provider.Request{
		Messages: []provider.Message{
			provider.SystemMessage("You are terse."),
			provider.UserMessage("List the files."),
			{Role: provider.RoleAssistant, Content: []provider.Content{
				{Type: provider.ContentReasoning, Text: "I should run ls.", Signature: "sig-1"},
				provider.Text("Listing."),
				provider.ToolCall("call_1", "bash", `{"command":"ls"}`),
			}},
			{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("call_1", "ls: permission denied", true)}},
		},
		Tools:           []provider.Tool{{Name: "bash", Description: "Run a command.", InputSchema: json.RawMessage(BodySchema)}},
		MaxOutputTokens: 1000,
	}
}

// BodySchema is the input schema of BodyRequest's tool.
const BodySchema = `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`

// ServeStream serves body verbatim as an event stream to every request,
// for streams from servers that take liberties the fake model server does
// not, and returns the server's URL.
func ServeStream(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// forEachKind runs test for every kind, in parallel, each against its own
// fake server serving turns.
func forEachKind(t *testing.T, kinds []Kind, turns []testenv.Turn, test func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider)) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			ms := testenv.StartModelServer(t, turns...)
			p, err := k.New(k.Config(ms))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			test(t, k, ms, p)
		})
	}
}

func userRequest(text string) provider.Request {
	return provider.Request{Messages: []provider.Message{provider.UserMessage(text)}}
}

// collect streams req and returns the parts and the collected response.
func collect(t *testing.T, p provider.Provider, req provider.Request) ([]provider.Part, provider.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var parts []provider.Part
	var acc provider.Accumulator
	for part, err := range p.Stream(ctx, req) {
		if err != nil {
			return parts, provider.Response{}, err
		}
		parts = append(parts, part)
		if err := acc.Add(part); err != nil {
			t.Fatalf("Accumulator.Add(%+v): %v", part, err)
		}
	}
	resp, err := acc.Response()
	return parts, resp, err
}

func countParts(parts []provider.Part, typ provider.PartType, id string) int {
	n := 0
	for _, p := range parts {
		if p.Type == typ && p.ToolCallID == id {
			n++
		}
	}
	return n
}

func testText(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{
		Text:  "Hello from the fake model, in several pieces.",
		Usage: testenv.TokenUsage{InputTokens: 1200, OutputTokens: 35, CacheReadTokens: 1000, CacheWriteTokens: 150},
	}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		parts, resp, err := collect(t, p, userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		want := provider.Response{
			Message:    provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text(turn.Text)}},
			Usage:      provider.Usage{InputTokens: 1200, OutputTokens: 35, CacheReadTokens: 1000, CacheWriteTokens: 150},
			StopReason: provider.StopEndTurn,
		}
		if diff := cmp.Diff(want, resp); diff != "" {
			t.Errorf("response (-want +got):\n%s", diff)
		}
		if n := countParts(parts, provider.PartTextDelta, ""); n < 2 {
			t.Errorf("%d text deltas, want the text streamed in several", n)
		}
		if last := parts[len(parts)-1]; last.Type != provider.PartFinish {
			t.Errorf("last part is %s, want finish", last.Type)
		}
		if reqs := ms.Requests(); len(reqs) != 1 {
			t.Errorf("%d requests, want 1", len(reqs))
		} else {
			k.CheckKey(t, reqs[0].Header)
		}
	})
}

func testToolCalls(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{
		Text: "Let me look.",
		ToolCalls: []testenv.ToolCall{
			{ID: "call_a", Name: "bash", Arguments: `{"command":"ls -la /workspace","timeout_seconds":30}`},
			{ID: "call_b", Name: "read_file", Arguments: `{"path":"README.md"}`},
		},
		Usage: testenv.TokenUsage{InputTokens: 500, OutputTokens: 60},
	}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		parts, resp, err := collect(t, p, userRequest("look around"))
		if err != nil {
			t.Fatal(err)
		}
		want := provider.Response{
			Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
				provider.Text("Let me look."),
				provider.ToolCall("call_a", "bash", `{"command":"ls -la /workspace","timeout_seconds":30}`),
				provider.ToolCall("call_b", "read_file", `{"path":"README.md"}`),
			}},
			Usage:      provider.Usage{InputTokens: 500, OutputTokens: 60},
			StopReason: provider.StopToolUse,
		}
		if diff := cmp.Diff(want, resp); diff != "" {
			t.Errorf("response (-want +got):\n%s", diff)
		}
		for _, id := range []string{"call_a", "call_b"} {
			if n := countParts(parts, provider.PartToolCallDelta, id); n < 2 {
				t.Errorf("%s: %d argument deltas, want the arguments streamed in several", id, n)
			}
			if n := countParts(parts, provider.PartToolCallEnd, id); n != 1 {
				t.Errorf("%s: %d ends, want 1", id, n)
			}
		}
	})
}

func testReasoning(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{Reasoning: "The user wants a greeting.", Text: "Hello."}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		_, resp, err := collect(t, p, userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		// A signature must survive, to be sent back.
		reasoning := provider.Content{Type: provider.ContentReasoning, Text: turn.Reasoning, Signature: k.ReasoningSignature}
		want := provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{reasoning, provider.Text("Hello.")}}
		if diff := cmp.Diff(want, resp.Message); diff != "" {
			t.Errorf("message (-want +got):\n%s", diff)
		}
	})
}

func testStopReasons(t *testing.T, kinds []Kind) {
	turns := []testenv.Turn{
		{Text: "This answer is cut", StopReason: "max_tokens"},
		{Text: "I can't", StopReason: "refusal"},
		{Text: "Done."},
	}
	forEachKind(t, kinds, turns, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		for _, want := range []provider.StopReason{provider.StopMaxTokens, provider.StopRefusal, provider.StopEndTurn} {
			_, resp, err := collect(t, p, userRequest("go"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StopReason != want {
				t.Errorf("stop reason %q, want %q", resp.StopReason, want)
			}
		}
	})
}

// testRetryAfter checks that a 429 is retried after the wait the
// server asks for: the gap between the two requests the server saw is at
// least the header's value (the SDKs wait exactly that long).
func testRetryAfter(t *testing.T, kinds []Kind) {
	for _, tc := range []struct {
		name   string
		header http.Header
		wait   time.Duration
	}{
		{"retry-after", http.Header{"Retry-After": {"1"}}, time.Second},
		{"retry-after-ms", http.Header{"Retry-After-Ms": {"300"}}, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			turn := testenv.Turn{Text: "after the wait", Faults: []testenv.Fault{{Status: http.StatusTooManyRequests, Header: tc.header}}}
			forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
				_, resp, err := collect(t, p, userRequest("hi"))
				if err != nil {
					t.Fatal(err)
				}
				if got := resp.Message.Text(); got != "after the wait" {
					t.Errorf("text %q after the retry", got)
				}
				reqs := ms.Requests()
				if len(reqs) != 2 || !reqs[0].Fault || reqs[1].Fault {
					t.Fatalf("requests %+v, want the fault and one retry", reqs)
				}
				const epsilon = 20 * time.Millisecond // clock granularity, not scheduling
				if gap := reqs[1].Time.Sub(reqs[0].Time); gap < tc.wait-epsilon {
					t.Errorf("retried after %s, want at least %s", gap, tc.wait)
				}
			})
		})
	}
}

func testServerErrorRetried(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{Text: "recovered", Faults: []testenv.Fault{{Status: http.StatusInternalServerError}, {Status: http.StatusBadGateway}}}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		_, resp, err := collect(t, p, userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Message.Text(); got != "recovered" {
			t.Errorf("text %q", got)
		}
		if n := len(ms.Requests()); n != 3 {
			t.Errorf("%d requests, want 3 (two faults, then the answer)", n)
		}
	})
}

func testRetriesBounded(t *testing.T, kinds []Kind) {
	faults := make([]testenv.Fault, 3)
	for i := range faults {
		faults[i] = testenv.Fault{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After-Ms": {"10"}}}
	}
	forEachKind(t, kinds, []testenv.Turn{{Text: "never", Faults: faults}}, func(t *testing.T, k Kind, ms *testenv.ModelServer, _ provider.Provider) {
		cfg := k.Config(ms)
		cfg.MaxRetries = 1
		p, err := k.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = collect(t, p, userRequest("hi"))
		var aerr *provider.APIError
		if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("error %v, want the 503", err)
		}
		if n := len(ms.Requests()); n != 2 {
			t.Errorf("%d requests, want 2 (MaxRetries 1)", n)
		}
	})
}

func testBadRequestNotRetried(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{Text: "unused", Faults: []testenv.Fault{{Status: http.StatusBadRequest, Message: "messages.0: the field content is required"}}}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		_, _, err := collect(t, p, userRequest("hi"))
		if err == nil {
			t.Fatal("no error")
		}
		var aerr *provider.APIError
		if !errors.As(err, &aerr) {
			t.Fatalf("error %v (%T) is not an APIError", err, err)
		}
		if aerr.StatusCode != http.StatusBadRequest || aerr.Message != "messages.0: the field content is required" {
			t.Errorf("APIError %+v", aerr)
		}
		for _, s := range []string{"400", "messages.0: the field content is required", p.Name()} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %q", err, s)
			}
		}
		if strings.Contains(err.Error(), Key) {
			t.Errorf("error %q shows the API key", err)
		}
		if n := len(ms.Requests()); n != 1 {
			t.Errorf("%d requests, want 1: a 400 is not retried", n)
		}
	})
}

func testContextOverflow(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{Faults: []testenv.Fault{{
		Status:  http.StatusBadRequest,
		Message: "prompt is too long: 210000 tokens > 200000 maximum",
		Code:    "context_length_exceeded",
	}}}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		_, _, err := collect(t, p, userRequest("a very long prompt"))
		if !errors.Is(err, provider.ErrContextOverflow) {
			t.Errorf("error %v is not ErrContextOverflow", err)
		}
	})
}

// testContextWindow checks that the overflow error each server really
// sends for a request over its window (the fake server's) is
// ErrContextOverflow, is not retried, and says what the server said.
func testContextWindow(t *testing.T, kinds []Kind) {
	for _, k := range kinds {
		for _, server := range append([]testenv.CompatibleServer{testenv.ServerOpenAI}, k.Servers...) {
			name := k.Name
			if server != testenv.ServerOpenAI {
				name += "/" + string(server)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ms := testenv.StartModelServer(t, testenv.Turn{Text: "it fits"})
				p, err := k.New(k.Config(ms))
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				ms.SetContextWindow(testenv.ContextWindow{Tokens: 100, Server: server})
				_, _, err = collect(t, p, userRequest(strings.Repeat("many words ", 100)))
				if !errors.Is(err, provider.ErrContextOverflow) {
					t.Fatalf("error %v is not ErrContextOverflow", err)
				}
				var aerr *provider.APIError
				if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadRequest || aerr.Message == "" {
					t.Errorf("error %v: want an APIError with the 400 and the server's message", err)
				}
				if n := len(ms.Requests()); n != 1 {
					t.Errorf("%d requests, want 1: an overflow is not retried", n)
				}
				// A request that fits is not an overflow.
				if _, _, err := collect(t, p, userRequest("hi")); err != nil {
					t.Errorf("a request within the window: %v", err)
				}
			})
		}
	}
}

func testTimeout(t *testing.T, kinds []Kind) {
	forEachKind(t, kinds, []testenv.Turn{{Text: "too late", Delay: time.Minute}}, func(t *testing.T, k Kind, ms *testenv.ModelServer, _ provider.Provider) {
		cfg := k.Config(ms)
		cfg.Timeout = 200 * time.Millisecond
		p, err := k.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = collect(t, p, userRequest("hi"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want context.DeadlineExceeded", err)
		}
		if !strings.Contains(err.Error(), "200ms timeout") {
			t.Errorf("error %q does not name the timeout", err)
		}
	})
}

func testStreamError(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{Text: "partial answer", StreamError: "the model is overloaded"}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		parts, _, err := collect(t, p, userRequest("hi"))
		var aerr *provider.APIError
		if !errors.As(err, &aerr) || !strings.Contains(aerr.Message, "the model is overloaded") {
			t.Fatalf("error %v, want an APIError with the stream's message", err)
		}
		if countParts(parts, provider.PartTextDelta, "") == 0 {
			t.Error("the text before the error was not streamed")
		}
		for _, p := range parts {
			if p.Type == provider.PartFinish {
				t.Error("a finish part before the error")
			}
		}
	})
}

// idleTimeout is the stream idle timeout of the tests of stalled streams.
const idleTimeout = 300 * time.Millisecond

// withConfig makes k's provider for ms with the configuration edit makes.
func withConfig(t *testing.T, k Kind, ms *testenv.ModelServer, edit func(*provider.Config)) provider.Provider {
	t.Helper()
	cfg := k.Config(ms)
	edit(&cfg)
	p, err := k.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testStreamIdleRetried checks that a stream that stalls before it
// delivered anything is made again, and the call gets the second answer.
func testStreamIdleRetried(t *testing.T, kinds []Kind) {
	turns := []testenv.Turn{
		{Text: "never sent", Break: &testenv.StreamBreak{After: 0, Stall: true}},
		{Text: "the answer after the stall"},
	}
	forEachKind(t, kinds, turns, func(t *testing.T, k Kind, ms *testenv.ModelServer, _ provider.Provider) {
		p := withConfig(t, k, ms, func(c *provider.Config) { c.StreamIdleTimeout = idleTimeout })
		_, resp, err := collect(t, p, userRequest("hi"))
		if err != nil {
			t.Fatalf("collect: %v", err)
		}
		if got := resp.Message.Text(); got != "the answer after the stall" {
			t.Errorf("answer %q, want the second attempt's", got)
		}
		if n := len(ms.Requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
}

// testStreamIdleMidAnswer checks that a stream that stalls after it
// delivered text fails the call, once, with an error that names the idle
// timeout; and that without retries a stall before the answer fails too.
func testStreamIdleMidAnswer(t *testing.T, kinds []Kind) {
	turns := []testenv.Turn{{Text: "a partial answer, then nothing", Break: &testenv.StreamBreak{After: 5, Stall: true}}}
	forEachKind(t, kinds, turns, func(t *testing.T, k Kind, ms *testenv.ModelServer, _ provider.Provider) {
		p := withConfig(t, k, ms, func(c *provider.Config) { c.StreamIdleTimeout = idleTimeout })
		parts, _, err := collect(t, p, userRequest("hi"))
		if !errors.Is(err, provider.ErrStreamIdle) {
			t.Fatalf("error %v, want ErrStreamIdle", err)
		}
		if !strings.Contains(err.Error(), "nothing received for 300ms") {
			t.Errorf("error %q does not name the idle timeout", err)
		}
		if countParts(parts, provider.PartTextDelta, "") == 0 {
			t.Error("no text before the stall")
		}
		if n := len(ms.Requests()); n != 1 {
			t.Errorf("%d requests, want 1: delivered parts cannot be taken back", n)
		}
	})
	stalled := []testenv.Turn{{Text: "never sent", Break: &testenv.StreamBreak{After: 0, Stall: true}}}
	forEachKind(t, kinds, stalled, func(t *testing.T, k Kind, ms *testenv.ModelServer, _ provider.Provider) {
		p := withConfig(t, k, ms, func(c *provider.Config) { c.StreamIdleTimeout, c.MaxRetries = idleTimeout, -1 })
		if _, _, err := collect(t, p, userRequest("hi")); !errors.Is(err, provider.ErrStreamIdle) {
			t.Fatalf("error %v, want ErrStreamIdle", err)
		}
		if n := len(ms.Requests()); n != 1 {
			t.Errorf("%d requests, want 1 without retries", n)
		}
	})
}

// testAnswerTooLarge checks that an answer past Config.MaxAnswerBytes is
// cut at the cap and fails the call, without a retry.
func testAnswerTooLarge(t *testing.T, kinds []Kind) {
	const maxAnswer = 1000
	turns := []testenv.Turn{{
		Text:      strings.Repeat("a", 600),
		ToolCalls: []testenv.ToolCall{{Name: "write_file", Arguments: `{"content": "` + strings.Repeat("b", 600) + `"}`}},
	}}
	forEachKind(t, kinds, turns, func(t *testing.T, k Kind, ms *testenv.ModelServer, _ provider.Provider) {
		p := withConfig(t, k, ms, func(c *provider.Config) { c.MaxAnswerBytes = maxAnswer })
		parts, _, err := collect(t, p, userRequest("hi"))
		if !errors.Is(err, provider.ErrAnswerTooLarge) {
			t.Fatalf("error %v, want ErrAnswerTooLarge", err)
		}
		if !strings.Contains(err.Error(), "1000 bytes") {
			t.Errorf("error %q does not name the cap", err)
		}
		size := 0
		for _, p := range parts {
			size += len(p.Text)
		}
		if size > maxAnswer {
			t.Errorf("%d bytes delivered, over the cap of %d", size, maxAnswer)
		}
		if n := len(ms.Requests()); n != 1 {
			t.Errorf("%d requests, want 1: an answer too large is not retried", n)
		}
	})
}

// testMalformedToolCall checks that a tool call the model botched
// (arguments that are not JSON, a tool that does not exist) reaches the
// caller as it is, for the agent loop to answer with an error result.
func testMalformedToolCall(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "call_x", Name: "no_such_tool", Arguments: `{"path": "README.md"`}}}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		_, resp, err := collect(t, p, userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		want := []provider.Content{provider.ToolCall("call_x", "no_such_tool", `{"path": "README.md"`)}
		if diff := cmp.Diff(want, resp.Message.ToolCalls()); diff != "" {
			t.Errorf("tool calls (-want +got):\n%s", diff)
		}
	})
}

// testConversation sends a second request with the first answer and
// the tool results in it, as the agent loop does.
func testConversation(t *testing.T, kinds []Kind) {
	turns := []testenv.Turn{
		{ToolCalls: []testenv.ToolCall{{Name: "bash", Arguments: `{"command":"ls"}`}}},
		{Text: "There are two files."},
	}
	forEachKind(t, kinds, turns, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		req := provider.Request{Messages: []provider.Message{provider.SystemMessage("Be brief."), provider.UserMessage("What is here?")}}
		_, first, err := collect(t, p, req)
		if err != nil {
			t.Fatal(err)
		}
		calls := first.Message.ToolCalls()
		if len(calls) != 1 || calls[0].ToolCallID != "call_1_1" {
			t.Fatalf("tool calls %+v", calls)
		}
		req.Messages = append(req.Messages, first.Message,
			provider.Message{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult(calls[0].ToolCallID, "a.go\nb.go\n", false)}})
		_, second, err := collect(t, p, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := second.Message.Text(); got != "There are two files." {
			t.Errorf("second answer %q", got)
		}
		if ms.Remaining() != 0 {
			t.Errorf("%d turns left", ms.Remaining())
		}
	})
}

// testRequestBody checks the request each API receives for BodyRequest.
func testRequestBody(t *testing.T, kinds []Kind) {
	forEachKind(t, kinds, []testenv.Turn{{Text: "ok"}}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		if _, _, err := collect(t, p, BodyRequest()); err != nil {
			t.Fatal(err)
		}
		var wantBody, gotBody map[string]any
		if err := json.Unmarshal([]byte(k.RequestBody), &wantBody); err != nil {
			t.Fatalf("want: %v", err)
		}
		if err := ms.Requests()[0].Decode(&gotBody); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantBody, gotBody); diff != "" {
			t.Errorf("request body (-want +got):\n%s", diff)
		}
	})
}

// testEncode checks that what a provider's Encode makes is the body the
// server receives for the same request (less "stream", which the SDKs add
// on sending), so that encoding a request ahead of time warms the encoders
// the real one goes through.
func testEncode(t *testing.T, kinds []Kind) {
	forEachKind(t, kinds, []testenv.Turn{{Text: "ok"}}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		if _, _, err := collect(t, p, BodyRequest()); err != nil {
			t.Fatal(err)
		}
		e, ok := p.(interface {
			Encode(provider.Request) ([]byte, error)
		})
		if !ok {
			t.Fatalf("%T cannot encode a request without sending it", p)
		}
		encoded, err := e.Encode(BodyRequest())
		if err != nil {
			t.Fatal(err)
		}
		var sent, enc map[string]any
		if err := ms.Requests()[0].Decode(&sent); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(encoded, &enc); err != nil {
			t.Fatalf("Encode made %s: %v", encoded, err)
		}
		delete(sent, "stream")
		delete(enc, "stream")
		if diff := cmp.Diff(sent, enc); diff != "" {
			t.Errorf("encoded body differs from the sent one (-sent +encoded):\n%s", diff)
		}
	})
}

// testIgnoresEnvironment checks that the SDKs' environment variables
// do not reach the clients: the key and endpoint are the Config's alone.
func testIgnoresEnvironment(t *testing.T, kinds []Kind) {
	for _, v := range []string{"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"} {
		t.Setenv(v, "http://127.0.0.1:1")
	}
	for _, v := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"} {
		t.Setenv(v, "from-the-environment")
	}
	t.Setenv("OPENAI_ORG_ID", "org-from-the-environment")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			ms := testenv.StartModelServer(t, testenv.Turn{Text: "ok"})
			p, err := k.New(k.Config(ms))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := collect(t, p, userRequest("hi")); err != nil {
				t.Fatal(err)
			}
			h := ms.Requests()[0].Header
			k.CheckKey(t, h)
			for _, name := range []string{"OpenAI-Organization", "X-Leak"} {
				if v := h.Get(name); v != "" {
					t.Errorf("%s: %q from the environment", name, v)
				}
			}
		})
	}
}

func testEarlyBreak(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{Text: "a long answer the caller stops reading"}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
		for part, err := range p.Stream(t.Context(), userRequest("hi")) {
			if err != nil {
				t.Fatal(err)
			}
			if part.Type == provider.PartTextDelta {
				break
			}
		}
	})
}

func testInvalidRequest(t *testing.T, kinds []Kind) {
	for _, tc := range []struct {
		name string
		req  provider.Request
		want string
	}{
		{"no messages", provider.Request{}, "no messages"},
		{"late system message", provider.Request{Messages: []provider.Message{provider.UserMessage("hi"), provider.SystemMessage("late")}}, "messages[1]: a system message after the conversation started"},
		{"tool result from the user", provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: []provider.Content{provider.ToolResult("c", "x", false)}}}}, "messages[0].content[0]: tool_result content in a user message"},
		{"unknown role", provider.Request{Messages: []provider.Message{{Role: "robot"}}}, `unknown role "robot"`},
		{"schema not an object", provider.Request{Messages: []provider.Message{provider.UserMessage("hi")}, Tools: []provider.Tool{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}}, `tool "t": the input schema is not a JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachKind(t, kinds, nil, func(t *testing.T, k Kind, ms *testenv.ModelServer, p provider.Provider) {
				_, _, err := collect(t, p, tc.req)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want one that says %q", err, tc.want)
				}
				if n := len(ms.Requests()); n != 0 {
					t.Errorf("%d requests sent for an invalid request", n)
				}
			})
		})
	}
}

// testRetryLog checks that each retried attempt is logged with what
// an operator needs (status, the server's wait), and never with the key.
func testRetryLog(t *testing.T, kinds []Kind) {
	turn := testenv.Turn{Text: "ok", Faults: []testenv.Fault{{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After-Ms": {"10"}}}}}
	forEachKind(t, kinds, []testenv.Turn{turn}, func(t *testing.T, k Kind, ms *testenv.ModelServer, _ provider.Provider) {
		var logged syncBuffer
		cfg := k.Config(ms)
		cfg.Logger = slog.New(slog.NewJSONHandler(&logged, nil))
		p, err := k.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := collect(t, p, userRequest("hi")); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
		if len(lines) != 1 {
			t.Fatalf("logged %q, want one record for the one failed attempt", lines)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
			t.Fatal(err)
		}
		for key, want := range map[string]any{"status": 429.0, "retry_after_ms": "10", "attempt": "0", "model": cfg.Model, "provider": p.Name()} {
			if rec[key] != want {
				t.Errorf("%s = %v, want %v in %s", key, rec[key], want, lines[0])
			}
		}
		if strings.Contains(logged.String(), Key) {
			t.Errorf("the log shows the key: %s", logged.String())
		}
	})
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
