package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/atif/atiftest"
	"github.com/aerie-run/aerie/runner/export"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// subagentFixture is a session tree as a run with subagents stores it,
// made through the store: records of kind subagent with their parents, and
// the parents' outcome entries.
//
//	lead        headless; spawned reviewer (call c1, completed) and waiter (c2, no outcome)
//	├── reviewer  persona reviewer; spawned helper (call c3, budget_exceeded)
//	│   └── helper
//	└── waiter    still running
type subagentFixture struct {
	harness                        harness
	lead, reviewer, helper, waiter store.Session
}

func seedSubagents(t *testing.T, home, dir string) subagentFixture {
	t.Helper()
	ctx := t.Context()
	st := openTestStore(t, home)
	defer st.Close()
	start := time.Now()
	entries := func(payloads ...transcript.Payload) []transcript.Entry {
		es := make([]transcript.Entry, len(payloads))
		for i, p := range payloads {
			es[i] = transcript.Entry{Seq: int64(i + 1), Payload: p, CreatedAt: start.Add(time.Duration(i) * time.Millisecond)}
		}
		return es
	}
	text := func(s string) []transcript.Block { return []transcript.Block{{Type: transcript.BlockText, Text: s}} }
	spawnCall := func(id, task string) []transcript.Payload {
		input := json.RawMessage(`{"task":"` + task + `"}`)
		return []transcript.Payload{
			transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockToolUse, ID: id, Name: "spawn_agent", Input: input}}},
			transcript.ToolCall{CallID: id, Name: "spawn_agent", Input: input},
		}
	}
	answered := func(id, answer string, o transcript.SubagentOutcome) []transcript.Payload {
		o.CallID, o.Summary, o.AnswerDigest = id, answer, "sha256:00aa"
		return []transcript.Payload{o,
			transcript.ToolResult{CallID: id, Content: text(answer)},
			transcript.ToolCompletion{CallID: id, Status: transcript.ToolOK}}
	}
	create := func(ns store.NewSession) store.Session {
		t.Helper()
		ns.Dir = dir
		s, err := st.Create(ctx, dir, ns)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ids := [4]uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}
	settings := transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5"}

	var lead []transcript.Payload
	lead = append(lead, transcript.UserMessage{Content: text("Review the parser.")})
	lead = append(lead, spawnCall("c1", "review")...)
	lead = append(lead, answered("c1", "The parser is fine.", transcript.SubagentOutcome{Session: ids[1],
		Outcome: transcript.OutcomeCompleted, AgentType: "reviewer", Usage: &transcript.Usage{InputTokens: 900, OutputTokens: 120}})...)
	lead = append(lead, spawnCall("c2", "wait")...)
	lead = append(lead, transcript.Usage{InputTokens: 3000, OutputTokens: 200})

	var reviewer []transcript.Payload
	reviewer = append(reviewer, transcript.UserMessage{Content: text("review")})
	reviewer = append(reviewer, spawnCall("c3", "help")...)
	reviewer = append(reviewer, answered("c3", "Ran out.", transcript.SubagentOutcome{Session: ids[2],
		Outcome: transcript.OutcomeBudgetExceeded, Usage: &transcript.Usage{InputTokens: 50, OutputTokens: 5}})...)
	reviewer = append(reviewer, transcript.AssistantMessage{Content: text("The parser is fine.")},
		transcript.Usage{InputTokens: 900, OutputTokens: 120})

	f := subagentFixture{harness: harness{home: home, dir: dir}}
	f.lead = create(store.NewSession{ID: ids[0], Kind: store.SessionHeadless, Label: "lead", Settings: settings,
		State: store.StateCompleted, Entries: entries(lead...)})
	reviewerSettings := settings
	reviewerSettings.Persona = "reviewer"
	f.reviewer = create(store.NewSession{ID: ids[1], Kind: store.SessionSubagent, Parent: f.lead.ID,
		Settings: reviewerSettings, State: store.StateCompleted, Entries: entries(reviewer...)})
	f.helper = create(store.NewSession{ID: ids[2], Kind: store.SessionSubagent, Parent: f.reviewer.ID, Settings: settings,
		State: store.StateFailed, Entries: entries(transcript.UserMessage{Content: text("help")},
			transcript.AssistantMessage{Content: text("Ran out.")})})
	f.waiter = create(store.NewSession{ID: ids[3], Kind: store.SessionSubagent, Parent: f.lead.ID, Settings: settings,
		Entries: entries(transcript.UserMessage{Content: text("wait")})})
	return f
}

