package controllers

import (
	"errors"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
)

// Metrics are the controller's Prometheus metrics. They count sessions as
// they finish; no label names a session, so their cardinality stays fixed.
type Metrics struct {
	// Sessions counts finished sessions by phase.
	Sessions *prometheus.CounterVec
	// Duration is the time from a session's first pod to its end.
	Duration prometheus.Histogram
	// Tokens counts the tokens of finished sessions, by kind: input,
	// output, cache_read.
	Tokens *prometheus.CounterVec
	// ToolCalls counts the tool calls of finished sessions.
	ToolCalls prometheus.Counter
	// Subagents counts the subagents of finished sessions by agent type,
	// and SubagentTokens their tokens by agent type and kind; the
	// agent_type values are bounded (see agentTypeLabels).
	Subagents      *prometheus.CounterVec
	SubagentTokens *prometheus.CounterVec
	// Cost counts what finished sessions cost in US dollars, by namespace
	// and model.
	Cost *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg. Metrics that
// reg already has (a second reconciler in the same process) are shared.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aerie_sessions_total",
			Help: "AgentSessions finished, by phase (Succeeded, Failed, Cancelled).",
		}, []string{"phase"}),
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "aerie_session_duration_seconds",
			Help:    "Time from an AgentSession's first runner pod to its end.",
			Buckets: []float64{10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400},
		}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aerie_tokens_total",
			Help: "Model tokens of finished AgentSessions, by kind (input, output, cache_read).",
		}, []string{"kind"}),
		ToolCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aerie_tool_calls_total",
			Help: "Tool calls of finished AgentSessions.",
		}),
		Cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aerie_cost_usd_total",
			Help: "What the model calls of finished AgentSessions cost in US dollars, by namespace and model.",
		}, []string{"namespace", "model"}),
	}
	m.Subagents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aerie_subagents_total",
		Help: "Subagents (spawn_agent) of finished AgentSessions, by agent type (persona).",
	}, []string{"agent_type"})
	m.SubagentTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aerie_subagent_tokens_total",
		Help: "Model tokens of the subagents of finished AgentSessions, by agent type and kind (input, output, cache_read).",
	}, []string{"agent_type", "kind"})
	var err error
	m.Sessions, err = register(reg, m.Sessions)
	if err != nil {
		return nil, err
	}
	if m.Duration, err = register(reg, m.Duration); err != nil {
		return nil, err
	}
	if m.Tokens, err = register(reg, m.Tokens); err != nil {
		return nil, err
	}
	if m.ToolCalls, err = register(reg, m.ToolCalls); err != nil {
		return nil, err
	}
	if m.Subagents, err = register(reg, m.Subagents); err != nil {
		return nil, err
	}
	if m.SubagentTokens, err = register(reg, m.SubagentTokens); err != nil {
		return nil, err
	}
	if m.Cost, err = register(reg, m.Cost); err != nil {
		return nil, err
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// finished records a session that has just finished.
func (m *Metrics) finished(s *aeriev1alpha1.AgentSession) {
	if m == nil {
		return
	}
	st := s.Status
	m.Sessions.WithLabelValues(string(st.Phase)).Inc()
	if st.StartTime != nil && st.CompletionTime != nil {
		m.Duration.Observe(st.CompletionTime.Sub(st.StartTime.Time).Seconds())
	}
	if u := st.Usage; u != nil {
		m.Tokens.WithLabelValues("input").Add(float64(u.InputTokens))
		m.Tokens.WithLabelValues("output").Add(float64(u.OutputTokens))
		m.Tokens.WithLabelValues("cache_read").Add(float64(u.CacheReadTokens))
		m.ToolCalls.Add(float64(u.ToolCalls))
		m.subagents(u.ByAgentType)
		if c, err := strconv.ParseFloat(u.CostUSD, 64); err == nil && c > 0 {
			m.Cost.WithLabelValues(s.Namespace, s.Spec.Model.Name).Add(c)
		}
	}
}

// maxAgentTypeLabels bounds the agent_type values the subagent metrics
// take, whatever personas the sessions name.
const maxAgentTypeLabels = 32

// agentTypeLabels are the agent_type values of the process: one set, as
// the collectors are one set however many reconcilers share them.
var agentTypeLabels = &labelCap{max: maxAgentTypeLabels}

// otherAgentType is the agent_type of the types past maxAgentTypeLabels,
// the name the runner folds its own overflow into.
const otherAgentType = "_other"

func (m *Metrics) subagents(types []aeriev1alpha1.AgentTypeUsage) {
	for _, t := range types {
		name := agentTypeLabels.label(t.Name)
		m.Subagents.WithLabelValues(name).Add(float64(t.Subagents))
		m.SubagentTokens.WithLabelValues(name, "input").Add(float64(t.InputTokens))
		m.SubagentTokens.WithLabelValues(name, "output").Add(float64(t.OutputTokens))
		m.SubagentTokens.WithLabelValues(name, "cache_read").Add(float64(t.CacheReadTokens))
	}
}

// labelCap hands out a label's values as they come, up to max of them
// besides otherAgentType; every later value is otherAgentType.
type labelCap struct {
	max  int
	mu   sync.Mutex
	seen map[string]bool
}

func (c *labelCap) label(v string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v == otherAgentType || c.seen[v] {
		return v
	}
	if len(c.seen) >= c.max {
		return otherAgentType
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[v] = true
	return v
}
