package controllers

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestEndToEndWorkspace runs a session over a repository on a PVC, through
// the controller, the pod runner and the built aerie binary: the agent
// container reads the project's AGENTS.md and .aerie/ layer from its
// read-only mount of the workspace, a project tool pinned by
// spec.trust.pinsFrom runs in the workspace container, and a link planted
// in the repository to /proc/self/environ does not bring the agent
// container's secrets to the model.
func TestEndToEndWorkspace(t *testing.T) {
	e := startE2E(t)
	if m := e.runner.Mounts(); m != testenv.MountNamespace {
		t.Skipf("the pod runner maps paths (%s): the agent container cannot see /workspace; run as root for mount namespaces", m)
	}
	create := func(obj client.Object) {
		t.Helper()
		if err := e.cp.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	e.needLocal(t, "the workspace is a PersistentVolumeClaim the pod runner backs with a directory; the node has no provisioner")
	ws := filepath.Join(e.local.Dir(), "pvc", e.ns, "repo")
	files := map[string]string{
		"AGENTS.md":                  "Project rule: e2e-agents-marker.\n",
		".aerie/tools/stamp.toml":    "name = \"stamp\"\ndescription = \"Stamps the workspace.\"\ncommand = [\"./stamp.sh\"]\n",
		".aerie/tools/stamp.sh":      "#!/bin/sh\ncat >/dev/null\nid -u > ../../stamped\necho stamped\n",
		".aerie/APPEND_SYSTEM.md":    "Project append: e2e-append-marker.\n",
		"sub/.keep":                  "",
		"sub/.aerie/SYSTEM.md":       "->/proc/self/environ",
		"sub/AGENTS.md":              "->/proc/self/environ",
		"sub/.aerie/tools/leak.toml": "->/proc/self/environ",
	}
	testenv.WriteTree(t, ws, files)
	pin, err := layer.ComputePin(ws, layer.Layer{Name: ".aerie", Kind: layer.KindProject, Dir: filepath.Join(ws, ".aerie")},
		filepath.Join(ws, ".aerie/tools/stamp.toml"), []string{"./stamp.sh"})
	if err != nil {
		t.Fatal(err)
	}
	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pins", Namespace: e.ns}, Data: map[string]string{"trust.toml": pin.TOML()}})
	create(&corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: e.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})

	model := testenv.StartModelServer(t,
		testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "s1", Name: "stamp", Arguments: "{}"}}, Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 10}},
		testenv.Turn{Text: "Stamped.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: "workspace", Namespace: e.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Stamp the workspace.",
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: model.URL(),
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
			},
			Workspace: &aeriev1alpha1.WorkspaceSpec{PersistentVolumeClaim: &aeriev1alpha1.PVCWorkspace{ClaimName: "repo"}, WorkingDir: "sub"},
			Trust:     &aeriev1alpha1.TrustSpec{PinsFrom: []aeriev1alpha1.KeyReference{{Name: "pins", Key: "trust.toml"}}},
		},
	}
	create(s)
	s = e.waitFinished(t, "workspace")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}
	if u := s.Status.Usage; u == nil || u.ToolCalls != 1 {
		t.Errorf("usage %+v, want 1 tool call", u)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "stamped")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(DefaultWorkspaceUser) {
		t.Errorf("the pinned project tool did not run in the workspace container: %q, %v", b, err)
	}

	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	for _, want := range []string{"e2e-agents-marker", "e2e-append-marker", `"stamp"`} {
		if !bytes.Contains(reqs[0].Body, []byte(want)) {
			t.Errorf("the first request lacks %s: the workspace was not read", want)
		}
	}
	for _, secret := range []string{e2eAPIKey, e.dsn, "AERIE_DATABASE_URL"} {
		for _, req := range reqs {
			if bytes.Contains(req.Body, []byte(secret)) {
				t.Errorf("a request to the model holds %q: a link in the workspace was followed", secret)
			}
		}
	}

	// The journal records the layers, the project's with their path in
	// the pod.
	st, err := dburl.Open(t.Context(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	es, err := st.Entries(t.Context(), e.ns, uuid.MustParse(s.Status.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := es[0].Payload.(transcript.Layers)
	if !ok {
		t.Fatalf("first entry %T, want the layers record", es[0].Payload)
	}
	var got []string
	for _, l := range rec.Layers {
		got = append(got, l.Kind+" "+l.Source)
	}
	if diff := cmp.Diff([]string{"project /workspace/sub/.aerie", "project /workspace/.aerie"}, got); diff != "" {
		t.Errorf("layers record (-want +got):\n%s", diff)
	}
	for _, l := range es {
		b, _ := transcript.EncodePayload(l.Payload)
		for _, secret := range []string{e2eAPIKey, e.dsn} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("entry %d holds %q", l.Seq, secret)
			}
		}
	}
}
