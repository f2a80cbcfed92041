package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestEnvtestBinary checks the lookup of commands beyond the control plane's
// own: KUBEBUILDER_ASSETS first, then the hack/envtest.sh cache, and, when
// neither has it, an error that says how to build it.
func TestEnvtestBinary(t *testing.T) {
	assets, cache := t.TempDir(), t.TempDir()
	cached := filepath.Join(cache, "k8s", KubernetesVersion+"-"+runtime.GOOS+"-"+runtime.GOARCH)
	if err := os.MkdirAll(cached, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(dir, name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("KUBEBUILDER_ASSETS", assets)
	t.Setenv("AERIE_ENVTEST_DIR", cache)

	_, err := EnvtestBinary("kube-controller-manager")
	if err == nil || !strings.Contains(err.Error(), "AERIE_ENVTEST_EXTRA=kube-controller-manager hack/envtest.sh") ||
		!strings.Contains(err.Error(), assets) || !strings.Contains(err.Error(), cached) {
		t.Errorf("EnvtestBinary with neither: %v, want the places looked in and the command that builds it", err)
	}

	write(assets, "kube-controller-manager", 0o644) // not executable: skipped
	want := write(cached, "kube-controller-manager", 0o755)
	if got, err := EnvtestBinary("kube-controller-manager"); err != nil || got != want {
		t.Errorf("EnvtestBinary from the cache = %q, %v; want %q", got, err, want)
	}

	want = write(assets, "kube-scheduler", 0o755)
	write(cached, "kube-scheduler", 0o755)
	if got, err := EnvtestBinary("kube-scheduler"); err != nil || got != want {
		t.Errorf("EnvtestBinary from KUBEBUILDER_ASSETS = %q, %v; want %q (it comes first)", got, err, want)
	}
}

// TestRestartAPIServer restarts the API server: what was stored before is
// still there, and the client of before reaches it again.
func TestRestartAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	cp := StartControlPlane(t)
	ns := cp.Namespace(t)
	if err := cp.RestartAPIServer(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	var got corev1.Namespace
	if err := cp.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &got); err != nil {
		t.Fatalf("get namespace %s after the restart: %v", ns, err)
	}
	cp.Namespace(t) // and writes go through
}
