package controllers

import (
	"errors"

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
	}
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
	}
}
