package export

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aerie-run/aerie/runner/atif"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Format is a way to render a session.
type Format string

// The formats.
const (
	// ATIF is an Agent Trajectory Interchange Format v1.7 document.
	ATIF Format = "atif"
	// JSONL is JSON Lines: one Line per entry.
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
	// block; its Version must not be empty for ATIF.
	Agent atif.AgentInfo
	// OriginalCommand, when set, is the command that prints the original
	// of a tool call's result the model saw shortened (capped or
	// compressed); the Markdown transcript names it under such a result.
	OriginalCommand func(callID string) string
	// Original, when set, returns that original, which the Markdown
	// transcript then shows in full under the result; an error says why
	// it cannot (none was kept, the store failed).
	Original func(callID string) ([]byte, error)
}

// Write renders in as f to w.
func Write(w io.Writer, f Format, in Input) error {
	for i := 1; i < len(in.Entries); i++ {
		if prev, cur := in.Entries[i-1].Seq, in.Entries[i].Seq; cur <= prev {
			return fmt.Errorf("export: entry %d comes after entry %d: "+
				"pass the entries in sequence order, as Store.Entries returns them", cur, prev)
		}
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

// Trajectory builds the session's ATIF trajectory from the store's record
// alone. The store keeps neither the system prompt a run rendered nor the
// tools it offered, so step 1 says the prompt is not recorded and the agent
// block lists no tool definitions; everything else is what aerie run
// --atif-output writes for the same session. The outcome is the latest
// completion checkpoint's.
func Trajectory(in Input) (*atif.Trajectory, error) {
	return atif.BuildTrajectory(atif.TrajectoryInput{
		Session:                in.Session,
		Entries:                in.Entries,
		SystemPromptUnrecorded: true,
		Agent:                  in.Agent,
	})
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
