package atif

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

var (
	reviewerID   = uuid.MustParse("7a3e9c15-4d2b-4f86-9b1e-2c5d8f0a6e14")
	grandchildID = uuid.MustParse("b81f2d6c-3e9a-4c57-8d40-6a1e5f9c2b25")
	runningID    = uuid.MustParse("c4d9e2a7-5b1f-4e68-a3c2-7d0b8e1f4a36")
)

// spawn is a spawn_agent call as the parent journals it: the model's call,
// the harness's record of it, the child's outcome, then the result.
func spawn(s *stream, callID string, child uuid.UUID, agentType, answer string) {
	s.add(
		transcript.AssistantMessage{Content: []transcript.Block{
			use(callID, "spawn_agent", `{"task":"look","agent_type":"`+agentType+`"}`),
		}, StopReason: "tool_use"},
		transcript.ToolCall{CallID: callID, Name: "spawn_agent"},
		transcript.SubagentOutcome{
			Session: child, Outcome: transcript.OutcomeCompleted, Summary: answer,
			Usage:  &transcript.Usage{InputTokens: 300, OutputTokens: 40, Requests: 2},
			CallID: callID, AgentType: agentType, AnswerDigest: "sha256:ab12",
		},
		result(callID, answer, false),
		transcript.ToolCompletion{CallID: callID, Status: transcript.ToolOK},
	)
}

