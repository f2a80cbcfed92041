package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/atif"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Format is a way to render a session.
type Format string

// The formats.
const (
	// ATIF is an Agent Trajectory Interchange Format v1.7 document.
	ATIF Format = "atif"
	// JSONL is JSON Lines: one Line per entry, of the session and then of
	// its Children, depth first.
	JSONL Format = "jsonl"
	// Markdown is a transcript for a person.
	Markdown Format = "markdown"
)

// Formats lists the formats, in the order help texts name them.
var Formats = []Format{ATIF, JSONL, Markdown}

// ErrFormat: a format name that is not one of Formats.
var ErrFormat = errors.New("unknown export format")

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("%w %q: want %s", ErrFormat, s, strings.Join(names, ", "))
}

// Input is what an export is made from.
type Input struct {
	// Session is the session's stored record.
	Session atif.SessionRecord
	// Entries is the session's whole stream, compacted entries included,
	// in sequence order: what the session store's Entries returns.
	Entries []transcript.Entry
	// Agent names the program that exports, for the trajectory's agent
	// block; its Version must not be empty for ATIF. Children take the
	// root's.
	Agent atif.AgentInfo
	// OriginalCommand, when set, is the command that prints the original
	// of a tool call's result the model saw shortened (capped or
	// compressed); the Markdown transcript names it under such a result.
	OriginalCommand func(callID string) string
	// Original, when set, returns that original, which the Markdown
	// transcript then shows in full under the result; an error says why
	// it cannot (none was kept, the store failed).
	Original func(callID string) ([]byte, error)
	// Children are the session's subagent sessions, oldest first, each
	// with its own Children: what LoadTree fills in. ATIF embeds them as
	// subagent trajectories, Markdown nests each under the call that
	// spawned it, JSON Lines follows the session's lines with theirs.
	Children []Input
}

// ChildLoader returns the subagent sessions of the session parent, oldest
// first, each with its record and its whole stream (Session and Entries;
// Children and Agent are left to LoadTree). A store-backed loader lists
// the sessions whose parent is parent and whose kind is subagent.
type ChildLoader func(ctx context.Context, parent uuid.UUID) ([]Input, error)

// maxTreeDepth bounds how deep LoadTree descends: far beyond any depth a
// subagent limit allows, it only stops a store whose parent links loop.
const maxTreeDepth = 64

// LoadTree returns in with its Children filled from load, recursively: the
// session's whole tree of subagents. A session met twice (parent links that
// loop) or a tree deeper than 64 is an error, as is any error of load,
// named by the session whose children it was reading.
func LoadTree(ctx context.Context, in Input, load ChildLoader) (Input, error) {
	seen := map[uuid.UUID]bool{in.Session.ID: true}
	var fill func(in *Input, depth int) error
	fill = func(in *Input, depth int) error {
		if depth > maxTreeDepth {
			return fmt.Errorf("export: session %s is more than %d subagents deep", in.Session.ID, maxTreeDepth)
		}
		children, err := load(ctx, in.Session.ID)
		if err != nil {
			return fmt.Errorf("export: read the subagent sessions of %s: %w", in.Session.ID, err)
		}
		for i := range children {
			c := &children[i]
			if seen[c.Session.ID] {
				return fmt.Errorf("export: session %s is listed twice in the tree of %s: "+
					"its parent links loop", c.Session.ID, in.Session.ID)
			}
			seen[c.Session.ID] = true
			c.Agent = in.Agent
			if err := fill(c, depth+1); err != nil {
				return err
			}
		}
		in.Children = children
		return nil
	}
	if err := fill(&in, 1); err != nil {
		return Input{}, err
	}
	return in, nil
}

// Write renders in as f to w.
func Write(w io.Writer, f Format, in Input) error {
	if err := checkOrder(in); err != nil {
		return err
	}
	switch f {
	case ATIF:
		return writeATIF(w, in)
	case JSONL:
		return writeJSONL(w, in)
	case Markdown:
		return writeMarkdown(w, in)
	}
	_, err := ParseFormat(string(f))
	return err
}

// checkOrder refuses entries out of sequence order, in the session and in
// its children.
func checkOrder(in Input) error {
	for i := 1; i < len(in.Entries); i++ {
		if prev, cur := in.Entries[i-1].Seq, in.Entries[i].Seq; cur <= prev {
			return fmt.Errorf("export: session %s: entry %d comes after entry %d: "+
				"pass the entries in sequence order, as Store.Entries returns them", in.Session.ID, cur, prev)
		}
	}
	for _, c := range in.Children {
		if err := checkOrder(c); err != nil {
			return err
		}
	}
	return nil
}

// Trajectory builds the session's ATIF trajectory from the store's record
// alone. The store keeps neither the system prompt a run rendered nor the
// tools it offered, so step 1 says the prompt is not recorded and the agent
// block lists no tool definitions; everything else is what aerie run
// --atif-output writes for the same session. The outcome is the latest
// completion checkpoint's. Each of the Children is an embedded subagent
// trajectory, which the spawning call's result refers to.
func Trajectory(in Input) (*atif.Trajectory, error) {
	return atif.BuildTrajectory(trajectoryInput(in))
}

func trajectoryInput(in Input) atif.TrajectoryInput {
	t := atif.TrajectoryInput{
		Session:                in.Session,
		Entries:                in.Entries,
		SystemPromptUnrecorded: true,
		Agent:                  in.Agent,
	}
	t.Subagents = SubagentTrajectories(in.Children)
	return t
}

// SubagentTrajectories are the trajectory inputs of children (and theirs),
// built as Trajectory builds them, for a trajectory whose root is built
// otherwise: aerie run --atif-output's, which knows its system prompt and
// tools.
func SubagentTrajectories(children []Input) []atif.TrajectoryInput {
	out := make([]atif.TrajectoryInput, 0, len(children))
	for _, c := range children {
		out = append(out, trajectoryInput(c))
	}
	return out
}

func writeATIF(w io.Writer, in Input) error {
	t, err := Trajectory(in)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	data, err := atif.MarshalTrajectory(t)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	_, err = w.Write(data)
	return err
}
