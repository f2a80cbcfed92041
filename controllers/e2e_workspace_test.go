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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestEndToEndWorkspace runs a session over a repository on a PVC, through
// the controller and the pod host (the local pod runner and the built aerie
// binary, or a real node and the runner image): the agent
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
	ws := e.claim(t, "repo", files)
	pin, err := layer.ComputePin(ws, layer.Layer{Name: ".aerie", Kind: layer.KindProject, Dir: filepath.Join(ws, ".aerie")},
		filepath.Join(ws, ".aerie/tools/stamp.toml"), []string{"./stamp.sh"})
	if err != nil {
		t.Fatal(err)
	}
	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pins", Namespace: e.ns}, Data: map[string]string{"trust.toml": pin.TOML()}})

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

// claim creates the PersistentVolumeClaim name in e.ns holding files and
// returns the host directory behind it: the local pod runner's directory
// for the claim, or on a real node a hostPath PersistentVolume bound to
// the claim in advance (the node has no provisioner). The kubelet applies
// the pod's fsGroup to the volumes that support it, which a hostPath does
// not: the test does it, as the kubelet would to a provisioned volume.
func (e *e2e) claim(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	storage := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: storage},
		},
	}
	var dir string
	if e.local != nil {
		dir = filepath.Join(e.local.Dir(), "pvc", e.ns, name)
		testenv.WriteTree(t, dir, files)
	} else {
		dir = filepath.Join(t.TempDir(), name)
		testenv.WriteTree(t, dir, files)
		if err := applyFSGroup(dir, DefaultFSGroup); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      storage,
				AccessModes:                   pvc.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: dir, Type: ptr.To(corev1.HostPathDirectory)}},
				ClaimRef: &corev1.ObjectReference{Namespace: e.ns, Name: name},
			},
		}
		if err := e.cp.Client.Create(t.Context(), pv); err != nil {
			t.Fatalf("create PersistentVolume %s: %v", pv.Name, err)
		}
		pvc.Spec.StorageClassName = ptr.To("")
		pvc.Spec.VolumeName = pv.Name
	}
	if err := e.cp.Client.Create(t.Context(), pvc); err != nil {
		t.Fatalf("create PersistentVolumeClaim %s: %v", name, err)
	}
	return dir
}

// applyFSGroup does to dir what the kubelet does to a volume for a pod's
// fsGroup: everything under it belongs to gid and is group-writable, and
// its directories are setgid, so that what the containers write there
// belongs to gid too.
func applyFSGroup(dir string, gid int) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, gid); err != nil || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm() | 0o060
		if d.IsDir() {
			mode |= os.ModeSetgid | 0o010
		}
		return os.Chmod(p, mode)
	})
}
