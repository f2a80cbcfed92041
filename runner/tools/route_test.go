package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
)

// twoPlaces returns the built-in tools over two Local executors on
// workspaces of their own, "main" the default, and the workspaces.
func twoPlaces(t *testing.T) (map[string]Tool, string, string) {
	t.Helper()
	l1, d1 := newWorkspace(t)
	l2, d2 := newWorkspace(t)
	testenv.WriteTree(t, d1, map[string]string{"who.txt": "main\n"})
	testenv.WriteTree(t, d2, map[string]string{"who.txt": "tools\n"})
	byName := map[string]Tool{}
	for _, tl := range BuiltinOn([]Place{{Name: "main", Files: l1, Commands: l1}, {Name: "tools", Files: l2, Commands: l2}}) {
		byName[tl.Name()] = tl
	}
	return byName, d1, d2
}

func TestBuiltinOnOnePlaceIsBuiltin(t *testing.T) {
	t.Parallel()
	l, _ := newWorkspace(t)
	one := BuiltinOn([]Place{{Name: "workspace", Files: l, Commands: l}})
	plain := Builtin(l, l, nil)
	if len(one) != len(plain) {
		t.Fatalf("%d tools, want %d", len(one), len(plain))
	}
	for i := range one {
		if diff := cmp.Diff(string(plain[i].Schema()), string(one[i].Schema())); diff != "" {
			t.Errorf("%s schema (-Builtin +BuiltinOn):\n%s", one[i].Name(), diff)
		}
		if one[i].Description() != plain[i].Description() {
			t.Errorf("%s description changed with one executor", one[i].Name())
		}
	}
}

