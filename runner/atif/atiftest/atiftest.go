// Package atiftest checks that a document is a valid ATIF v1.7 trajectory,
// for the tests of every package that writes one: against the published
// JSON Schema (Harbor's RFC 0001, kept in this package) and against the
// rules of Harbor's model validators that a schema cannot express.
package atiftest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const schemaURL = "https://aerie.run/schemas/atif-v1.7.schema.json"

//go:embed atif-v1.7.schema.json
var schemaJSON []byte

// schema is the ATIF-v1.7 JSON Schema, compiled once.
var schema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
})

// Check validates a trajectory document against the ATIF-v1.7 schema and
// against the rules of Harbor's model validators that a schema cannot
// express, in the document and in every embedded subagent trajectory:
// step ids count from 1, tool call ids are unique in their step, a
// result's source_call_id names a call of its step, final_metrics.total_steps
// counts the steps, embedded trajectory ids are unique among their
// siblings, and a subagent_trajectory_ref without a trajectory_path names
// an embedded trajectory of the trajectory that holds it.
func Check(data []byte) error {
	sch, err := schema()
	if err != nil {
		return fmt.Errorf("compile schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("parse trajectory: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("schema: %v", err)
	}
	var doc trajectory
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	return doc.check()
}

// trajectory is what the model validators read of a trajectory.
type trajectory struct {
	TrajectoryID *string `json:"trajectory_id"`
	Steps        []struct {
		StepID    int `json:"step_id"`
		ToolCalls []struct {
			ToolCallID string `json:"tool_call_id"`
		} `json:"tool_calls"`
		Observation *struct {
			Results []struct {
				SourceCallID *string `json:"source_call_id"`
				Refs         []struct {
					TrajectoryID   *string `json:"trajectory_id"`
					TrajectoryPath *string `json:"trajectory_path"`
				} `json:"subagent_trajectory_ref"`
			} `json:"results"`
		} `json:"observation"`
	} `json:"steps"`
	FinalMetrics *struct {
		TotalSteps int `json:"total_steps"`
	} `json:"final_metrics"`
	Subagents []trajectory `json:"subagent_trajectories"`
}

func (doc trajectory) check() error {
	embedded := map[string]bool{}
	for i, sub := range doc.Subagents {
		id := ""
		if sub.TrajectoryID != nil {
			id = *sub.TrajectoryID
		}
		if embedded[id] {
			return fmt.Errorf("subagent_trajectories[%d]: duplicate trajectory_id %q", i, id)
		}
		embedded[id] = true
		if err := sub.check(); err != nil {
			return fmt.Errorf("subagent trajectory %q: %w", id, err)
		}
	}
	for i, s := range doc.Steps {
		if s.StepID != i+1 {
			return fmt.Errorf("steps[%d].step_id is %d, want %d", i, s.StepID, i+1)
		}
		ids := map[string]bool{}
		for _, c := range s.ToolCalls {
			if ids[c.ToolCallID] {
				return fmt.Errorf("step %d: duplicate tool_call_id %q", s.StepID, c.ToolCallID)
			}
			ids[c.ToolCallID] = true
		}
		if s.Observation == nil {
			continue
		}
		for _, r := range s.Observation.Results {
			if r.SourceCallID != nil && !ids[*r.SourceCallID] {
				return fmt.Errorf("step %d: source_call_id %q names no tool call of the step", s.StepID, *r.SourceCallID)
			}
			for _, ref := range r.Refs {
				if ref.TrajectoryPath == nil && ref.TrajectoryID != nil && !embedded[*ref.TrajectoryID] {
					return fmt.Errorf("step %d: subagent_trajectory_ref %q names no embedded subagent trajectory",
						s.StepID, *ref.TrajectoryID)
				}
			}
		}
	}
	if doc.FinalMetrics == nil || doc.FinalMetrics.TotalSteps != len(doc.Steps) {
		return fmt.Errorf("final_metrics.total_steps does not count the %d steps", len(doc.Steps))
	}
	return nil
}
