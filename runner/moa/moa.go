// Package moa provides the mixture_of_agents tool: the model asks a
// question, the same question goes to several reference models at once,
// and an aggregator model reads their answers and writes the synthesis the
// tool returns. Each call is kept as one Mixture-of-Agents trace (every
// proposal and the aggregation, with models, usage and timings) in the
// session store's own table, outside the entry stream, as the spec has it.
//
// A reference model that fails does not fail the call: the others still
// count, and the result names the failure. Only when every reference model
// fails, or the aggregator does, is the result an error. What the models
// used is charged to a Ledger when there is one, else returned with the
// result (tools.Result.Usage) for the loop to add to the session's usage.
package moa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Name is the tool's name.
const Name = "mixture_of_agents"

// DefaultTimeout bounds each model call of a mixture when Config.Timeout
// is zero.
const DefaultTimeout = 5 * time.Minute

// traceTimeout bounds the storing of a trace, which runs after a cancel
// too.
const traceTimeout = 30 * time.Second

// Model answers a request; every provider.Provider is one.
type Model interface {
	Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error]
}

// Member is one model of a mixture.
type Member struct {
	// Provider and Model name it, in the traces and the result.
	Provider, Model string
	// Client makes its requests.
	Client Model
}

// name is how the result and errors name m.
func (m Member) name() string { return m.Provider + ":" + m.Model }

// Traces keeps the traces (store.DB does).
type Traces interface {
	AddTrace(ctx context.Context, tenant string, tr store.Trace) (store.Trace, error)
}

// Ledger is the budget the tool's model calls are charged to: it is told
// each call's usage as the call ends, and an error (the budget is spent)
// ends the mixture with an error result. It is called from several
// goroutines at once.
type Ledger interface {
	Charge(ctx context.Context, u transcript.Usage) error
}

// Config is what a Tool works with.
type Config struct {
	// References are the models each question goes to; at least one.
	References []Member
	// Aggregator writes the synthesis.
	Aggregator Member
	// Traces keeps a trace of every call, for Session of Tenant.
	Traces  Traces
	Tenant  string
	Session uuid.UUID
	// Ledger, when set, is charged every model call's usage, and the
	// result carries none; nil returns the usage with the result, for the
	// loop to add to the session's.
	Ledger Ledger
	// Timeout bounds each model call; zero is DefaultTimeout.
	Timeout time.Duration
	// MaxOutputTokens caps each answer; zero is the provider's default.
	MaxOutputTokens int64
	// Logger receives what goes wrong without failing the call (a trace
	// that could not be stored). Nil discards.
	Logger *slog.Logger
}

// Tool is the mixture_of_agents tool.
type Tool struct{ cfg Config }

// New returns the tool, or an error when cfg cannot work.
func New(cfg Config) (*Tool, error) {
	if len(cfg.References) == 0 {
		return nil, errors.New("mixture_of_agents: no reference models")
	}
	for _, m := range append([]Member{cfg.Aggregator}, cfg.References...) {
		if m.Client == nil || m.Model == "" {
			return nil, fmt.Errorf("mixture_of_agents: model %q has no client", m.name())
		}
	}
	if cfg.Traces == nil || cfg.Tenant == "" || cfg.Session == uuid.Nil {
		return nil, errors.New("mixture_of_agents: no store for the traces")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Tool{cfg: cfg}, nil
}

// Name implements tools.Tool.
func (t *Tool) Name() string { return Name }

// Description implements tools.Tool.
func (t *Tool) Description() string {
	names := make([]string, len(t.cfg.References))
	for i, m := range t.cfg.References {
		names[i] = m.name()
	}
	return "Ask several models the same question at once and get one answer that synthesizes theirs " +
		"(a mixture of agents). Use it for a hard judgement, design or diagnosis where independent " +
		"opinions help; not for questions a tool or the workspace can answer. The models see only the " +
		"question and the context you give, not this conversation or the workspace, so put in what they need. " +
		"Reference models: " + strings.Join(names, ", ") + "; aggregator: " + t.cfg.Aggregator.name() + "."
}

var schema = json.RawMessage(`{"type":"object","properties":{` +
	`"question":{"type":"string","description":"The question, complete in itself."},` +
	`"context":{"type":"string","description":"What the models need to know to answer: code, logs, constraints."}` +
	`},"required":["question"],"additionalProperties":false}`)

// Schema implements tools.Tool.
func (t *Tool) Schema() json.RawMessage { return schema }

// input is the tool's arguments.
type input struct {
	Question string `json:"question"`
	Context  string `json:"context,omitempty"`
}

// parseInput decodes the arguments strictly: a misspelt argument is
// reported rather than ignored.
func parseInput(call json.RawMessage) (input, error) {
	var in input
	if len(bytes.TrimSpace(call)) == 0 {
		call = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(call))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return input{}, fmt.Errorf("invalid arguments: %w", err)
	}
	if dec.More() {
		return input{}, errors.New("invalid arguments: trailing data after the JSON object")
	}
	if strings.TrimSpace(in.Question) == "" {
		return input{}, errors.New(`missing required argument "question"`)
	}
	return in, nil
}