func TestBuiltinOnSchemas(t *testing.T) {
	t.Parallel()
	ts, _, _ := twoPlaces(t)
	for name, tl := range ts {
		var s struct {
			Properties map[string]struct {
				Type string   `json:"type"`
				Enum []string `json:"enum"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tl.Schema(), &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, ok := s.Properties[ArgExecutor]
		if !ok {
			t.Errorf("%s: no %q property in %s", name, ArgExecutor, tl.Schema())
			continue
		}
		if diff := cmp.Diff([]string{"main", "tools"}, p.Enum); diff != "" || p.Type != "string" {
			t.Errorf("%s: executor property %+v, want a string enum of main, tools", name, p)
		}
		if !strings.Contains(tl.Description(), "main, tools; the default is main") {
			t.Errorf("%s: description does not name the executors:\n%s", name, tl.Description())
		}
	}
}

func TestBuiltinOnRoutes(t *testing.T) {
	t.Parallel()
	ts, d1, d2 := twoPlaces(t)
	tests := []struct {
		name, tool, args string
		wantErr          bool
		contains         string
	}{
		{name: "bash default", tool: "bash", args: `{"command":"cat who.txt; pwd"}`, contains: "main\n" + d1},
		{name: "bash on tools", tool: "bash", args: `{"command":"cat who.txt; pwd","executor":"tools"}`, contains: "tools\n" + d2},
		{name: "bash on main named", tool: "bash", args: `{"command":"cat who.txt","executor":"main"}`, contains: "main"},
		{name: "read default", tool: "read_file", args: `{"path":"who.txt"}`, contains: "main"},
		{name: "read on tools", tool: "read_file", args: `{"path":"who.txt","executor":"tools"}`, contains: "tools"},
		{name: "unknown executor", tool: "bash", args: `{"command":"true","executor":"gpu"}`, wantErr: true,
			contains: `bash: unknown executor "gpu": use one of main, tools (the default is main)`},
		{name: "executor not a string", tool: "read_file", args: `{"path":"x","executor":1}`, wantErr: true,
			contains: `"executor" must be a string`},
		{name: "error names the executor", tool: "read_file", args: `{"path":"missing.txt","executor":"tools"}`,
			wantErr: true, contains: "[executor tools] read_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, ts[tt.tool].Run(context.Background(), json.RawMessage(tt.args)), tt.wantErr, tt.contains)
		})
	}
}

func TestBuiltinOnWritesWhereNamed(t *testing.T) {
	t.Parallel()
	ts, d1, d2 := twoPlaces(t)
	res := ts["write_file"].Run(context.Background(), json.RawMessage(`{"path":"out.txt","content":"x","executor":"tools"}`))
	check(t, res, false)
	if _, err := os.Stat(filepath.Join(d2, "out.txt")); err != nil {
		t.Errorf("not written on tools: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d1, "out.txt")); err == nil {
		t.Error("written on main too")
	}
	type fileTool interface {
		FilePaths(json.RawMessage) []string
	}
	rf := ts["read_file"].(fileTool)
	if got := rf.FilePaths(json.RawMessage(`{"path":"a/b.txt"}`)); !slices.Equal(got, []string{"a/b.txt"}) {
		t.Errorf("FilePaths on the default = %v", got)
	}
	if got := rf.FilePaths(json.RawMessage(`{"path":"a/b.txt","executor":"tools"}`)); got != nil {
		t.Errorf("FilePaths on tools = %v, want none of the default's", got)
	}
	p := ts["bash"].(Placed)
	for args, want := range map[string]string{`{"command":"x"}`: "main", `{"command":"x","executor":"tools"}`: "tools"} {
		if got := p.ExecutorOf(json.RawMessage(args)); got != want {
			t.Errorf("ExecutorOf(%s) = %s, want %s", args, got, want)
		}
	}
}

// TestBuiltinOnBackground starts a background process on each executor:
// the process tool finds each by its id alone, lists both, and a process
// named on the wrong executor is not found there.
func TestBuiltinOnBackground(t *testing.T) {
	t.Parallel()
	ts, _, _ := twoPlaces(t)
	ctx := context.Background()
	idRE := regexp.MustCompile(`started background process (\S+)`)
	start := func(args string) string {
		res := ts["bash"].Run(ctx, json.RawMessage(args))
		check(t, res, false)
		m := idRE.FindStringSubmatch(res.Content)
		if m == nil {
			t.Fatalf("no id in %q", res.Content)
		}
		return m[1]
	}
	onMain := start(`{"command":"cat who.txt; exec sleep 30","background":true}`)
	onTools := start(`{"command":"cat who.txt; exec sleep 30","background":true,"executor":"tools"}`)
	if onMain == onTools {
		t.Fatalf("both processes have id %s", onMain)
	}
	proc := ts["process"]
	p := proc.(Placed)
	if got := p.ExecutorOf(args(t, map[string]string{"action": "poll", "id": onTools})); got != "tools" {
		t.Errorf("process of %s runs on %s, want tools", onTools, got)
	}
	list := proc.Run(ctx, json.RawMessage(`{"action":"list"}`))
	check(t, list, false, "executor main:\n"+onMain, "executor tools:\n"+onTools)
	wrong := proc.Run(ctx, args(t, map[string]string{"action": "poll", "id": onTools, "executor": "main"}))
	check(t, wrong, true, "[executor main] process: no background process")
	for id, want := range map[string]string{onMain: "main", onTools: "tools"} {
		testenv.Eventually(t, 5*time.Second, "the output of "+id, func() bool {
			res := proc.Run(ctx, args(t, map[string]string{"action": "poll", "id": id}))
			return strings.Contains(res.Content, want)
		})
		kill := proc.Run(ctx, args(t, map[string]string{"action": "kill", "id": id}))
		check(t, kill, false, "process "+id)
	}
	listed := proc.Run(ctx, json.RawMessage(`{"action":"list","executor":"tools"}`))
	if strings.Contains(listed.Content, onMain) || !slices.Contains(strings.Fields(listed.Content), onTools) {
		t.Errorf("list on tools:\n%s", listed.Content)
	}
}

// BenchmarkRoute measures what routing adds to a call: read_file of a
// small file on the default executor, directly and through BuiltinOn with
// two executors, the executor named.
func BenchmarkRoute(b *testing.B) {
	l1, d1 := newWorkspace(b)
	l2, _ := newWorkspace(b)
	testenv.WriteTree(b, d1, map[string]string{"f.txt": "hello\n"})
	find := func(ts []Tool) Tool {
		for _, tl := range ts {
			if tl.Name() == "read_file" {
				return tl
			}
		}
		b.Fatal("no read_file")
		return nil
	}
	direct := find(Builtin(l1, l1, nil))
	routed := find(BuiltinOn([]Place{{Name: "main", Files: l1, Commands: l1}, {Name: "tools", Files: l2, Commands: l2}}))
	for _, bc := range []struct {
		name string
		tool Tool
		args string
	}{
		{"direct", direct, `{"path":"f.txt"}`},
		{"routed", routed, `{"path":"f.txt","executor":"main"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				if res := bc.tool.Run(ctx, json.RawMessage(bc.args)); res.IsError {
					b.Fatal(res.Content)
				}
			}
		})
	}
}
