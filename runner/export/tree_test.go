package export

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/atif"
	"github.com/aerie-run/aerie/runner/atif/atiftest"
	"github.com/aerie-run/aerie/runner/transcript"
)

var (
	reviewerID = uuid.MustParse("7a3e9c15-4d2b-4f86-9b1e-2c5d8f0a6e14")
	grandID    = uuid.MustParse("b81f2d6c-3e9a-4c57-8d40-6a1e5f9c2b25")
	runningID  = uuid.MustParse("c4d9e2a7-5b1f-4e68-a3c2-7d0b8e1f4a36")
)

func entriesOf(payloads ...transcript.Payload) []transcript.Entry {
	es := make([]transcript.Entry, len(payloads))
	for i, p := range payloads {
		es[i] = transcript.Entry{Seq: int64(i + 1), Payload: p, CreatedAt: started.Add(time.Duration(i) * time.Second)}
	}
	return es
}

// spawned is a spawn_agent call as a parent journals it: the model's call,
// the harness's record, the child's outcome and the tool result.
func spawned(callID string, child uuid.UUID, agentType, answer string) []transcript.Payload {
	return []transcript.Payload{
		transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockToolUse, ID: callID, Name: "spawn_agent",
			Input: json.RawMessage(`{"task":"review parse.go"}`)}}},
		transcript.ToolCall{CallID: callID, Name: "spawn_agent", Input: json.RawMessage(`{"task":"review parse.go"}`)},
		transcript.SubagentOutcome{Session: child, Outcome: transcript.OutcomeCompleted, Summary: answer,
			Usage: &transcript.Usage{InputTokens: 900, OutputTokens: 120}, CallID: callID, AgentType: agentType,
			AnswerDigest: "sha256:5e1f"},
		transcript.ToolResult{CallID: callID, Content: text(answer)},
		transcript.ToolCompletion{CallID: callID, Status: transcript.ToolOK},
	}
}

// storedTree is what a store holds of a session that spawned a reviewer
// (which spawned a grandchild) and a child that had not finished: the
// records and streams, keyed by parent, as a ChildLoader returns them.
func storedTree() (Input, map[uuid.UUID][]Input) {
	root := compactedSession()
	root.Entries = entriesOf(append(append([]transcript.Payload{transcript.UserMessage{Content: text("Review parse.go.")}},
		spawned("toolu_s1", reviewerID, "reviewer", "parse.go is fine.")...),
		transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockToolUse, ID: "toolu_s2",
			Name: "spawn_agent", Input: json.RawMessage(`{"task":"wait"}`)}}},
		transcript.ToolCall{CallID: "toolu_s2", Name: "spawn_agent"},
		transcript.Usage{InputTokens: 2000, OutputTokens: 300},
	)...)
	child := func(id, parent uuid.UUID, persona string, payloads ...transcript.Payload) Input {
		return Input{
			Session: atif.SessionRecord{ID: id, Kind: "subagent", ParentID: parent, RootID: sessionID, CreatedAt: started,
				Settings: transcript.Settings{Provider: "anthropic", Model: "claude-haiku-4-5", Persona: persona}},
			Entries: entriesOf(payloads...),
		}
	}
	reviewer := child(reviewerID, sessionID, "reviewer", append(append([]transcript.Payload{
		transcript.UserMessage{Content: text("review parse.go")}},
		spawned("toolu_g1", grandID, "", "No more to say.")...),
		transcript.AssistantMessage{Content: text("parse.go is fine.")},
		transcript.Usage{InputTokens: 900, OutputTokens: 120},
	)...)
	grand := child(grandID, reviewerID, "", transcript.UserMessage{Content: text("review parse.go")},
		transcript.AssistantMessage{Content: text("No more to say.")})
	running := child(runningID, sessionID, "", transcript.UserMessage{Content: text("wait")})
	return root, map[uuid.UUID][]Input{sessionID: {reviewer, running}, reviewerID: {grand}}
}

func loaderOf(byParent map[uuid.UUID][]Input) ChildLoader {
	return func(_ context.Context, parent uuid.UUID) ([]Input, error) {
		return append([]Input(nil), byParent[parent]...), nil
	}
}

func loadedTree(t *testing.T) Input {
	t.Helper()
	root, byParent := storedTree()
	in, err := LoadTree(t.Context(), root, loaderOf(byParent))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestLoadTree(t *testing.T) {
	t.Parallel()
	in := loadedTree(t)
	var outline []string
	var walk func(in Input, indent string)
	walk = func(in Input, indent string) {
		outline = append(outline, indent+in.Session.ID.String()+" "+in.Agent.Version)
		for _, c := range in.Children {
			walk(c, indent+"  ")
		}
	}
	walk(in, "")
	want := []string{sessionID.String() + " 0.4.0", "  " + reviewerID.String() + " 0.4.0",
		"    " + grandID.String() + " 0.4.0", "  " + runningID.String() + " 0.4.0"}
	if diff := cmp.Diff(want, outline); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}

	// A store whose parent links loop, or that fails, is an error naming
	// the session.
	root, byParent := storedTree()
	byParent[grandID] = []Input{byParent[sessionID][0]}
	if _, err := LoadTree(t.Context(), root, loaderOf(byParent)); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Errorf("a loop: %v", err)
	}
	broken := errors.New("disk on fire")
	fail := func(_ context.Context, parent uuid.UUID) ([]Input, error) {
		if parent == reviewerID {
			return nil, broken
		}
		return byParent[parent], nil
	}
	if _, err := LoadTree(t.Context(), root, fail); !errors.Is(err, broken) || !strings.Contains(err.Error(), reviewerID.String()) {
		t.Errorf("a failing loader: %v", err)
	}
}

