package provider

import "encoding/json"

// Warm encodes, in the background, a request of the shape a session's first
// one has (a system prompt, a user message, a tool with a schema) with a
// throwaway provider of that name and API. The SDKs build their JSON
// encoders by reflection the first time a type is encoded: milliseconds in
// a fresh process, which the first model request would otherwise spend on
// its way out. Warm sends nothing, and does nothing for a provider that
// does not send JSON (scripted) or that it does not know.
func Warm(name, api string) {
	switch name {
	case NameAnthropic, NameOpenAI, NameOpenAICompatible:
	default:
		return
	}
	go func() {
		p, err := New(Config{Provider: name, API: api, Model: "warm", APIKey: "warm", BaseURL: "http://warm.invalid"})
		if err != nil {
			return
		}
		if e, ok := p.(encoder); ok {
			_, _ = e.encode(warmRequest)
		}
	}()
}

// encoder is a provider that can encode a request without sending it.
type encoder interface {
	encode(Request) ([]byte, error)
}

var warmRequest = Request{
	Messages: []Message{
		{Role: RoleSystem, Content: []Content{{Type: ContentText, Text: "warm"}}},
		{Role: RoleUser, Content: []Content{{Type: ContentText, Text: "warm"}}},
	},
	Tools: []Tool{{
		Name: "warm", Description: "warm",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","description":"a"}},"required":["a"],"additionalProperties":false}`),
	}},
	MaxOutputTokens: 1,
}

func (a *Anthropic) encode(req Request) ([]byte, error) { return a.body(req) }

func (o *OpenAIChat) encode(req Request) ([]byte, error) {
	p, err := o.params(req)
	if err != nil {
		return nil, err
	}
	return p.MarshalJSON()
}

func (o *OpenAIResponses) encode(req Request) ([]byte, error) {
	p, err := o.params(req)
	if err != nil {
		return nil, err
	}
	return p.MarshalJSON()
}
