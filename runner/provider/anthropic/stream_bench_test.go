package anthropic_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
)

// BenchmarkTurn streams one answer with a bash call, as a turn of
// a 100-turn session asks it, from the fake model server, and reports the
// client's part: the time of the call less the server's own time answering
// it (client-ms/op), which is what the loop spends on the request: building
// and sending it, and reading the answer.
//
//	go test -run '^$' -bench Turn -count 10 ./runner/provider/anthropic/
func BenchmarkTurn(b *testing.B) {
	ms := testenv.StartModelServer(b)
	p, err := anthropic.New(provider.Config{Provider: "anthropic", Model: "claude-test", APIKey: "k", BaseURL: ms.URL()})
	if err != nil {
		b.Fatal(err)
	}
	msgs := []provider.Message{provider.SystemMessage("You are a coding agent."), provider.UserMessage("Run true a hundred times.")}
	for i := range 100 {
		id := "call_" + strconv.Itoa(i)
		msgs = append(msgs,
			provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.ToolCall(id, "bash", `{"command":"true"}`)}},
			provider.Message{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult(id, "[no output]", false)}},
		)
	}
	tools := []provider.Tool{{Name: "bash", Description: "Run a bash command.", InputSchema: []byte(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}
	req := provider.Request{Messages: msgs, Tools: tools}
	var client time.Duration
	for b.Loop() {
		ms.Add(testenv.Turn{ToolCalls: []testenv.ToolCall{{Name: "bash", Arguments: `{"command":"true"}`}}})
		n := len(ms.Requests())
		start := time.Now()
		var acc provider.Accumulator
		for part, err := range p.Stream(b.Context(), req) {
			if err != nil {
				b.Fatal(err)
			}
			if err := acc.Add(part); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := acc.Response(); err != nil {
			b.Fatal(err)
		}
		client += time.Since(start) - ms.ServerTimes(b.Context())[n]
	}
	b.ReportMetric(float64(client.Microseconds())/1000/float64(b.N), "client-ms/op")
}
