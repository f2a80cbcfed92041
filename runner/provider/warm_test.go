package provider

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
)

// TestWarmEncodesWhatIsSent: the request Warm encodes goes through the
// same encoders as a real one, for every provider that sends JSON: what
// encode makes is the body the fake server receives for the same request
// (less "stream", which the SDKs add on sending).
func TestWarmEncodesWhatIsSent(t *testing.T) {
	for _, cfg := range []Config{
		{Provider: NameAnthropic},
		{Provider: NameOpenAI, API: APIResponses},
		{Provider: NameOpenAICompatible, API: APIChatCompletions},
	} {
		t.Run(cfg.Provider+"/"+cfg.API, func(t *testing.T) {
			ms := testenv.StartModelServer(t, testenv.Turn{Text: "ok"})
			cfg.Model, cfg.APIKey, cfg.BaseURL = "m", "k", ms.URL()
			if cfg.Provider != NameAnthropic {
				cfg.BaseURL += "/v1"
			}
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range p.Stream(t.Context(), warmRequest) {
				if err != nil {
					t.Fatal(err)
				}
			}
			e, ok := p.(encoder)
			if !ok {
				t.Fatalf("%T cannot encode a request without sending it", p)
			}
			encoded, err := e.encode(warmRequest)
			if err != nil {
				t.Fatal(err)
			}
			var sent, warm map[string]any
			if err := json.Unmarshal(ms.Requests()[0].Body, &sent); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(encoded, &warm); err != nil {
				t.Fatalf("encode made %s: %v", encoded, err)
			}
			delete(sent, "stream")
			delete(warm, "stream")
			if diff := cmp.Diff(sent, warm); diff != "" {
				t.Errorf("encoded body differs from the sent one (-sent +encoded):\n%s", diff)
			}
			if _, ok := warm["tools"]; !ok {
				t.Errorf("the warm request has no tools: %s", encoded)
			}
		})
	}
}
