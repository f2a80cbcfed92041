package moa

import (
	"fmt"
	"strings"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/store"
)

// aggregatorSystem is the aggregator's instruction: the
// aggregate-and-synthesize prompt of the Mixture-of-Agents method.
const aggregatorSystem = "You have been provided with a set of responses from various models to the latest " +
	"user query. Your task is to synthesize these responses into a single, high-quality response. It is " +
	"crucial to critically evaluate the information provided in these responses, recognizing that some of " +
	"it may be biased or incorrect. Your response should not simply replicate the given answers but should " +
	"offer a refined, accurate, and comprehensive reply to the instruction. Ensure your response is " +
	"well-structured, coherent, and adheres to the highest standards of accuracy and reliability."

// question is the user message every model is asked: the context, if
// any, then the question.
func question(in input) string {
	if strings.TrimSpace(in.Context) == "" {
		return in.Question
	}
	return "<context>\n" + strings.TrimSpace(in.Context) + "\n</context>\n\n" + in.Question
}

// proposalRequest is what each reference model is asked.
func proposalRequest(in input, maxOutput int64) provider.Request {
	return provider.Request{
		Messages:        []provider.Message{provider.UserMessage(question(in))},
		MaxOutputTokens: maxOutput,
	}
}

// aggregationRequest is what the aggregator is asked: the question, with
// the reference models' answers in its instruction.
func aggregationRequest(in input, proposals []store.TraceCall, maxOutput int64) provider.Request {
	var b strings.Builder
	b.WriteString(aggregatorSystem)
	b.WriteString("\n\nResponses from models:")
	for i, p := range answered(proposals) {
		fmt.Fprintf(&b, "\n\n%d. (%s:%s)\n%s", i+1, p.Provider, p.Model, p.Output)
	}
	return provider.Request{
		Messages:        []provider.Message{provider.SystemMessage(b.String()), provider.UserMessage(question(in))},
		MaxOutputTokens: maxOutput,
	}
}

// answered are the calls that have an answer.
func answered(calls []store.TraceCall) []store.TraceCall {
	var out []store.TraceCall
	for _, c := range calls {
		if c.Error == "" {
			out = append(out, c)
		}
	}
	return out
}

// failures names the failed calls and why, on one line.
func failures(calls []store.TraceCall) string {
	var fs []string
	for _, c := range calls {
		if c.Error != "" {
			fs = append(fs, fmt.Sprintf("%s:%s: %s", c.Provider, c.Model, c.Error))
		}
	}
	return strings.Join(fs, "; ")
}

// synthesis is the tool's result: the aggregator's answer, and which
// reference models it had, the failed ones named with their errors.
func synthesis(answer string, proposals []store.TraceCall) string {
	ok := answered(proposals)
	var b strings.Builder
	b.WriteString(answer)
	fmt.Fprintf(&b, "\n\n[%s: %d of %d reference models answered", Name, len(ok), len(proposals))
	if len(ok) < len(proposals) {
		b.WriteString("; failed: " + failures(proposals))
	}
	b.WriteString("]")
	return b.String()
}
