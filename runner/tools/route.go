package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// ArgExecutor is the argument that names the executor a routed call runs
// on (see BuiltinOn).
const ArgExecutor = "executor"

// Place is one executor the built-in tools run on, by name.
type Place struct {
	Name     string
	Files    Files
	Commands Commands
	// Background is the table of the background processes bash starts
	// there; nil is a table of its own.
	Background *Background
}

// Placed is a tool whose calls run on one of the session's executors, by
// name: the hooks of a call run there too. A tool that is not Placed runs
// on the default executor.
type Placed interface {
	ExecutorOf(args json.RawMessage) string
}

// BuiltinOn returns the built-in tools over places, the first of them the
// default executor. With one place they are Builtin's, unchanged. With
// more, each tool takes the optional argument "executor", an enum of the
// places' names (the default when absent), and its description says
// which executors exist; the process tool finds a background process on
// the executor that started it.
func BuiltinOn(places []Place) []Tool {
	for i := range places {
		if places[i].Background == nil {
			places[i].Background = NewBackground(places[i].Commands)
		}
	}
	first := Builtin(places[0].Files, places[0].Commands, places[0].Background)
	if len(places) == 1 {
		return first
	}
	per := make([][]Tool, len(places))
	per[0] = first
	for i := 1; i < len(places); i++ {
		per[i] = Builtin(places[i].Files, places[i].Commands, places[i].Background)
	}
	out := make([]Tool, len(first))
	for j := range first {
		r := &routed{places: places, tools: make([]Tool, len(places))}
		for i := range places {
			r.tools[i] = per[i][j]
		}
		out[j] = r
	}
	return out
}

// routed is a built-in tool on several executors: one instance of it per
// place, in the places' order, the first the default.
type routed struct {
	places []Place
	tools  []Tool
}

func (r *routed) Name() string { return r.tools[0].Name() }

// Description is the tool's own with the executors it can run on.
func (r *routed) Description() string {
	return fmt.Sprintf("%s\n\nRuns on the executor named by %q: %s; the default is %s.",
		r.tools[0].Description(), ArgExecutor, strings.Join(r.names(), ", "), r.places[0].Name)
}

// Schema is the tool's own with the executor argument added.
func (r *routed) Schema() json.RawMessage {
	var s map[string]any
	if err := json.Unmarshal(r.tools[0].Schema(), &s); err != nil {
		panic(fmt.Sprintf("tool schema of %s: %v", r.Name(), err)) // built-in schemas are objects
	}
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props[ArgExecutor] = enum(fmt.Sprintf("The executor to run on (default %s).", r.places[0].Name), r.names()...)
	s["properties"] = props
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tool schema of %s: %v", r.Name(), err))
	}
	return b
}

func (r *routed) names() []string {
	names := make([]string, len(r.places))
	for i, p := range r.places {
		names[i] = p.Name
	}
	return names
}

// ExecutorOf implements Placed: the executor the call names, else the
// default (for the process tool, the executor that started the process).
func (r *routed) ExecutorOf(args json.RawMessage) string {
	i, _, err := r.route(args)
	if err != nil || i < 0 {
		return r.places[0].Name
	}
	return r.places[i].Name
}

// FilePaths are the files a call on the default executor reads or edits,
// for the tools that say (see ReadFile.FilePaths): the project
// instructions below the working directory are the default's. A call on
// another executor reaches none of its files.
func (r *routed) FilePaths(call json.RawMessage) []string {
	i, rest, err := r.route(call)
	if err != nil || i != 0 {
		return nil
	}
	ft, ok := r.tools[0].(filePather)
	if !ok {
		return nil
	}
	return ft.FilePaths(rest)
}

// filePather is a file tool that names the files a call reaches.
type filePather interface {
	FilePaths(call json.RawMessage) []string
}

// Run runs the call on the executor it names, without the executor
// argument. An error result says which executor it came from.
func (r *routed) Run(ctx context.Context, call json.RawMessage) Result {
	i, rest, err := r.route(call)
	if err != nil {
		return errorf("%s: %v", r.Name(), err)
	}
	if i < 0 {
		return r.listAll(ctx, rest)
	}
	res := r.tools[i].Run(ctx, rest)
	if res.IsError {
		sep := " "
		if strings.HasPrefix(res.Content, "\n") {
			sep = ""
		}
		res.Content = "[executor " + r.places[i].Name + "]" + sep + res.Content
	}
	return res
}

// route finds the place a call runs on and the call without the executor
// argument. -1 is the process tool's list on every executor.
func (r *routed) route(call json.RawMessage) (int, json.RawMessage, error) {
	if len(bytes.TrimSpace(call)) == 0 {
		call = json.RawMessage("{}")
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(call, &args); err != nil {
		// The tool itself reports what is wrong with its arguments.
		return 0, call, nil //nolint:nilerr // the tool's own decode explains it
	}
	raw, named := args[ArgExecutor]
	if !named {
		return r.unnamed(args), call, nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return 0, nil, fmt.Errorf("invalid arguments: %q must be a string, one of %s",
			ArgExecutor, strings.Join(r.names(), ", "))
	}
	delete(args, ArgExecutor)
	rest, err := json.Marshal(args)
	if err != nil {
		return 0, nil, fmt.Errorf("invalid arguments: %w", err)
	}
	for i, p := range r.places {
		if p.Name == name {
			return i, rest, nil
		}
	}
	return 0, nil, fmt.Errorf("unknown executor %q: use one of %s (the default is %s), or leave %q out",
		name, strings.Join(r.names(), ", "), r.places[0].Name, ArgExecutor)
}

// unnamed is the place of a call that names no executor: the default,
// but for the process tool the executor whose bash started the process
// with the call's id, and every executor for its list.
func (r *routed) unnamed(args map[string]json.RawMessage) int {
	if r.Name() != "process" {
		return 0
	}
	var action, id string
	_ = json.Unmarshal(args["action"], &action) // the tool reports a bad action
	_ = json.Unmarshal(args["id"], &id)
	if action == actionList {
		return -1
	}
	for i, p := range r.places {
		if id != "" && p.Background.has(id) {
			return i
		}
	}
	return 0
}

// listAll lists the background processes of every executor.
func (r *routed) listAll(ctx context.Context, call json.RawMessage) Result {
	var sb strings.Builder
	for i, p := range r.places {
		res := r.tools[i].Run(ctx, call)
		if res.IsError {
			return res
		}
		fmt.Fprintf(&sb, "executor %s:\n%s\n", p.Name, strings.TrimSuffix(res.Content, "\n"))
	}
	return Result{Content: sb.String()}
}

// PlacedOf returns t, or the tool it wraps (through Unwrap), as Placed.
func PlacedOf(t Tool) (Placed, bool) {
	for {
		if p, ok := t.(Placed); ok {
			return p, true
		}
		u, ok := t.(interface{ Unwrap() Tool })
		if !ok {
			return nil, false
		}
		t = u.Unwrap()
	}
}
