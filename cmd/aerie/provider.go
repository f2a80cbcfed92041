package main

import (
	"encoding/json"
	"fmt"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/provider/openai"
)

// providerNames lists the providers newProvider knows, for errors.
const providerNames = provider.NameAnthropic + ", " + provider.NameOpenAI + ", " +
	provider.NameOpenAICompatible + ", " + provider.NameScripted

// newProvider returns the provider cfg.Provider names, or an error that
// names the Config field at fault. This is the one place that picks a
// model API's adapter, so that only the binary links the SDKs.
func newProvider(cfg provider.Config) (provider.Provider, error) {
	switch cfg.Provider {
	case provider.NameAnthropic:
		p, err := anthropic.New(cfg)
		if err != nil {
			return nil, err
		}
		return p, nil
	case provider.NameOpenAI, provider.NameOpenAICompatible:
		return openai.New(cfg)
	case provider.NameScripted:
		p, err := provider.LoadScripted(cfg)
		if err != nil {
			return nil, err
		}
		return p, nil
	case "":
		return nil, fmt.Errorf("provider: Config.Provider is empty; want one of %s", providerNames)
	default:
		return nil, fmt.Errorf("provider: Config.Provider %q is not a known provider; want one of %s",
			cfg.Provider, providerNames)
	}
}

// warm fills every field of the throwaway provider and request that
// warmProvider needs filled; nothing reads it.
const warm = "warm"

// warmProvider encodes, in the background, a request of the shape a
// session's first one has (a system prompt, a user message, a tool with a
// schema) with a throwaway provider of that name and API. The SDKs build
// their JSON encoders by reflection the first time a type is encoded:
// milliseconds in a fresh process, which the first model request would
// otherwise spend on its way out. It sends nothing, and does nothing for a
// provider that does not send JSON (scripted) or that it does not know.
func warmProvider(name, api string) {
	switch name {
	case provider.NameAnthropic, provider.NameOpenAI, provider.NameOpenAICompatible:
	default:
		return
	}
	go func() {
		p, err := newProvider(provider.Config{
			Provider: name, API: api, Model: warm, APIKey: warm, BaseURL: "http://warm.invalid",
		})
		if err != nil {
			return
		}
		if e, ok := p.(encoder); ok {
			_, _ = e.Encode(warmRequest())
		}
	}()
}

// encoder is a provider that can encode a request without sending it.
type encoder interface {
	Encode(provider.Request) ([]byte, error)
}

func warmRequest() provider.Request {
	return provider.Request{
		Messages: []provider.Message{provider.SystemMessage(warm), provider.UserMessage(warm)},
		Tools: []provider.Tool{{
			Name: warm, Description: warm,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","description":"a"}},` +
				`"required":["a"],"additionalProperties":false}`),
		}},
		MaxOutputTokens: 1,
	}
}
