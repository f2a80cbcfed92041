package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type fakeTool struct {
	name string
	run  func(json.RawMessage) Result
}

func (f fakeTool) Name() string            { return f.name }
func (f fakeTool) Description() string     { return "fake " + f.name }
func (f fakeTool) Schema() json.RawMessage { return schema(map[string]any{"x": prop("string", "x")}) }
func (f fakeTool) Run(_ context.Context, call json.RawMessage) Result {
	return f.run(call)
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	echo := fakeTool{name: "echo", run: func(c json.RawMessage) Result { return Result{Content: string(c)} }}
	boom := fakeTool{name: "boom", run: func(json.RawMessage) Result { panic("kaboom") }}
	r, err := NewRegistry(&Capper{Max: 100, Head: 30, Tail: 30}, echo, boom)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(fakeTool{name: "echo"}); err == nil {
		t.Error("duplicate registration accepted")
	}
	if _, err := NewRegistry(nil, echo, echo); err == nil {
		t.Error("NewRegistry accepted duplicates")
	}
	var names []string
	for _, d := range r.Definitions() {
		names = append(names, d.Name)
		if !json.Valid(d.InputSchema) {
			t.Errorf("%s: invalid schema", d.Name)
		}
	}
	if diff := cmp.Diff([]string{"echo", "boom"}, names); diff != "" {
		t.Errorf("definitions (-want +got):\n%s", diff)
	}
	if _, ok := r.Lookup("echo"); !ok {
		t.Error("Lookup(echo) failed")
	}
	// The definitions are kept, but each call's slice is its caller's, and
	// a tool registered later is described too.
	defs := r.Definitions()
	defs[0].Name = "changed"
	if err := r.Register(fakeTool{name: "late"}); err != nil {
		t.Fatal(err)
	}
	names = names[:0]
	for _, d := range r.Definitions() {
		names = append(names, d.Name+": "+d.Description)
	}
	if diff := cmp.Diff([]string{"echo: fake echo", "boom: fake boom", "late: fake late"}, names); diff != "" {
		t.Errorf("definitions after Register (-want +got):\n%s", diff)
	}

	tests := []struct {
		name, tool string
		args       string
		wantErr    bool
		want       string
	}{
		{"ok", "echo", `{"x":"1"}`, false, `{"x":"1"}`},
		{"capped", "echo", `{"x":"` + strings.Repeat("0123456789", 10) + `"}`, false, "[... 48 bytes dropped ...]"},
		{"unknown tool", "nope", `{}`, true, `unknown tool "nope"; available tools: echo, boom`},
		{"bad json", "echo", `{"x":`, true, "not valid JSON"},
		{"panic", "boom", `{}`, true, "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Run(context.Background(), "call1", tt.tool, json.RawMessage(tt.args))
			check(t, got, tt.wantErr, tt.want)
		})
	}
}

func TestBuiltinDefinitions(t *testing.T) {
	t.Parallel()
	l, _ := newWorkspace(t)
	r, err := NewRegistry(NewCapper(), Builtin(l, l, nil)...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bash", "process", "read_file", "write_file", "edit_file", "apply_patch", "list_directory", "tree", "find_files", "grep"}
	var got []string
	for _, d := range r.Definitions() {
		got = append(got, d.Name)
		var s map[string]any
		if err := json.Unmarshal(d.InputSchema, &s); err != nil || s["type"] != "object" {
			t.Errorf("%s: schema %s: %v", d.Name, d.InputSchema, err)
		}
		if strings.TrimSpace(d.Description) == "" {
			t.Errorf("%s: no description", d.Name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	// Every tool turns bad arguments into an error result.
	for _, tool := range r.Tools() {
		for _, bad := range []string{`[]`, `{"no_such_argument":1}`, `"x"`} {
			got := r.Run(context.Background(), "c", tool.Name(), json.RawMessage(bad))
			if !got.IsError {
				t.Errorf("%s(%s): not an error: %s", tool.Name(), bad, got.Content)
			}
		}
	}
}

// TestRegistryPassesCallID: a tool (or a decorator around it) learns the
// id of the model's call from its context.
func TestRegistryPassesCallID(t *testing.T) {
	t.Parallel()
	var got []string
	idTool := ctxTool{name: "id", run: func(ctx context.Context) Result {
		got = append(got, CallID(ctx))
		return Result{Content: "ok"}
	}}
	r, err := NewRegistry(nil, idTool)
	if err != nil {
		t.Fatal(err)
	}
	r.Run(context.Background(), "call-7", "id", nil)
	r.Run(WithCallID(context.Background(), "outer"), "", "id", nil)
	if diff := cmp.Diff([]string{"call-7", "outer"}, got); diff != "" {
		t.Errorf("call ids (-want +got):\n%s", diff)
	}
	if id := CallID(context.Background()); id != "" {
		t.Errorf("CallID of a bare context = %q", id)
	}
}

type ctxTool struct {
	name string
	run  func(context.Context) Result
}

func (c ctxTool) Name() string                                      { return c.name }
func (c ctxTool) Description() string                               { return "reads its context" }
func (c ctxTool) Schema() json.RawMessage                           { return json.RawMessage(`{"type":"object"}`) }
func (c ctxTool) Run(ctx context.Context, _ json.RawMessage) Result { return c.run(ctx) }