func TestATIFTree(t *testing.T) {
	t.Parallel()
	got := render(t, ATIF, loadedTree(t))
	if err := atiftest.Check([]byte(got)); err != nil {
		t.Fatalf("invalid ATIF: %v\n%s", err, got)
	}
	var doc struct {
		Steps []struct {
			Observation *struct {
				Results []struct {
					SourceCallID string `json:"source_call_id"`
					Refs         []struct {
						TrajectoryID string `json:"trajectory_id"`
					} `json:"subagent_trajectory_ref"`
				} `json:"results"`
			} `json:"observation"`
		} `json:"steps"`
		Subagents []struct {
			TrajectoryID string `json:"trajectory_id"`
			Steps        []struct {
				Message string `json:"message"`
			} `json:"steps"`
			Subagents []struct {
				TrajectoryID string `json:"trajectory_id"`
			} `json:"subagent_trajectories"`
		} `json:"subagent_trajectories"`
	}
	if err := json.Unmarshal([]byte(got), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Subagents) != 2 || doc.Subagents[0].TrajectoryID != reviewerID.String() ||
		doc.Subagents[1].TrajectoryID != runningID.String() || len(doc.Subagents[0].Subagents) != 1 ||
		doc.Subagents[0].Subagents[0].TrajectoryID != grandID.String() {
		t.Fatalf("subagent_trajectories = %+v", doc.Subagents)
	}
	if m := doc.Subagents[0].Steps[0].Message; !strings.Contains(m, "not recorded") {
		t.Errorf("the reviewer's first step = %q, want the unrecorded prompt", m)
	}
	refs := map[string]string{}
	for _, s := range doc.Steps {
		if s.Observation == nil {
			continue
		}
		for _, r := range s.Observation.Results {
			for _, ref := range r.Refs {
				refs[r.SourceCallID] = ref.TrajectoryID
			}
		}
	}
	if diff := cmp.Diff(map[string]string{"toolu_s1": reviewerID.String()}, refs); diff != "" {
		t.Errorf("refs by spawning call (-want +got):\n%s", diff)
	}
}

func TestMarkdownTree(t *testing.T) {
	t.Parallel()
	got := render(t, Markdown, loadedTree(t))
	testenv.Golden(t, filepath.Join("testdata", "tree.golden.md"), got, *update, "go test ./runner/export -run TestMarkdownTree -update")

	for _, want := range []string{
		"### #4 · Subagent " + reviewerID.String() + ": completed · for `spawn_agent` · `toolu_s1`",
		"agent type reviewer · 900 input and 120 output tokens · answer sha256:5e1f.",
		"> ## Subagent session " + reviewerID.String(),
		"> - Persona: reviewer",
		"> ### #2 · Assistant",
		"> #### #4 · Subagent " + grandID.String() + ": completed · for `spawn_agent` · `toolu_g1`",
		"> > ### Subagent session " + grandID.String(),
		"> > #### #2 · Assistant",
		"> ### Usage",
		"## Subagent sessions without an outcome",
		"> ## Subagent session " + runningID.String(),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the transcript lacks %q", want)
		}
	}
	// The child comes under its outcome, before the spawning call's result.
	i := strings.Index(got, "> ## Subagent session "+reviewerID.String())
	j := strings.Index(got, "### #5 · Result of `spawn_agent` · `toolu_s1`")
	k := strings.Index(got, "### #4 · Subagent "+reviewerID.String())
	if !(k < i && i < j) {
		t.Errorf("outcome at %d, child at %d, result at %d: want the child nested between them", k, i, j)
	}
	if u, p := strings.LastIndex(got, "\n## Usage"), strings.Index(got, "## Subagent sessions without"); u < p {
		t.Error("the root's usage does not end the transcript")
	}
}

func TestJSONLTree(t *testing.T) {
	t.Parallel()
	in := loadedTree(t)
	got := render(t, JSONL, in)
	var sessions []uuid.UUID
	counts := map[uuid.UUID]int{}
	sc := bufio.NewScanner(strings.NewReader(got))
	for sc.Scan() {
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if len(sessions) == 0 || sessions[len(sessions)-1] != l.Session {
			sessions = append(sessions, l.Session)
		}
		counts[l.Session]++
	}
	// Each session's lines together, the parent's whole stream first, depth
	// first.
	if diff := cmp.Diff([]uuid.UUID{sessionID, reviewerID, grandID, runningID}, sessions); diff != "" {
		t.Errorf("sessions in line order (-want +got):\n%s", diff)
	}
	if counts[sessionID] != len(in.Entries) || counts[reviewerID] != len(in.Children[0].Entries) || counts[runningID] != 1 {
		t.Errorf("lines per session = %v", counts)
	}
	// Without children, the root's lines only.
	root, _ := storedTree()
	if n := strings.Count(render(t, JSONL, root), "\n"); n != len(root.Entries) {
		t.Errorf("%d lines for the root's %d entries", n, len(root.Entries))
	}

	in.Children[0].Children[0].Entries = []transcript.Entry{{Seq: 2}, {Seq: 1}}
	if err := Write(&strings.Builder{}, JSONL, in); err == nil || !strings.Contains(err.Error(), grandID.String()) {
		t.Errorf("a grandchild's entries out of order: %v, want an error naming it", err)
	}
}