// subagentTree is a root that spawned a reviewer (which spawned a
// grandchild) and a child still running when the tree was read, whose
// spawning call has no outcome yet.
func subagentTree() TrajectoryInput {
	root := &stream{}
	root.add(user("Review the parser."))
	spawn(root, "toolu_spawn_1", reviewerID, "reviewer", "The parser is fine.")
	root.add(
		transcript.AssistantMessage{Content: []transcript.Block{use("toolu_spawn_2", "spawn_agent", `{"task":"wait"}`)}},
		transcript.ToolCall{CallID: "toolu_spawn_2", Name: "spawn_agent"},
	)

	reviewer := &stream{}
	reviewer.add(user("look"))
	spawn(reviewer, "toolu_spawn_3", grandchildID, "", "Nothing to add.")
	reviewer.add(
		transcript.AssistantMessage{Content: []transcript.Block{text("The parser is fine.")}},
		transcript.Usage{InputTokens: 300, OutputTokens: 40, Requests: 2},
		transcript.Checkpoint{Turn: 2, Outcome: transcript.OutcomeCompleted},
	)
	grandchild := &stream{}
	grandchild.add(user("look"), transcript.AssistantMessage{Content: []transcript.Block{text("Nothing to add.")}})
	running := &stream{}
	running.add(user("wait"))

	record := func(id, parent uuid.UUID, persona string) SessionRecord {
		return SessionRecord{ID: id, Kind: "subagent", ParentID: parent, RootID: sessionID, CreatedAt: started,
			Settings: transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5", Persona: persona}}
	}
	return TrajectoryInput{
		Session: testSession(), Entries: root.entries, SystemPromptUnrecorded: true,
		Agent: AgentInfo{Name: "aerie", Version: "0.4.0"},
		Subagents: []TrajectoryInput{
			{Session: record(reviewerID, sessionID, "reviewer"), Entries: reviewer.entries,
				Subagents: []TrajectoryInput{{Session: record(grandchildID, reviewerID, ""), Entries: grandchild.entries}}},
			{Session: record(runningID, sessionID, ""), Entries: running.entries},
		},
	}
}

func TestSubagentTrajectories(t *testing.T) {
	t.Parallel()
	tr, data := build(t, subagentTree())

	ids := func(subs []*Trajectory) []string {
		var out []string
		for _, s := range subs {
			out = append(out, s.TrajectoryID)
		}
		return out
	}
	if diff := cmp.Diff([]string{reviewerID.String(), runningID.String()}, ids(tr.SubagentTrajectories)); diff != "" {
		t.Errorf("embedded children (-want +got):\n%s", diff)
	}
	if tr.TrajectoryID != "" {
		t.Errorf("the root has trajectory_id %q, want none", tr.TrajectoryID)
	}
	reviewer := tr.SubagentTrajectories[0]
	if diff := cmp.Diff([]string{grandchildID.String()}, ids(reviewer.SubagentTrajectories)); diff != "" {
		t.Errorf("the reviewer's embedded children (-want +got):\n%s", diff)
	}

	// The spawning call's result refers to the child and keeps the tool's
	// answer.
	refOf := func(tr *Trajectory, callID string) (Result, bool) {
		for _, s := range tr.Steps {
			if s.Observation == nil {
				continue
			}
			for _, r := range s.Observation.Results {
				if r.SourceCallID == callID {
					return r, true
				}
			}
		}
		return Result{}, false
	}
	r, ok := refOf(tr, "toolu_spawn_1")
	want := []SubagentRef{{TrajectoryID: reviewerID.String(), SessionID: reviewerID.String()}}
	if !ok || r.Content != "The parser is fine." || !cmp.Equal(want, r.SubagentTrajectoryRef) {
		t.Errorf("result of toolu_spawn_1 = %+v, want the answer and a ref to the reviewer", r)
	}
	if r, ok := refOf(reviewer, "toolu_spawn_3"); !ok || len(r.SubagentTrajectoryRef) != 1 ||
		r.SubagentTrajectoryRef[0].TrajectoryID != grandchildID.String() {
		t.Errorf("the reviewer's spawn result = %+v, want a ref to the grandchild", r)
	}
	// The call still waiting for its child has no ref: no outcome names it.
	for _, s := range tr.Steps {
		for _, c := range s.ToolCalls {
			if c.ToolCallID == "toolu_spawn_2" && s.Observation != nil && len(s.Observation.Results) > 0 {
				t.Errorf("the pending spawn has results: %+v", s.Observation)
			}
		}
	}

	// Each child is a whole trajectory: its own steps, session, metrics,
	// settings and outcome.
	if reviewer.SessionID != reviewerID.String() || reviewer.Agent.Version != "0.4.0" ||
		reviewer.Agent.Extra["persona"] != "reviewer" || reviewer.Extra["outcome"] != "completed" {
		t.Errorf("reviewer trajectory = %+v", reviewer)
	}
	if s := reviewer.Extra["session"].(map[string]any); s["kind"] != "subagent" || s["parent_id"] != sessionID.String() {
		t.Errorf("reviewer extra.session = %v", s)
	}
	if fm := reviewer.FinalMetrics; fm.TotalPromptTokens == nil || *fm.TotalPromptTokens != 300 {
		t.Errorf("reviewer final metrics = %+v, want its own usage", fm)
	}
	if m := reviewer.Steps[0].Message; !strings.Contains(m, "not recorded") {
		t.Errorf("the reviewer's step 1 = %q, want the prompt unrecorded like its parent's", m)
	}
	// The outcome step names the call and the agent type.
	var detail map[string]any
	for _, s := range tr.Steps {
		if d, ok := s.Extra["subagent"].(map[string]any); ok {
			detail = d
		}
	}
	if detail["call_id"] != "toolu_spawn_1" || detail["agent_type"] != "reviewer" || detail["answer_digest"] != "sha256:ab12" {
		t.Errorf("subagent step detail = %v", detail)
	}

	// The document's JSON has ATIF's names.
	var doc struct {
		Subagents []struct {
			TrajectoryID string           `json:"trajectory_id"`
			Subagents    []map[string]any `json:"subagent_trajectories"`
		} `json:"subagent_trajectories"`
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.Subagents) != 2 || len(doc.Subagents[0].Subagents) != 1 {
		t.Errorf("JSON subagent_trajectories = %+v (%v)", doc, err)
	}
}

// An outcome whose spawning call the trajectory does not have refers to its
// child from its own step.
func TestSubagentRefWithoutCall(t *testing.T) {
	t.Parallel()
	s := &stream{}
	s.add(user("go"), transcript.SubagentOutcome{Session: childID, Outcome: transcript.OutcomeFailed, Summary: "gave up"})
	child := &stream{}
	child.add(user("try"))
	in := realisticInput()
	in.Entries = s.entries
	in.Subagents = []TrajectoryInput{{Session: SessionRecord{ID: childID, Kind: "subagent"}, Entries: child.entries}}
	tr, _ := build(t, in)
	obs := tr.Steps[2].Observation
	if obs == nil || len(obs.Results) != 1 || obs.Results[0].SourceCallID != "" ||
		obs.Results[0].SubagentTrajectoryRef[0].TrajectoryID != childID.String() {
		t.Errorf("outcome step observation = %+v", obs)
	}
}

func TestSubagentErrors(t *testing.T) {
	t.Parallel()
	in := subagentTree()
	in.Subagents = append(in.Subagents, in.Subagents[0])
	if _, err := BuildTrajectory(in); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a child given twice: %v", err)
	}
	in = subagentTree()
	in.Subagents[0].Session.ID = uuid.Nil
	if _, err := BuildTrajectory(in); err == nil || !strings.Contains(err.Error(), "without a session id") {
		t.Errorf("a child without an id: %v", err)
	}
	in = subagentTree()
	in.Subagents[0].Subagents[0].Entries = []transcript.Entry{{Seq: 2}, {Seq: 1}}
	if _, err := BuildTrajectory(in); err == nil || !strings.Contains(err.Error(), grandchildID.String()) {
		t.Errorf("a grandchild's entries out of order: %v, want an error naming it", err)
	}
}

