package atif

import (
	"strings"
	"testing"
)

// A trajectory made from the store alone does not know the system prompt:
// step 1 says so rather than give the digest of an empty prompt, and the
// document is still valid ATIF.
func TestTrajectorySystemPromptUnrecorded(t *testing.T) {
	t.Parallel()
	in := realisticInput()
	in.SystemPrompt, in.Tools, in.SystemPromptUnrecorded = "", nil, true
	tr, data := build(t, in)
	s := tr.Steps[0]
	if s.Source != sourceSystem || !strings.Contains(s.Message, "not recorded") {
		t.Errorf("step 1 = %+v, want a system step saying the prompt is not recorded", s)
	}
	if sp, _ := s.Extra["system_prompt"].(map[string]any); sp["recorded"] != false || sp["sha256"] != nil {
		t.Errorf("step 1 extra.system_prompt = %v, want recorded false and no digest", sp)
	}
	if strings.Contains(string(data), "e3b0c44298fc1c149afbf4c8996fb924") {
		t.Error("the trajectory holds the digest of an empty prompt")
	}
}
