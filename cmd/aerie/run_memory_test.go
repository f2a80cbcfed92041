package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRunMemory: what the model saves with the memory tool is in the
// next session's system prompt, not in the rest of its own; a save over
// the caps is refused; a malformed MEMORY.md gets a .bak copy and refuses
// the mutation; aerie memory show and edit read and repair it.
func TestRunMemory(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		toolTurn(
			call("m1", "memory", map[string]any{"target": "project", "action": "add", "content": "tests: run make check"}),
			call("m2", "memory", map[string]any{"target": "user", "action": "add", "content": "prefers terse summaries"}),
			call("m3", "memory", map[string]any{"target": "project", "action": "add", "content": strings.Repeat("x", 1100)}),
		),
		answer("saved"),
	)
	if out := e.run("run", "remember the test command"); out.code != 0 {
		t.Fatalf("first run: exit %d\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	res := toolResults(t, reqs[1])
	if res["m1"].isError || res["m2"].isError || !res["m3"].isError || !strings.Contains(res["m3"].text, "over the cap of 1024") {
		t.Errorf("memory results: %+v", res)
	}
	for i, r := range reqs {
		if strings.Contains(system(t, r), "make check") {
			t.Errorf("request %d of the session that saved the memory has it in its system prompt", i)
		}
	}

	e.model.Add(answer("done"))
	if out := e.run("run", "next task"); out.code != 0 {
		t.Fatalf("second run: exit %d\n%s", out.code, out.stderr)
	}
	reqs = e.model.Requests()
	sys := system(t, reqs[len(reqs)-1])
	for _, want := range []string{"## Project memory (MEMORY.md)\n\n- tests: run make check", "## User memory (USER.md)\n\n- prefers terse summaries"} {
		if !strings.Contains(sys, want) {
			t.Errorf("the next session's system prompt lacks %q:\n%s", want, sys)
		}
	}

	show := e.run("memory", "show", "--json")
	var docs []memoryDoc
	if err := json.Unmarshal([]byte(show.stdout), &docs); err != nil || show.code != 0 {
		t.Fatalf("memory show --json: %v, exit %d\n%s%s", err, show.code, show.stdout, show.stderr)
	}
	if len(docs) != 2 || !cmp.Equal(docs[0].Entries, []string{"tests: run make check"}) ||
		!cmp.Equal(docs[1].Entries, []string{"prefers terse summaries"}) || docs[0].Cap != 8192 {
		t.Errorf("memory show --json = %+v", docs)
	}

	// A hand edit that is not a list: the next mutation is refused and
	// a timestamped copy kept.
	path := docs[0].Path
	if err := os.WriteFile(path, []byte("# Notes\nfree prose\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.model.Add(toolTurn(call("m4", "memory", map[string]any{"target": "project", "action": "add", "content": "y"})), answer("ok"))
	out := e.run("run", "save more")
	if out.code != 0 || !strings.Contains(out.stderr, "memory left out of the system prompt") {
		t.Fatalf("third run: exit %d\n%s", out.code, out.stderr)
	}
	reqs = e.model.Requests()
	if r := toolResults(t, reqs[len(reqs)-1])["m4"]; !r.isError || !strings.Contains(r.text, "line 2") || !strings.Contains(r.text, ".bak") {
		t.Errorf("mutation of a malformed MEMORY.md: %+v", r)
	}
	if baks, _ := filepath.Glob(path + ".*.bak"); len(baks) != 1 || readFile(t, baks[0]) != "# Notes\nfree prose\n" {
		t.Errorf(".bak copies %q", baks)
	}

	// aerie memory edit refuses an edit that is not a list, and saves one
	// that is.
	env := e.env
	e.env = append(env, `EDITOR=printf 'still prose\n' >`)
	if out := e.run("memory", "edit"); out.code == 0 || !strings.Contains(out.stderr, "is unchanged") {
		t.Errorf("an invalid edit: exit %d\n%s", out.code, out.stderr)
	}
	e.env = append(env, `EDITOR=printf '# Project memory\n\n- repaired\n' >`)
	if out := e.run("memory", "edit"); out.code != 0 {
		t.Errorf("a valid edit: exit %d\n%s", out.code, out.stderr)
	}
	if got := readFile(t, path); got != "# Project memory\n\n- repaired\n" {
		t.Errorf("MEMORY.md after the edit = %q", got)
	}
	if show := e.run("memory", "show"); !strings.Contains(show.stdout, "project memory (") || !strings.Contains(show.stdout, "- repaired") {
		t.Errorf("memory show:\n%s", show.stdout)
	}
	// A cluster's memory needs its namespace, and is not a workspace's.
	for _, args := range [][]string{{"--scope", "app"}, {"--namespace", "team-a", "--workspace", "."}} {
		if out := e.run(append([]string{"memory", "show"}, args...)...); out.code != 2 || !strings.Contains(out.stderr, "--namespace") {
			t.Errorf("memory show %q: exit %d\n%s", args, out.code, out.stderr)
		}
	}
}
