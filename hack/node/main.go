// Command node runs a single-node Kubernetes cluster on this machine: the
// envtest kube-apiserver and etcd, kube-scheduler, kube-controller-manager,
// containerd with runc, a bridge CNI network and a kubelet (see
// testenv.Node), with the binaries hack/node.sh provides. It needs root.
//
//	go run ./hack/node                 # up until Ctrl-C; prints the kubeconfig
//	go run ./hack/node -check          # up, run a pod to Running, down
//	go run ./hack/node -image a.tar    # import image archives as well
//
// On the way down it removes every mount, process, network namespace and
// cgroup the node made, and fails naming whatever it could not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/aerie-run/aerie/hack/testenv"
)

func main() {
	check := flag.Bool("check", false, "Run a pod of the sandbox image to Running, then tear down.")
	var images imageList
	flag.Var(&images, "image", "An image archive to import into containerd (repeatable).")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if err := run(*check, images); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(1)
	}
}

type imageList []string

func (l *imageList) String() string     { return strings.Join(*l, ",") }
func (l *imageList) Set(s string) error { *l = append(*l, s); return nil }

func run(check bool, images []string) (err error) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	start := time.Now()
	n, stop, err := testenv.NewNode(ctx)
	if err != nil {
		return err
	}
	defer func() {
		t := time.Now()
		err = errors.Join(err, stop())
		fmt.Fprintf(os.Stderr, "node: down in %s\n", time.Since(t).Round(time.Millisecond))
	}()
	fmt.Fprintf(os.Stderr, "node: %s Ready in %s (node IP %s, state in %s)\n",
		n.Name, time.Since(start).Round(time.Millisecond), n.NodeIP, n.Dir)
	for _, img := range images {
		if err := n.ImportImage(ctx, img); err != nil {
			return err
		}
	}
	if check {
		return checkPod(ctx, n)
	}
	fmt.Printf("export KUBECONFIG=%s\n", n.Kubeconfig)
	fmt.Fprintln(os.Stderr, "node: up; Ctrl-C tears it down")
	<-ctx.Done()
	return nil
}

// checkPod runs a pod of the sandbox image under Pod Security "restricted"
// and waits for it to be Running.
func checkPod(ctx context.Context, n *testenv.Node) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "node-check", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if err := n.Client.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: ns.Name},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "pause", Image: "localhost/aerie/pause:1", ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	start := time.Now()
	if err := n.Client.Create(ctx, pod); err != nil {
		return fmt.Errorf("create pod: %w", err)
	}
	var last string
	ok := testenv.Poll(2*time.Minute, func() bool {
		var p corev1.Pod
		if err := n.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("phase %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
		return p.Status.Phase == corev1.PodRunning
	})
	if !ok {
		return fmt.Errorf("pod not Running within 2m: %s", last)
	}
	fmt.Fprintf(os.Stderr, "node: pod %s/%s Running %s after create\n",
		ns.Name, pod.Name, time.Since(start).Round(time.Millisecond))
	return nil
}
