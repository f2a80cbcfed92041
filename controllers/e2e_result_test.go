package controllers

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

const e2eResultSchema = `{"type":"object","properties":{"verdict":{"enum":["pass","fail"]},"log":{"type":"string"}},"required":["verdict"]}`

// resultSession creates an AgentSession that asks for a result of spec.
func (e *e2e) resultSession(t *testing.T, name string, model *testenv.ModelServer, spec *aeriev1alpha1.ResultSpec) {
	t.Helper()
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Check the build and report.",
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: model.URL(),
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
			},
			Result: spec,
		},
	}
	if err := e.cp.Client.Create(t.Context(), s); err != nil {
		t.Fatalf("create session %s: %v", name, err)
	}
}

// TestEndToEndResult runs sessions that ask for a structured result through
// the controller and runner pods: an inline schema whose result lands in
// status.result.structured; a schema from a ConfigMap whose large result
// only the store keeps (status.result.structuredRef), which aerie get
// --result prints; three invalid submissions, which fail the session
// ResultInvalid with exit code 6; and a schema that does not compile.
func TestEndToEndResult(t *testing.T) {
	e := startE2E(t)

	t.Run("InlineSchema", func(t *testing.T) {
		t.Parallel()
		model := testenv.StartModelServer(t, callTurn("r1", "submit_result", map[string]any{"verdict": "pass"}))
		e.resultSession(t, "result-inline", model, &aeriev1alpha1.ResultSpec{
			Schema: &runtime.RawExtension{Raw: []byte(e2eResultSchema)},
		})
		s := e.waitFinished(t, "result-inline")
		if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
			b, _ := json.MarshalIndent(s.Status, "", "  ")
			t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
		}
		if r := s.Status.Result; r == nil || r.Structured == nil || string(r.Structured.Raw) != `{"verdict":"pass"}` || r.StructuredRef != nil {
			t.Errorf("result %+v, want structured {\"verdict\":\"pass\"}", r)
		}
		out, err := exec.Command(e.bin, "get", "result-inline", "--result", "--kubeconfig", e.cp.Kubeconfig, "-n", e.ns).CombinedOutput()
		if err != nil || string(out) != `{"verdict":"pass"}`+"\n" {
			t.Errorf("aerie get --result: %v\n%s", err, out)
		}
	})

	t.Run("SchemaFromConfigMapLargeResult", func(t *testing.T) {
		t.Parallel()
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "result-schema", Namespace: e.ns},
			Data:       map[string]string{"schema.json": e2eResultSchema},
		}
		if err := e.cp.Client.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		log := strings.Repeat("all 812 tests passed; ", 400) // ~9 KiB: over the termination message
		model := testenv.StartModelServer(t, callTurn("r1", "submit_result", map[string]any{"verdict": "pass", "log": log}))
		e.resultSession(t, "result-large", model, &aeriev1alpha1.ResultSpec{
			SchemaFrom: &aeriev1alpha1.ResultSchemaSource{
				ConfigMapKeyRef: aeriev1alpha1.KeyReference{Name: "result-schema", Key: "schema.json"},
			},
		})
		s := e.waitFinished(t, "result-large")
		r := s.Status.Result
		if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || r == nil || r.Structured != nil || r.StructuredRef == nil ||
			r.StructuredRef.SessionID != s.Status.SessionID || r.StructuredRef.Seq <= 0 {
			b, _ := json.MarshalIndent(s.Status, "", "  ")
			t.Fatalf("want Succeeded with a structuredRef to the store; status:\n%s", b)
		}
		cmd := exec.Command(e.bin, "get", "result-large", "--result", "--kubeconfig", e.cp.Kubeconfig, "-n", e.ns)
		cmd.Env = append(cmd.Environ(), runconfig.DatabaseURLEnv+"="+e.dsn, "PATH="+filepath.Dir(e.bin))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("aerie get --result: %v\n%s", err, stderr.String())
		}
		var got struct{ Verdict, Log string }
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || got.Verdict != "pass" || got.Log != log {
			t.Errorf("aerie get --result printed %d bytes (%v), want the whole result", stdout.Len(), err)
		}
	})

	t.Run("InvalidThrice", func(t *testing.T) {
		t.Parallel()
		bad := func(id string) testenv.Turn { return callTurn(id, "submit_result", map[string]any{"verdict": "maybe"}) }
		model := testenv.StartModelServer(t, bad("a"), bad("b"), bad("c"))
		e.resultSession(t, "result-invalid", model, &aeriev1alpha1.ResultSpec{
			Schema: &runtime.RawExtension{Raw: []byte(e2eResultSchema)},
		})
		s := e.waitFinished(t, "result-invalid")
		r := s.Status.Result
		if s.Status.Phase != aeriev1alpha1.PhaseFailed || r == nil || r.Outcome != aeriev1alpha1.OutcomeResultInvalid ||
			r.ExitCode == nil || *r.ExitCode != runconfig.ExitResultInvalid || r.Structured != nil {
			b, _ := json.MarshalIndent(s.Status, "", "  ")
			t.Fatalf("want Failed, ResultInvalid, exit 6; status:\n%s", b)
		}
	})

	t.Run("SchemaDoesNotCompile", func(t *testing.T) {
		t.Parallel()
		model := testenv.StartModelServer(t)
		e.resultSession(t, "result-bad-schema", model, &aeriev1alpha1.ResultSpec{
			Schema: &runtime.RawExtension{Raw: []byte(`{"type":"objekt"}`)},
		})
		s := e.waitFinished(t, "result-bad-schema")
		r := s.Status.Result
		if s.Status.Phase != aeriev1alpha1.PhaseFailed || r == nil || r.ExitCode == nil || *r.ExitCode != runconfig.ExitConfig ||
			!strings.Contains(r.Message, "spec.result.schema: invalid JSON Schema") {
			b, _ := json.MarshalIndent(s.Status, "", "  ")
			t.Fatalf("want Failed with exit 2 naming spec.result.schema; status:\n%s", b)
		}
		if n := len(model.Requests()); n != 0 {
			t.Errorf("%d model requests with a schema that does not compile", n)
		}
	})
}
