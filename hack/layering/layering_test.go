package layering

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/aerie-run/aerie/"

// Prefixes of the heavy dependencies: the database drivers, the model SDKs
// and the MCP SDK.
var (
	drivers   = []string{"github.com/jackc/pgx", "modernc.org/sqlite"}
	modelSDKs = []string{"github.com/anthropics/anthropic-sdk-go", "github.com/openai/openai-go"}
	mcpSDK    = []string{"github.com/modelcontextprotocol/go-sdk"}
)

// A rule says what the packages Roots, and everything they link, must not
// link: any package under one of Forbidden, except the packages Allowed.
type rule struct {
	name      string
	roots     []string
	forbidden []string
	allowed   []string
	// why is what a reader who broke the rule needs to know.
	why string
}

func rules() []rule {
	return []rule{
		{
			name: "the transcript's speakers link no driver or SDK",
			roots: []string{"runner/transcript", "runner/store", "runner/journal", "runner/agent",
				"runner/events", "runner/atif", "runner/export", "cmd/kubectl-aerie"},
			forbidden: slices.Concat(drivers, modelSDKs, mcpSDK),
			why: "the drivers belong to store/postgres and store/sqlite, the model SDKs to provider/anthropic " +
				"and provider/openai, the MCP SDK to runner/mcp; the program (cmd/aerie) picks them",
		},
		{
			name:      "the neutral provider types link no model SDK",
			roots:     []string{"runner/provider"},
			forbidden: modelSDKs,
			why:       "what needs only the neutral types (the loop, the journal, the events) must link no SDK either",
		},
		{
			name:      "the controller links no runner package but runconfig",
			roots:     []string{"controllers", "cmd/aerie-controller"},
			forbidden: []string{module + "runner"},
			allowed:   []string{module + "runner/runconfig", module + "runner/executor/mtls"},
			why: "the controller and the runner meet only in runconfig, the pod's configuration and its report, " +
				"and in the executors' credentials, which the controller generates with runner/executor/mtls",
		},
		{
			name:  "the executors' credentials link the standard library alone",
			roots: []string{"runner/executor/mtls"},
			forbidden: []string{"github.com", "golang.org", "google.golang.org", "gopkg.in", "k8s.io", "sigs.k8s.io",
				"modernc.org", "go.uber.org"},
			allowed: []string{module + "runner/executor/mtls"},
			why:     "the controller imports it to generate each attempt's credentials",
		},
		{
			name:      "the kubectl plugin links only the runner's leaves",
			roots:     []string{"cmd/kubectl-aerie"},
			forbidden: []string{module + "runner"},
			allowed:   []string{module + "runner/runconfig", module + "runner/events", module + "runner/transcript"},
			why:       "it renders a session's events and submits runs; the loop and its tools run in the runner's pod",
		},
	}
}

// TestLayering checks every rule against the packages as they are built.
func TestLayering(t *testing.T) {
	t.Parallel()
	var roots []string
	for _, r := range rules() {
		for _, p := range r.roots {
			roots = append(roots, module+p)
		}
	}
	g, err := loadGraph(roots...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules() {
		for _, v := range g.check(r) {
			t.Errorf("%s: %s\n\t(%s)", r.name, v, r.why)
		}
	}
}

// TestLayeringFails: a rule broken by the packages as they are built is
// reported with the chain of imports that breaks it, so that the test above
// cannot pass for want of looking.
func TestLayeringFails(t *testing.T) {
	t.Parallel()
	g, err := loadGraph(module + "runner/store/postgres")
	if err != nil {
		t.Fatal(err)
	}
	got := g.check(rule{roots: []string{"runner/store/postgres"}, forbidden: drivers})
	if len(got) == 0 {
		t.Fatal("runner/store/postgres links pgx, yet no violation was reported")
	}
	want := "runner/store/postgres → github.com/jackc/pgx/v5"
	if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, want) }) {
		t.Errorf("violations %q; want one starting %q", got, want)
	}
}

// TestCheck: each forbidden package is reported once per root, by the
// shortest chain of imports that reaches it.
func TestCheck(t *testing.T) {
	t.Parallel()
	g := graph{
		"a":             {"b", "fmt", "c"},
		"b":             {"c", "heavy/x"},
		"c":             {"heavy/y"},
		"heavy/x":       nil,
		"heavy/y":       nil,
		"heavyweight":   nil,
		"fmt":           nil,
		"ok":            {"fmt", "heavyweight", "heavy/allowed"},
		"heavy/allowed": nil,
	}
	tests := []struct {
		name string
		r    rule
		want []string
	}{
		{"shortest chains, sorted", rule{roots: []string{"a"}, forbidden: []string{"heavy"}},
			[]string{"a → b → heavy/x", "a → c → heavy/y"}},
		{"prefixes end at a path element, allowed packages pass", rule{roots: []string{"ok"}, forbidden: []string{"heavy"}, allowed: []string{"heavy/allowed"}},
			nil},
		{"a forbidden root", rule{roots: []string{"heavy/x"}, forbidden: []string{"heavy"}},
			[]string{"heavy/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := g.checkFrom(tt.r, tt.r.roots)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// graph maps each package to the packages it imports.
type graph map[string][]string

// loadGraph lists roots and everything they link, with their imports.
func loadGraph(roots ...string) (graph, error) {
	args := append([]string{"list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`}, roots...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			return nil, fmt.Errorf("go list -deps: %s: %w", ee.Stderr, err)
		}
		return nil, fmt.Errorf("go list -deps: %w", err)
	}
	g := graph{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g, nil
}

// check reports each package that r forbids and one of r's roots links,
// as the shortest chain of imports from that root.
func (g graph) check(r rule) []string {
	roots := make([]string, len(r.roots))
	for i, p := range r.roots {
		roots[i] = module + p
	}
	return g.checkFrom(r, roots)
}

func (g graph) checkFrom(r rule, roots []string) []string {
	var out []string
	for _, root := range roots {
		// Breadth first, so that each package's recorded parent is on a
		// shortest chain from root.
		parent := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if r.forbids(p) {
				out = append(out, chain(parent, p))
			}
			for _, dep := range g[p] {
				if _, seen := parent[dep]; !seen {
					parent[dep] = p
					queue = append(queue, dep)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// forbids says whether r forbids linking p.
func (r rule) forbids(p string) bool {
	if slices.Contains(r.allowed, p) {
		return false
	}
	return slices.ContainsFunc(r.forbidden, func(f string) bool {
		return p == f || strings.HasPrefix(p, f+"/")
	})
}

// chain is the imports from the root to p, as "root → … → p", with
// aerie's own packages named within the module.
func chain(parent map[string]string, p string) string {
	var c []string
	for ; p != ""; p = parent[p] {
		c = append(c, strings.TrimPrefix(p, module))
	}
	slices.Reverse(c)
	return strings.Join(c, " → ")
}
