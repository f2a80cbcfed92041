package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// corpusPlugin is the directory of a plugin of the official Claude
// marketplace's corpus.
func corpusPlugin(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(corpusMarket, "plugins", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// install installs a plugin with the components given.
func (e *e2e) install(dir, components string) {
	e.t.Helper()
	if r := e.run("plugin", "install", dir, "--components", components); r.code != 0 {
		e.t.Fatalf("plugin install %s: exit %d\n%s", dir, r.code, r.stderr)
	}
}

// captured keeps the requests a scripted conversation answered.
type captured struct {
	mu   sync.Mutex
	reqs []testenv.ModelRequest
}

// turn answers with then, keeping the request.
func (c *captured) turn(then testenv.Turn) testenv.Turn {
	return testenv.Turn{Respond: func(r testenv.ModelRequest) testenv.Turn {
		c.mu.Lock()
		c.reqs = append(c.reqs, r)
		c.mu.Unlock()
		return then
	}}
}

func (c *captured) first(t *testing.T) testenv.ModelRequest {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		t.Fatal("the conversation got no request")
	}
	return c.reqs[0]
}

// TestRunPluginAgent installs the corpus's hookify plugin with its agents
// and spawns its conversation-analyzer: the child runs on the agent's
// body as its system prompt with the tools its frontmatter names (Read,
// Grep: read_file and grep), and spawn_agent's description lists it.
func TestRunPluginAgent(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		toolTurn(call("sa", "spawn_agent", map[string]any{
			"task": "analyze: the conversation so far", "agent_type": "hookify:conversation-analyzer",
		})),
		answer("analyzed"))
	var child captured
	e.model.Conversation("analyze:", child.turn(answer("no behaviour to prevent")))
	e.install(corpusPlugin(t, "hookify"), "agents")

	out := e.run("run", "look back at the conversation")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	req := child.first(t)
	if sys := systemPrompt(t, req); !strings.HasPrefix(sys, "You are a conversation analysis specialist") {
		t.Errorf("the child's system prompt is not the agent's body:\n%.300s", sys)
	}
	if got, want := offeredTools(t, req), []string{"grep", "read_file"}; !slices.Equal(sorted(got), want) {
		t.Errorf("the child's tools = %v, want %v (its frontmatter's Read, Grep)", got, want)
	}
	root := e.model.Requests()[0]
	var r struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(root.Body, &r); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(r.Tools, func(x struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}) bool {
		return x.Name == "spawn_agent"
	})
	if i < 0 || !strings.Contains(r.Tools[i].Description, "hookify:conversation-analyzer: Use this agent") {
		t.Errorf("spawn_agent's description does not list the plugin's agent: %+v", r.Tools)
	}
	last := e.model.Requests()[len(e.model.Requests())-1]
	if res := toolResults(t, last)["sa"]; res.isError || !strings.Contains(res.text, "no behaviour to prevent") {
		t.Errorf("spawn_agent result = %+v", res)
	}
	for _, ev := range out.events {
		if ev.Type == "subagent_start" && ev.AgentType != "hookify:conversation-analyzer" {
			t.Errorf("subagent_start agent_type = %q", ev.AgentType)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
