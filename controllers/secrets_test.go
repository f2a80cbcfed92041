package controllers

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
)

// TestSecretsReserveAgentEnv ties the API's rule on spec.secrets[].name to
// the pod this package builds: every variable the agent container gets of
// its own, for every provider, is a name the API server refuses, so that a
// variable added to agentEnv without reserving its name fails here rather
// than letting a session replace the store's DSN or the model's key.
func TestSecretsReserveAgentEnv(t *testing.T) {
	t.Parallel()
	cp := sharedControlPlane(t)
	ns := cp.Namespace(t)
	names := map[string]bool{"PATH": true, "LD_PRELOAD": true}
	for _, p := range []aeriev1alpha1.ModelProvider{
		aeriev1alpha1.ProviderAnthropic, aeriev1alpha1.ProviderOpenAI,
		aeriev1alpha1.ProviderOpenAICompatible, aeriev1alpha1.ProviderScripted,
	} {
		s := minimalSession()
		s.Spec.Model.Provider = p
		pod := desiredPod(testConfig(), s, attempt{Number: 1, SessionID: testUID, Prompt: "x"})
		for _, e := range pod.Spec.Containers[0].Env {
			names[e.Name] = true
		}
	}
	if !names["ANTHROPIC_API_KEY"] || !names["OPENAI_API_KEY"] {
		t.Fatalf("the agent's variables %v lack a provider's API key", names)
	}
	for name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := &aeriev1alpha1.AgentSession{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reserved-" + strings.ToLower(strings.ReplaceAll(name, "_", "-"))},
				Spec: aeriev1alpha1.AgentSessionSpec{
					Prompt: "x",
					Model:  aeriev1alpha1.ModelSpec{Provider: aeriev1alpha1.ProviderScripted, Name: "demo"},
					Secrets: []aeriev1alpha1.SecretEnv{
						{Name: name, SecretKeyRef: aeriev1alpha1.KeyReference{Name: "s", Key: "k"}},
					},
				},
			}
			err := cp.Client.Create(t.Context(), s)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.secrets[0].name") || !strings.Contains(err.Error(), "name is reserved") {
				t.Errorf("a session naming the agent's own %s in spec.secrets: %v, want refused as reserved", name, err)
			}
		})
	}
}
