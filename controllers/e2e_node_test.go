package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// TestEndToEndNode checks what only a real node shows (AERIE_E2E_NODE=real,
// make e2e-node): the runner image's read-only root filesystem, and the
// real garbage collector removing a deleted session's runner pod and
// ConfigMap by their owner references.
func TestEndToEndNode(t *testing.T) {
	if !testenv.RealNode() {
		t.Skip("real-node test: run with AERIE_E2E_NODE=real (make e2e-node)")
	}
	e := startE2E(t)
	model := testenv.StartModelServer(t,
		bashTurn("c1", "touch /usr/local/bin/probe 2>&1; id -u; echo ok > /workspace/w.txt && echo wrote"),
		answer("Done."))
	e.session(t, "node", model)
	pod := e.pod(t, "node")
	s := e.waitFinished(t, "node")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		t.Fatalf("phase %s, want Succeeded", s.Status.Phase)
	}
	got := toolResults(t, requestForTurn(t, model, 2))["c1"]
	for _, want := range []string{"Read-only file system", "wrote"} {
		if !strings.Contains(got, want) {
			t.Errorf("the tool's output %q lacks %q: the root filesystem must be read-only, the workspace writable", got, want)
		}
	}

	// The session's deletion takes its runner pod and ConfigMap with it:
	// the real garbage collector follows their owner references.
	var cms corev1.ConfigMapList
	if err := e.cp.Client.List(t.Context(), &cms, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	var owned []string
	for _, cm := range cms.Items {
		for _, o := range cm.OwnerReferences {
			if o.UID == s.UID {
				owned = append(owned, cm.Name)
			}
		}
	}
	if len(owned) == 0 {
		t.Fatalf("no ConfigMap owned by session %s", s.Name)
	}
	if err := e.cp.Client.Delete(t.Context(), s, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	gone := func(obj client.Object) bool {
		err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err)
	}
	if !testenv.Poll(time.Minute, func() bool { return gone(&corev1.Pod{ObjectMeta: pod.ObjectMeta}) }) {
		t.Errorf("runner pod %s still there a minute after its session's deletion", pod.Name)
	}
	for _, name := range owned {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
		if !testenv.Poll(time.Minute, func() bool { return gone(cm) }) {
			t.Errorf("ConfigMap %s still there a minute after its session's deletion", name)
		}
	}
}
