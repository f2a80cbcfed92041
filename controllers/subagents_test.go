package controllers

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
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

// TestSubagentUsage: the report's usage by agent type becomes
// status.usage.byAgentType, and the subagent metrics count it by
// agent_type.
func TestSubagentUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("tree")
	pod := e.pod("tree", 1)
	e.setPod(pod, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	e.waitPhase("tree", aeriev1alpha1.PhaseRunning)
	e.finishPod(pod, 0, &runconfig.Report{
		Outcome: runconfig.OutcomeCompleted, SessionID: string(pod.OwnerReferences[0].UID),
		Usage: runconfig.Usage{InputTokens: 900, OutputTokens: 90, Requests: 9, Subagents: 3},
		AgentTypes: []runconfig.AgentTypeUsage{
			{Name: "default", Subagents: 1, Requests: 2, InputTokens: 200, OutputTokens: 20},
			{Name: "reviewer-x7", Subagents: 2, Requests: 5, InputTokens: 500, OutputTokens: 50, CacheReadTokens: 30},
		},
	})
	s := e.waitPhase("tree", aeriev1alpha1.PhaseSucceeded)
	want := []aeriev1alpha1.AgentTypeUsage{
		{Name: "default", Subagents: 1, Turns: 2, InputTokens: 200, OutputTokens: 20},
		{Name: "reviewer-x7", Subagents: 2, Turns: 5, InputTokens: 500, OutputTokens: 50, CacheReadTokens: 30},
	}
	if s.Status.Usage == nil || s.Status.Usage.Subagents != 3 {
		t.Fatalf("usage %+v, want 3 subagents", s.Status.Usage)
	}
	if diff := cmp.Diff(want, s.Status.Usage.ByAgentType); diff != "" {
		t.Errorf("byAgentType (-want +got):\n%s", diff)
	}
	e.waitFor("metrics", func() error {
		if got, err := counterValue(e.metrics, "aerie_subagents_total", "agent_type", "reviewer-x7"); err != nil || got != 2 {
			return fmt.Errorf("aerie_subagents_total{agent_type=reviewer-x7} = %v, %v", got, err)
		}
		got, err := seriesValue(e.metrics, "aerie_subagent_tokens_total", map[string]string{"agent_type": "reviewer-x7", "kind": "cache_read"})
		if err != nil || got != 30 {
			return fmt.Errorf("aerie_subagent_tokens_total{agent_type=reviewer-x7,kind=cache_read} = %v, %v", got, err)
		}
		return nil
	})
}

// seriesValue reads the one series of a metric in reg whose labels include
// want.
func seriesValue(reg *prometheus.Registry, name string, want map[string]string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n := 0
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
					n++
				}
			}
			if n == len(want) {
				return m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, fmt.Errorf("no series of %s with %v", name, want)
}
