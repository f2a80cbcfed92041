package session

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/instructions"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/tools"
)

// DefaultExecutor is the name of a session's default executor,
// Options.Executor: the workspace sidecar in a pod, the local machine in
// `aerie run`.
const DefaultExecutor = extensions.DefaultExecutor

// NamedExecutor is one of a session's executors besides the default.
type NamedExecutor struct {
	// Name is what the model, custom tool manifests and MCP server
	// declarations call it (see CheckExecutorName).
	Name     string
	Executor Executor
}

// executorName is a DNS label, as a pod's executor is named.
var executorName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// CheckExecutorName says what is wrong with name as the name of an
// executor besides the default: it must be a DNS label (lowercase
// letters, digits and '-', at most 63), and neither DefaultExecutor nor
// mcp.ExecutorLocal, which name the default.
func CheckExecutorName(name string) error {
	switch {
	case name == DefaultExecutor:
		return fmt.Errorf("%q is the default executor's name; pick another", name)
	case name == mcp.ExecutorLocal:
		return fmt.Errorf("%q names the default executor in MCP server declarations; pick another", name)
	case !executorName.MatchString(name):
		return fmt.Errorf("%q is not a DNS label: use 1 to 63 lowercase letters, digits and '-', "+
			"starting and ending with a letter or digit", name)
	}
	return nil
}

// executors are a session's executors by name, the default first: where
// its tools, their hooks, its custom tools and its stdio MCP servers run.
// Options.Executor is the default, working in Options.Extensions.Dir;
// Options.Executors are the others, each working in its workspace root.
// The workspace diff is the default's alone; teardown runs on every one.
type executors struct {
	def    Executor
	dir    string
	others []NamedExecutor
	// calls is Options.CallsDefault.
	calls string
}

func (o Options) executors() executors {
	return executors{def: o.Executor, dir: o.Extensions.Dir, others: o.Executors, calls: o.CallsDefault}
}

// check says what is wrong with the executors' names.
func (x executors) check() error {
	seen := map[string]bool{}
	for i, e := range x.others {
		if err := CheckExecutorName(e.Name); err != nil {
			return fmt.Errorf("executors[%d]: %w", i, err)
		}
		if seen[e.Name] {
			return fmt.Errorf("executors[%d]: %q is named twice; give each executor its own name", i, e.Name)
		}
		if e.Executor == nil {
			return fmt.Errorf("executors[%d] (%s): no executor", i, e.Name)
		}
		seen[e.Name] = true
	}
	if x.calls != "" && !seen[x.calls] {
		return fmt.Errorf("the default of calls, %q, is none of the executors; name one of them, or none", x.calls)
	}
	return nil
}

// other returns the executor name besides the default.
func (x executors) other(name string) (Executor, bool) {
	i := slices.IndexFunc(x.others, func(e NamedExecutor) bool { return e.Name == name })
	if i < 0 {
		return nil, false
	}
	return x.others[i].Executor, true
}

// places are where the built-in tools run, with cmds (cmds[0] the
// default's) as the commands of each executor in order, and bg the
// default's table of background processes.
func (x executors) places(cmds []tools.Commands, bg *tools.Background) []tools.Place {
	ps := make([]tools.Place, 0, 1+len(x.others))
	ps = append(ps, tools.Place{Name: DefaultExecutor, Files: x.def, Commands: cmds[0], Background: bg})
	for i, e := range x.others {
		ps = append(ps, tools.Place{Name: e.Name, Files: e.Executor, Commands: cmds[i+1]})
	}
	// The first place is where a call that names none runs.
	if i := slices.IndexFunc(ps, func(p tools.Place) bool { return p.Name == x.calls }); i > 0 {
		ps[0], ps[i] = ps[i], ps[0]
	}
	return ps
}

// commands are the executors' own commands, the default first.
func (x executors) commands() []tools.Commands {
	cmds := make([]tools.Commands, 0, 1+len(x.others))
	cmds = append(cmds, x.def)
	for _, e := range x.others {
		cmds = append(cmds, e.Executor)
	}
	return cmds
}

// hookOn is hooks.Options.On: the executor besides the default that a
// tool call runs on, working in its workspace root, which the hooks are
// told (their cwd) when the executor says where it is (a Remote does).
func (x executors) hookOn(name string) (hooks.Commands, string, bool) {
	e, ok := x.other(name)
	if !ok {
		return nil, "", false
	}
	var dir string
	if w, ok := e.(interface{ Workspace() string }); ok {
		dir = w.Workspace()
	}
	return e, dir, true
}

// mcpOn is mcp.Options.On: a stdio server runs in the workspace root of
// an executor besides the default.
func (x executors) mcpOn(name string) (mcp.Commands, string, bool) {
	e, ok := x.other(name)
	if !ok {
		return nil, "", false
	}
	return e, "", true
}

// files is instructions.NewExecutors' files: the workspace of an
// executor besides the default.
func (x executors) files(name string) (instructions.Files, bool) {
	e, ok := x.other(name)
	return e, ok
}

// named are the executors besides the default as custom tools run on
// them.
func (x executors) named() []extensions.NamedCommands {
	out := make([]extensions.NamedCommands, 0, len(x.others))
	for _, e := range x.others {
		out = append(out, extensions.NamedCommands{Name: e.Name, Commands: e.Executor})
	}
	return out
}

// teardownAll ends every process group on every executor, at once, and
// reports them; the errors name the executor.
func (x executors) teardownAll(ctx context.Context) ([]process.Report, error) {
	all := append([]NamedExecutor{{Name: DefaultExecutor, Executor: x.def}}, x.others...)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		reps []process.Report
		errs []error
	)
	for _, e := range all {
		wg.Go(func() {
			r, err := e.Executor.TeardownAll(ctx)
			mu.Lock()
			defer mu.Unlock()
			reps = append(reps, r...)
			if err != nil {
				errs = append(errs, fmt.Errorf("executor %s: %w", e.Name, err))
			}
		})
	}
	wg.Wait()
	return reps, errors.Join(errs...)
}
