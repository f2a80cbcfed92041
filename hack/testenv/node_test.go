package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// requireRealNode skips a test of the real node unless AERIE_E2E_NODE=real
// (`make e2e-node`): the first run builds the node's binaries for minutes,
// and it needs root.
func requireRealNode(t *testing.T) {
	t.Helper()
	if os.Getenv("AERIE_E2E_NODE") != "real" {
		t.Skip("real-node test: run with AERIE_E2E_NODE=real (make e2e-node)")
	}
}

// TestNodeRunsPodAndLeavesNothing runs a restricted pod of the sandbox
// image on a real node, then checks that stopping the node left no mount,
// shim process, bridge or state directory behind.
func TestNodeRunsPodAndLeavesNothing(t *testing.T) {
	requireRealNode(t)
	if why := nodeUnsupported(); why != "" {
		requireDependency(t, "a real node cannot run here: "+why, "run as root on Linux")
	}
	n, stop, err := NewNode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = stop()
		}
	})
	got := runPause(t, n)
	if got.Status.PodIP == "" || !net.ParseIP(got.Status.PodIP).IsPrivate() {
		t.Errorf("pod IP = %q, want one of the bridge's %s", got.Status.PodIP, nodePodCIDR)
	}
	// The ServiceAccount admission plugin and the token controller: the
	// pod got a projected token volume.
	if !hasProjectedToken(got) {
		t.Errorf("pod has no projected service-account token volume: %+v", got.Spec.Volumes)
	}

	dir := n.Dir
	stopped = true
	if err := stop(); err != nil {
		t.Fatalf("stop node: %v", err)
	}
	if m, err := mountsUnder(dir); err != nil || len(m) > 0 {
		t.Errorf("mounts left under %s: %v (%v)", dir, m, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("node dir %s still there: %v", dir, err)
	}
	if _, err := net.InterfaceByName(nodeBridge); err == nil {
		t.Errorf("bridge %s still there", nodeBridge)
	}
	if err := n.killShims(); err != nil {
		t.Error(err)
	}
}

// runPause runs a restricted pod of the sandbox image on n and returns it
// Running.
func runPause(t *testing.T, n *Node) *corev1.Pod {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := n.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: ns.Name},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "pause", Image: pauseImage, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false),
					ReadOnlyRootFilesystem: ptr(true),
					Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if err := n.Client.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return n.Pod(t, ns.Name, pod.Name, 2*time.Minute)
}

// TestNodeCleansUpAfterKilledNode kills a process that runs a node with a
// pod, as a test binary's timeout does, without letting it stop the node:
// the next node starts all the same, and nothing of the killed one's is
// left — no process naming its directory, no pod process, no directory.
func TestNodeCleansUpAfterKilledNode(t *testing.T) {
	if os.Getenv("AERIE_NODE_KILLED_HELPER") == "1" {
		n, _, err := NewNode(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		pod := runPause(t, n)
		fmt.Printf("node-dir=%s pod=%s\n", n.Dir, pod.UID)
		select {} // until killed
	}
	requireRealNode(t)
	if why := nodeUnsupported(); why != "" {
		requireDependency(t, "a real node cannot run here: "+why, "run as root on Linux")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNodeCleansUpAfterKilledNode$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), "AERIE_NODE_KILLED_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The helper's own output is relayed, so that when it fails to start
	// its node the reason shows here.
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "node-dir="); ok {
			dir, _, _ = strings.Cut(rest, " ")
			break
		}
		t.Logf("helper: %s", sc.Text())
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if dir == "" {
		t.Fatal("the helper process did not start its node")
	}
	n, stop, err := NewNode(t.Context())
	if err != nil {
		t.Fatalf("a node after a killed one: %v", err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the killed node's directory %s is still there: %v", dir, err)
	}
	// Every process of the killed node's, etcd included, named its directory.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(dir+"/")) {
			t.Errorf("process %s of the killed node still runs: %s", e.Name(), bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	runPause(t, n)
}

func hasProjectedToken(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return true
			}
		}
	}
	return false
}
