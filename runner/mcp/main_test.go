package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/process"
)

// testReaper makes this test binary a child subreaper, as the executor
// is, so that what a torn-down server left behind comes back here and
// is reaped: a process looked for afterwards is then really gone.
var testReaper *process.Reaper

// serverEnv, set in a child's environment, makes this test binary an
// MCP server on its standard input and output instead of running the
// tests: the real process a stdio test talks to through the executor.
const serverEnv = "MCPTEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(serverEnv); mode != "" {
		os.Exit(serve(mode))
	}
	testenv.RunSubreaped(m, &testReaper)
}

// serve runs the test server over stdio in the given mode.
func serve(mode string) int {
	switch mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "boom: cannot read the configuration")
		return 7
	case "exit":
		return 0
	case "leak":
		// A server that fails quoting its credential.
		fmt.Fprintln(os.Stderr, "bad token "+os.Getenv("LEAKED"))
		return 7
	case "hang":
		time.Sleep(time.Hour)
		return 0
	}
	if err := newTestServer("stdio-test").Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type textArgs struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type sleepArgs struct {
	MS int `json:"ms"`
}

type nameArgs struct {
	Name string `json:"name"`
}

type noArgs struct{}

// newTestServer is an MCP server with a tool for every case the client
// handles.
func newTestServer(name string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: name, Version: "1.0.0"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text."}, func(_ context.Context, _ *sdk.CallToolRequest, in textArgs) (*sdk.CallToolResult, any, error) {
		return text(in.Text), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Fail."}, func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
		return nil, nil, errors.New("it broke")
	})
	sdk.AddTool(s, &sdk.Tool{Name: "sleep", Description: "Sleep."}, func(ctx context.Context, _ *sdk.CallToolRequest, in sleepArgs) (*sdk.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond):
			return text("slept"), nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "getenv", Description: "Read a variable."}, func(_ context.Context, _ *sdk.CallToolRequest, in nameArgs) (*sdk.CallToolResult, any, error) {
		v, ok := os.LookupEnv(in.Name)
		if !ok {
			return text("(unset)"), nil, nil
		}
		return text(v), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "pwd", Description: "The working directory."}, func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
		wd, err := os.Getwd()
		return text(wd), nil, err
	})
	sdk.AddTool(s, &sdk.Tool{Name: "spawn", Description: "Start a background child and return its PID."}, func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		return text(strconv.Itoa(cmd.Process.Pid)), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "exit", Description: "Exit the server."}, func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "mixed", Description: "Every kind of content."}, func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "a chart:"},
			&sdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG....")},
			&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")},
			&sdk.ResourceLink{URI: "file:///r.txt", Name: "r.txt", Description: "the report"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.md", MIMEType: "text/markdown", Text: "# A"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///b.bin", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}},
		}}, nil, nil
	})
	s.AddTool(&sdk.Tool{Name: "structured", Description: "Structured content only.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{StructuredContent: map[string]any{"count": 3}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "empty", Description: "No content.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	s.AddTool(&sdk.Tool{Name: "dotted.name", Description: "A name model APIs refuse.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	return s
}

// testToolNames are the tools newTestServer offers, as the model sees
// them, for a server with the id "t".
var testToolNames = []string{"mcp__t__echo", "mcp__t__fail", "mcp__t__sleep", "mcp__t__getenv", "mcp__t__pwd", "mcp__t__spawn", "mcp__t__exit", "mcp__t__mixed", "mcp__t__structured", "mcp__t__empty"}