// testSubagentTrees is the part of the session suite about subagents:
// list hides them, tree shows them under their parents with what their
// parents recorded, and export takes the whole tree.
func testSubagentTrees(t *testing.T, newHome func(t *testing.T) string) {
	seed := func(t *testing.T) subagentFixture {
		t.Helper()
		return seedSubagents(t, newHome(t), t.TempDir())
	}

	t.Run("list hides subagents unless --all", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		var got sessionListJSON
		decodeJSON(t, mustRun(t, f.harness, "session", "list", "--json").stdout, &got)
		if len(got.Sessions) != 1 || got.Sessions[0].ID != f.lead.ID {
			t.Errorf("list --json = %+v, want the lead only", got.Sessions)
		}
		if out := mustRun(t, f.harness, "session", "list").stdout; strings.Contains(out, f.reviewer.ID.String()) {
			t.Errorf("list shows a subagent:\n%s", out)
		}
		decodeJSON(t, mustRun(t, f.harness, "session", "list", "--all", "--json").stdout, &got)
		kinds := map[uuid.UUID]string{}
		for _, s := range got.Sessions {
			kinds[s.ID] = s.Kind
			if s.RootID != f.lead.ID {
				t.Errorf("%s: root_id %s, want the lead %s", s.ID, s.RootID, f.lead.ID)
			}
		}
		want := map[uuid.UUID]string{f.lead.ID: "headless", f.reviewer.ID: "subagent", f.helper.ID: "subagent", f.waiter.ID: "subagent"}
		if diff := cmp.Diff(want, kinds); diff != "" {
			t.Errorf("list --all --json kinds (-want +got):\n%s", diff)
		}
	})

	t.Run("tree", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		out := mustRun(t, f.harness, "session", "tree").stdout
		var lines []string // with the ages cut off
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n")[1:] {
			fields := strings.Fields(l)
			lines = append(lines, strings.Join(fields[:len(fields)-2], " "))
		}
		want := []string{
			f.lead.ID.String() + " lead headless - completed - - - 9",
			"├── " + f.reviewer.ID.String() + " - subagent reviewer completed completed 1020 - 8",
			"│ └── " + f.helper.ID.String() + " - subagent - failed budget_exceeded 55 - 2",
			"└── " + f.waiter.ID.String() + " - subagent - active - - - 1",
		}
		if diff := cmp.Diff(want, lines); diff != "" {
			t.Errorf("tree (-want +got):\n%s\n%s", diff, out)
		}

		var got sessionTreeJSON
		decodeJSON(t, mustRun(t, f.harness, "session", "tree", "--json").stdout, &got)
		if len(got.Sessions) != 1 || len(got.Sessions[0].Children) != 2 {
			t.Fatalf("tree --json = %+v", got.Sessions)
		}
		root, rev, wait := got.Sessions[0], got.Sessions[0].Children[0], got.Sessions[0].Children[1]
		if root.Outcome != nil || root.Usage != nil || root.AgentType != "" {
			t.Errorf("the lead node = %+v, want no subagent fields", root)
		}
		if rev.AgentType != "reviewer" || rev.Outcome == nil || *rev.Outcome != "completed" ||
			rev.Usage == nil || rev.Usage.InputTokens != 900 || rev.Kind != "subagent" {
			t.Errorf("the reviewer node = %+v", rev)
		}
		if h := rev.Children[0]; h.ID != f.helper.ID || h.Outcome == nil || *h.Outcome != "budget_exceeded" {
			t.Errorf("the helper node = %+v", h)
		}
		if wait.Outcome != nil || wait.Usage != nil || wait.State != "active" {
			t.Errorf("the waiting node = %+v, want no outcome yet", wait)
		}
		var raw struct{ Sessions []map[string]json.RawMessage }
		decodeJSON(t, mustRun(t, f.harness, "session", "tree", "--json").stdout, &raw)
		for _, k := range []string{"agent_type", "outcome", "usage", "children", "kind", "parent_id", "root_id"} {
			if _, ok := raw.Sessions[0][k]; !ok {
				t.Errorf("tree --json nodes have no %q", k)
			}
		}
	})

	t.Run("export atif", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		out := mustRun(t, f.harness, "session", "export", "lead", "--format", "atif").stdout
		if err := atiftest.Check([]byte(out)); err != nil {
			t.Fatalf("invalid ATIF: %v\n%s", err, out)
		}
		var doc embeddedDoc
		decodeJSON(t, out, &doc)
		want := []string{
			f.reviewer.ID.String(),
			"  " + f.helper.ID.String(),
			f.waiter.ID.String(),
		}
		if diff := cmp.Diff(want, doc.outline("")); diff != "" {
			t.Errorf("embedded trajectories (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"c1": f.reviewer.ID.String()}, doc.refs()); diff != "" {
			t.Errorf("the lead's refs by call (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"c3": f.helper.ID.String()}, doc.Subagents[0].refs()); diff != "" {
			t.Errorf("the reviewer's refs by call (-want +got):\n%s", diff)
		}

		// A child exported on its own brings its own subtree.
		out = mustRun(t, f.harness, "session", "export", f.reviewer.ID.String(), "--format", "atif").stdout
		if err := atiftest.Check([]byte(out)); err != nil {
			t.Fatalf("invalid ATIF: %v", err)
		}
		doc = embeddedDoc{}
		decodeJSON(t, out, &doc)
		if diff := cmp.Diff([]string{f.helper.ID.String()}, doc.outline("")); diff != "" {
			t.Errorf("the reviewer's export (-want +got):\n%s", diff)
		}
	})

	t.Run("export markdown", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		out := mustRun(t, f.harness, "session", "export", "lead").stdout
		for _, want := range []string{
			"### #4 · Subagent " + f.reviewer.ID.String() + ": completed · for `spawn_agent` · `c1`",
			"> ## Subagent session " + f.reviewer.ID.String(),
			"> #### #4 · Subagent " + f.helper.ID.String() + ": budget_exceeded",
			"> > ### Subagent session " + f.helper.ID.String(),
			"## Subagent sessions without an outcome",
			"> ## Subagent session " + f.waiter.ID.String(),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the transcript lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("export jsonl", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		order := func(out string) []uuid.UUID {
			var sessions []uuid.UUID
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				var l export.Line
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatal(err)
				}
				if len(sessions) == 0 || sessions[len(sessions)-1] != l.Session {
					sessions = append(sessions, l.Session)
				}
			}
			return sessions
		}
		out := mustRun(t, f.harness, "session", "export", "lead", "--format", "jsonl").stdout
		if diff := cmp.Diff([]uuid.UUID{f.lead.ID}, order(out)); diff != "" {
			t.Errorf("jsonl without --tree (-want +got):\n%s", diff)
		}
		out = mustRun(t, f.harness, "session", "export", "lead", "--format", "jsonl", "--tree").stdout
		if diff := cmp.Diff([]uuid.UUID{f.lead.ID, f.reviewer.ID, f.helper.ID, f.waiter.ID}, order(out)); diff != "" {
			t.Errorf("jsonl --tree (-want +got):\n%s", diff)
		}
		r := f.harness.aerie(t, "session", "export", "lead", "--format", "atif", "--tree")
		if r.code != 1 || !strings.Contains(r.err.Error(), "--tree is for --format jsonl") {
			t.Errorf("--tree with atif: exit %d, %v", r.code, r.err)
		}
	})
}

// embeddedDoc is what the tests read of a trajectory's subagents.
type embeddedDoc struct {
	TrajectoryID string `json:"trajectory_id"`
	Steps        []struct {
		Observation *struct {
			Results []struct {
				SourceCallID string `json:"source_call_id"`
				Refs         []struct {
					TrajectoryID string `json:"trajectory_id"`
				} `json:"subagent_trajectory_ref"`
			} `json:"results"`
		} `json:"observation"`
	} `json:"steps"`
	Subagents []embeddedDoc `json:"subagent_trajectories"`
}

func (d embeddedDoc) outline(indent string) []string {
	var out []string
	for _, s := range d.Subagents {
		out = append(out, indent+s.TrajectoryID)
		out = append(out, s.outline(indent+"  ")...)
	}
	return out
}

// refs maps each spawning call to the trajectory its result refers to.
func (d embeddedDoc) refs() map[string]string {
	refs := map[string]string{}
	for _, s := range d.Steps {
		if s.Observation == nil {
			continue
		}
		for _, r := range s.Observation.Results {
			for _, ref := range r.Refs {
				refs[r.SourceCallID] = ref.TrajectoryID
			}
		}
	}
	return refs
}
