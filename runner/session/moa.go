package session

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/aerie-run/aerie/runner/moa"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// MoA configures the mixture_of_agents tool ([moa] of config.toml).
type MoA struct {
	// References are the models each question goes to, each made by
	// Model.New; an empty Provider is the session's. None: the tool is not
	// offered.
	References []transcript.Settings
	// Aggregator writes the synthesis: an empty Model is the session's
	// model, an empty Provider the session's provider.
	Aggregator transcript.Settings
	// Traces keeps the trace of every call: the session store.
	Traces moa.Traces
	// Ledger, when set, is charged what the tool's model calls use; nil
	// adds it to the session's usage, where the token budget counts it.
	Ledger moa.Ledger
}

// moaTool makes the mixture_of_agents tool of the run's session, or nil
// when [moa] names no reference models. A model that cannot be made (an
// unknown provider, missing credentials) stops the launch, as a
// compaction model does.
func (r *run) moaTool() (*moa.Tool, error) {
	m := r.opts.MoA
	if len(m.References) == 0 {
		return nil, nil
	}
	cfg := moa.Config{
		Traces: m.Traces, Tenant: r.opts.Session.Tenant, Session: r.sess.ID, Ledger: m.Ledger,
		MaxOutputTokens: r.opts.Model.MaxOutputTokens, Logger: r.opts.Logger,
	}
	for _, s := range m.References {
		mem, err := r.moaMember("moa.reference_models", s)
		if err != nil {
			return nil, err
		}
		cfg.References = append(cfg.References, mem)
	}
	agg := m.Aggregator
	if agg.Model == "" {
		agg = r.settings
	}
	var err error
	if cfg.Aggregator, err = r.moaMember("moa.aggregator_model", agg); err != nil {
		return nil, err
	}
	t, err := moa.New(cfg)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	return t, nil
}

// moaMember makes the model s names; key is the setting that names it.
func (r *run) moaMember(key string, s transcript.Settings) (moa.Member, error) {
	s = transcript.Settings{Provider: cmp.Or(s.Provider, r.settings.Provider), Model: s.Model}
	if s.Provider == r.settings.Provider && s.Model == r.settings.Model {
		return moa.Member{Provider: s.Provider, Model: s.Model, Client: r.model}, nil
	}
	c, err := r.opts.Model.New(s)
	if err != nil {
		return moa.Member{}, &ConfigError{Err: fmt.Errorf("%s %s:%s: %w", key, s.Provider, s.Model, err)}
	}
	return moa.Member{Provider: s.Provider, Model: s.Model, Client: c}, nil
}

// treeCharged is a tool whose results' own model usage (a mixture of
// agents) is also charged to the ledger of the run's session tree, made
// when the run starts, so that the tree's token budget counts it; the
// loop adds the same usage to the session's own.
type treeCharged struct {
	tools.Tool
	r *run
}

func (t treeCharged) Run(ctx context.Context, args json.RawMessage) tools.Result {
	res := t.Tool.Run(ctx, args)
	if t.r.tree != nil && res.Usage != (provider.Usage{}) {
		t.r.tree.Ledger().ChargeTool(res.Usage)
	}
	return res
}