// The checker must reject what ATIF v1.7 rejects in embedded trajectories.
func TestSchemaRejectsInvalidSubagents(t *testing.T) {
	t.Parallel()
	_, good := build(t, subagentTree())
	for _, tc := range []struct {
		name   string
		mutate func(doc map[string]any)
	}{
		{"embedded trajectory without trajectory_id", func(d map[string]any) {
			delete(subagents(d)[0].(map[string]any), "trajectory_id")
		}},
		{"duplicate trajectory_id among siblings", func(d map[string]any) {
			subs := subagents(d)
			subs[1].(map[string]any)["trajectory_id"] = subs[0].(map[string]any)["trajectory_id"]
		}},
		{"ref naming no embedded trajectory", func(d map[string]any) {
			subagents(d)[0].(map[string]any)["trajectory_id"] = "elsewhere"
		}},
		{"ref with a session_id only", func(d map[string]any) {
			for _, s := range d["steps"].([]any) {
				obs, _ := s.(map[string]any)["observation"].(map[string]any)
				for _, r := range anySlice(obs["results"]) {
					if ref, ok := r.(map[string]any)["subagent_trajectory_ref"].([]any); ok {
						delete(ref[0].(map[string]any), "trajectory_id")
					}
				}
			}
		}},
		{"embedded step ids out of order", func(d map[string]any) {
			steps := subagents(d)[0].(map[string]any)["steps"].([]any)
			steps[1].(map[string]any)["step_id"] = 9
		}},
		{"unknown field in a grandchild", func(d map[string]any) {
			grand := subagents(d)[0].(map[string]any)["subagent_trajectories"].([]any)
			grand[0].(map[string]any)["children"] = 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var doc map[string]any
			if err := json.Unmarshal(good, &doc); err != nil {
				t.Fatal(err)
			}
			tc.mutate(doc)
			data, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkATIF(data); err == nil {
				t.Error("accepted an invalid trajectory")
			}
		})
	}
}

func subagents(d map[string]any) []any { return d["subagent_trajectories"].([]any) }

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
}