// Run implements tools.Tool: the question to every reference model at
// once, then their answers to the aggregator.
func (t *Tool) Run(ctx context.Context, call json.RawMessage) tools.Result {
	in, err := parseInput(call)
	if err != nil {
		return tools.Result{Content: Name + ": " + err.Error(), IsError: true}
	}
	var usage provider.Usage
	tr := store.Trace{Session: t.cfg.Session, CallID: tools.CallID(ctx)}
	tr.Proposals = t.propose(ctx, in, &usage)
	var res tools.Result
	if ok := answered(tr.Proposals); len(ok) == 0 {
		res = tools.Result{Content: Name + ": every reference model failed: " + failures(tr.Proposals), IsError: true}
	} else {
		res = t.aggregate(ctx, in, tr.Proposals, &tr.Aggregate, &usage)
	}
	t.keep(ctx, tr)
	if t.cfg.Ledger == nil {
		res.Usage = usage
	}
	return res
}

// outcome is one model call's result.
type outcome struct {
	call  store.TraceCall
	usage provider.Usage
}

// propose asks every reference model at once and returns their calls in
// the order of the references, adding what they used to usage.
func (t *Tool) propose(ctx context.Context, in input, usage *provider.Usage) []store.TraceCall {
	req := proposalRequest(in, t.cfg.MaxOutputTokens)
	outs := make([]outcome, len(t.cfg.References))
	var wg sync.WaitGroup
	for i, m := range t.cfg.References {
		wg.Go(func() { outs[i] = t.ask(ctx, m, req) })
	}
	wg.Wait()
	calls := make([]store.TraceCall, len(outs))
	for i, o := range outs {
		calls[i] = o.call
		*usage = usage.Add(o.usage)
	}
	return calls
}

// aggregate asks the aggregator for the synthesis of the proposals, into
// agg, adding what it used to usage.
func (t *Tool) aggregate(
	ctx context.Context, in input, proposals []store.TraceCall, agg *store.TraceCall, usage *provider.Usage,
) tools.Result {
	o := t.ask(ctx, t.cfg.Aggregator, aggregationRequest(in, proposals, t.cfg.MaxOutputTokens))
	*agg, *usage = o.call, usage.Add(o.usage)
	if o.call.Error != "" {
		return tools.Result{
			Content: fmt.Sprintf("%s: the aggregator %s failed: %s", Name, t.cfg.Aggregator.name(), o.call.Error),
			IsError: true,
		}
	}
	return tools.Result{Content: synthesis(o.call.Output, proposals)}
}

// ask makes one model call, within the tool's timeout, and charges the
// ledger with it.
func (t *Tool) ask(ctx context.Context, m Member, req provider.Request) outcome {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	start := time.Now()
	resp, err := provider.Collect(m.Client.Stream(ctx, req))
	o := outcome{
		call: store.TraceCall{
			Provider: m.Provider, Model: m.Model, Duration: time.Since(start),
			InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens,
		},
		usage: resp.Usage,
	}
	if err == nil {
		err = answerError(resp)
	}
	if err == nil {
		o.call.Output = strings.TrimSpace(resp.Message.Text())
	} else {
		o.call.Error = callError(ctx, err, t.cfg.Timeout)
	}
	if t.cfg.Ledger != nil && resp.Usage != (provider.Usage{}) {
		if err := t.cfg.Ledger.Charge(ctx, chargeOf(resp.Usage)); err != nil && o.call.Error == "" {
			// The answer came, but the budget it was charged to is spent:
			// it does not count, as a request past the budget would not.
			o.call.Output, o.call.Error = "", "budget: "+err.Error()
		}
	}
	return o
}

// chargeOf is a call's usage as the ledger counts it: one request.
func chargeOf(u provider.Usage) transcript.Usage {
	return transcript.Usage{
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, Requests: 1,
	}
}

// answerError says why a complete response is no usable answer.
func answerError(resp provider.Response) error {
	switch resp.StopReason {
	case provider.StopMaxTokens:
		return errors.New("the answer was cut off at the output token limit")
	case provider.StopRefusal:
		return errors.New("the model refused to answer")
	case provider.StopContextWindow:
		return errors.New("the question and context fill the model's context window")
	}
	if strings.TrimSpace(resp.Message.Text()) == "" {
		return errors.New("the model answered without text")
	}
	return nil
}

// callError is the text of a failed call's error, on one line.
func callError(ctx context.Context, err error, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// keep stores the trace of the call, after a cancel too; a trace that
// cannot be stored is logged, and the model still gets its answer.
func (t *Tool) keep(ctx context.Context, tr store.Trace) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceTimeout)
	defer cancel()
	if _, err := t.cfg.Traces.AddTrace(ctx, t.cfg.Tenant, tr); err != nil {
		t.cfg.Logger.Warn("store the mixture-of-agents trace", "session", t.cfg.Session.String(),
			"tool", Name, "err", err)
	}
}
