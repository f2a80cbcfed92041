package hooks

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aerie-run/aerie/runner/layer"
)

// BenchmarkLoad measures discovery of 20 layers holding 50 hook files
// (a hooks.toml in 5 of them, 45 YAML files).
func BenchmarkLoad(b *testing.B) {
	var layers []layer.Layer
	for i := range 20 {
		files := map[string]string{}
		if i%4 == 0 {
			files["hooks.toml"] = tomlFile(b, spec{Event: PreToolUse, Matcher: "bash", Command: "./guard.sh"}, spec{Event: Stop, Command: "make test"})
		}
		for j := range 45 / 20 {
			files[fmt.Sprintf("hooks/h%d.yaml", j)] = yamlFile(b,
				spec{Event: PreToolUse, Matcher: "Bash|Write", Command: "guard --strict", OnFailure: "block"},
				spec{Event: PostToolUse, Matcher: "mcp__.*", Command: "log"},
			)
		}
		if i < 5 {
			files["hooks/extra.yaml"] = yamlFile(b, spec{Event: SessionStart, Command: "echo hi"})
		}
		layers = append(layers, newLayer(b, fmt.Sprint(i), layer.KindHome, files))
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := Load(layers, nil, LoadOptions{Dir: "/ws"})
		if err != nil || len(got.Files) != 50 {
			b.Fatalf("%d files, %v", len(got.Files), err)
		}
	}
}

// BenchmarkPreToolUseNoMatch measures a tool call when hooks exist but
// none matches it: the cost every call pays.
func BenchmarkPreToolUseNoMatch(b *testing.B) {
	ws := newWorkspace(b)
	var specs []spec
	for i := range 50 {
		specs = append(specs, spec{Event: PreToolUse, Matcher: fmt.Sprintf("tool_%d|other_%d", i, i), Command: "true"})
		specs = append(specs, spec{Event: PreToolUse, Matcher: fmt.Sprintf("^mcp__s%d__", i), Command: "true"})
	}
	e := ws.engine(b, map[string]string{"hooks/a.yaml": yamlFile(b, specs...)}, Options{})
	args := json.RawMessage(`{"command":"ls"}`)
	b.ReportAllocs()
	for b.Loop() {
		if v, err := e.PreToolUse(b.Context(), "bash", args); err != nil || len(v.Runs) != 0 {
			b.Fatal(v, err)
		}
	}
}

// BenchmarkPreToolUseOneHook measures one hook run end to end: a process
// group started, the event written, the verdict read.
func BenchmarkPreToolUseOneHook(b *testing.B) {
	ws := newWorkspace(b)
	e := ws.engine(b, map[string]string{"hooks/a.yaml": yamlFile(b, spec{Event: PreToolUse, Command: `echo '{"hookSpecificOutput":{"permissionDecision":"allow"}}'`})}, Options{})
	args := json.RawMessage(`{"command":"ls"}`)
	b.ReportAllocs()
	for b.Loop() {
		if v, err := e.PreToolUse(b.Context(), "bash", args); err != nil || v.Decision != Allow {
			b.Fatal(v, err)
		}
	}
}

func BenchmarkParseOutput(b *testing.B) {
	out := []byte(`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no","updatedInput":{"command":"ls -la","timeout":10},"additionalContext":"ctx"},"systemMessage":"m"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseOutput(out); err != nil {
			b.Fatal(err)
		}
	}
}
