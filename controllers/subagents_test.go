package controllers

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
)

// TestAgentTypeLabelsCapped: past 32 agent types, the metrics' agent_type
// is _other, so that personas cannot grow the series without bound.
func TestAgentTypeLabelsCapped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	saved := agentTypeLabels
	agentTypeLabels = &labelCap{max: maxAgentTypeLabels}
	t.Cleanup(func() { agentTypeLabels = saved })
	var types []aeriev1alpha1.AgentTypeUsage
	for i := range 40 {
		types = append(types, aeriev1alpha1.AgentTypeUsage{Name: fmt.Sprintf("p%d", i), Subagents: 1, InputTokens: 10})
	}
	m.subagents(types)
	m.subagents(types[:1]) // a known value stays itself
	if n := testutil.CollectAndCount(m.Subagents); n != maxAgentTypeLabels+1 {
		t.Errorf("%d agent_type series, want %d and _other", n, maxAgentTypeLabels)
	}
	if got := testutil.ToFloat64(m.Subagents.WithLabelValues(otherAgentType)); got != 8 {
		t.Errorf("_other counts %v subagents, want the 8 past the cap", got)
	}
	if got := testutil.ToFloat64(m.Subagents.WithLabelValues("p0")); got != 2 {
		t.Errorf("p0 counts %v, want 2", got)
	}
	if n := testutil.CollectAndCount(m.SubagentTokens); n != 3*(maxAgentTypeLabels+1) {
		t.Errorf("%d token series, want 3 kinds of %d agent types", n, maxAgentTypeLabels+1)
	}
}
