package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/aerie-run/aerie/runner/process"
)

// nodeIP is the address of the runner's Node: the API server reaches the
// kubelet endpoint there, and it is every pod's hostIP.
const nodeIP = "127.0.0.1"

// PodRunner is a kubelet for tests and the demo, since no test machine has
// a container runtime. It registers a Node, binds the unscheduled pods
// (envtest runs no scheduler), and runs each container's command as a
// local process, in a process group of its own, with the pod's
// environment, working directory and volumes (see MountMode), as the user
// runAsUser and runAsGroup name when the runner is root. Images are
// ignored: a container needs a command.
//
// Like a kubelet it runs init containers one by one and then the containers
// together; runs sidecars (init containers with restartPolicy Always) from
// their turn on beside the rest, counts them started once running, restarts
// them whenever they exit, and stops them, last and in reverse order, once
// the containers are done, the pod's phase following the containers alone;
// restarts the others as restartPolicy says; writes the pod's phase,
// conditions and container states (exit codes, termination messages) back
// through the API; honours activeDeadlineSeconds and, on deletion, the
// grace period (SIGTERM to each container's group, SIGKILL after the grace)
// before it removes the pod object; and serves the kubelet's containerLogs
// endpoint so that `kubectl logs` works.
//
// A container's environment is PATH (the runner's), HOSTNAME (the pod's
// name), HOME (/root for UID 0, / for others), then the pod's env and
// envFrom, and under MountPathMap PathMapEnv: nothing else of the runner's
// environment reaches it. Its output is kept in files under Dir. The
// kubelet endpoint listens on 127.0.0.1 over TLS with a self-signed
// certificate and no authentication: whoever can reach the machine's
// loopback can read the logs of the runner's pods.
//
// Each pod gets an IP of its own on the loopback (127.x.y.z, from its UID),
// so that two pods can serve the same port; they all share the host's
// network namespace, though.
//
// Not done: probes, lifecycle hooks, resource limits, exec/attach/port-forward, networking of its own,
// service environment variables, /etc/hosts and /etc/resolv.conf,
// service-account tokens, image pull secrets, node heartbeats and leases,
// and updates of ConfigMap and Secret volumes after the pod started.
type PodRunner struct {
	cs         kubernetes.Interface
	node       string
	scheduler  string
	dir        string
	mode       MountMode
	commands   map[string]string
	nonRootUID int64
	backoff    time.Duration
	capacity   corev1.ResourceList
	reaper     *process.Reaper
	log        *slog.Logger
	root       bool
	cert       tls.Certificate
	pathEnv    string

	ready   chan struct{}
	running atomic.Bool
	// lister is set by Run before any worker starts.
	lister corelisters.PodLister

	mu       sync.Mutex
	workers  map[types.UID]*podWorker
	byName   map[string]*podWorker // namespace/name → the worker of the latest pod of that name
	finished map[types.UID]bool    // pods whose worker ended; later events for them are ignored
	stopping bool
	wg       sync.WaitGroup
}

// PodRunnerOptions configures a PodRunner. The zero value works for
// StartPodRunner; NewPodRunner needs a Dir.
type PodRunnerOptions struct {
	// NodeName is the Node the runner registers and whose pods it runs;
	// "aerie-local" when empty.
	NodeName string
	// SchedulerName is the spec.schedulerName of the unscheduled pods the
	// runner binds to its node; "default-scheduler", what the API server
	// fills in, when empty. Runners sharing a control plane need different
	// ones.
	SchedulerName string
	// Dir holds the pods' volumes, logs and termination messages, the
	// directories of PersistentVolumeClaims, and copies of the Commands
	// binaries. StartPodRunner makes a fresh one when empty; NewPodRunner
	// requires it. Containers running as other users must be able to
	// traverse it (0755). Keep it short under MountPathMap: the local path
	// of a unix socket on a volume (an executor's, say) is below it, and a
	// socket's path is limited to 108 bytes.
	Dir string
	// Commands maps command names, as a container's command[0] gives them
	// (for example "aerie"), to local executables; other names are looked
	// up in PATH. The binaries are copied (hard-linked when possible) into
	// Dir, so that containers running as other users can execute them
	// wherever they were built.
	Commands map[string]string
	// Mounts chooses how containers see their volumes; MountAuto by default.
	Mounts MountMode
	// NonRootUID is the UID of a container with runAsNonRoot and no
	// runAsUser: in a cluster the image's user, which the runner cannot
	// know. 65532 when zero.
	NonRootUID int64
	// RestartBackoff is the first delay before a container is restarted
	// (restartPolicy OnFailure or Always), doubled at each restart up to a
	// minute; one second when zero. A kubelet starts at ten seconds and
	// goes up to five minutes, which tests cannot wait for.
	RestartBackoff time.Duration
	// Capacity is the node's capacity and allocatable resources; when nil,
	// the machine's CPUs and memory and 110 pods.
	Capacity corev1.ResourceList
	// Reaper, when set, starts and reaps every container process. Set it
	// when this process runs a process.Reaper (process.Subreap), which
	// could otherwise take the exit status of a container from the runner.
	Reaper *process.Reaper
	// Logger receives the runner's own log. StartPodRunner sends it to the
	// test's log when nil; NewPodRunner discards it.
	Logger *slog.Logger
}

// StartPodRunner starts a pod runner on the control plane for the test and
// stops it in t.Cleanup, after the test's later cleanups: every container
// still running is then torn down (SIGTERM, process.DefaultGrace, SIGKILL).
// It returns once the Node is registered and the runner watches pods.
func StartPodRunner(t testing.TB, cp *ControlPlane, opts PodRunnerOptions) *PodRunner {
	t.Helper()
	if cp == nil {
		t.Fatal("start pod runner: no control plane")
	}
	if opts.Dir == "" {
		// Not t.TempDir(): its 0700 parent would keep containers that run
		// as other users out of their volumes and binaries.
		dir, err := os.MkdirTemp("", "aerie-podrunner-")
		if err != nil {
			t.Fatalf("start pod runner: %v", err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatalf("start pod runner: %v", err)
		}
		t.Cleanup(func() {
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("remove pod runner directory: %v", err)
			}
		})
		opts.Dir = dir
	}
	if opts.Logger == nil {
		tw := &testLogWriter{t: t}
		t.Cleanup(tw.close)
		opts.Logger = slog.New(slog.NewTextHandler(tw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	r, err := NewPodRunner(cp.Config, opts)
	if err != nil {
		t.Fatalf("start pod runner: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pod runner: %v", err)
		}
	})
	select {
	case <-r.Ready():
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("start pod runner: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("start pod runner: not ready within a minute")
	}
	return r
}

// NewPodRunner returns a pod runner that talks to the API server at cfg;
// Run starts it.
func NewPodRunner(cfg *rest.Config, opts PodRunnerOptions) (*PodRunner, error) {
	if runtime.GOOS != "linux" {
		return nil, errors.New("create pod runner: the local pod runner needs Linux (process groups and /proc)")
	}
	if opts.Dir == "" {
		return nil, errors.New("create pod runner: PodRunnerOptions.Dir is empty; give the runner a directory for volumes and logs")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("create pod runner: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create pod runner: %w", err)
	}
	r := &PodRunner{
		cs:         cs,
		node:       cmpOr(opts.NodeName, "aerie-local"),
		scheduler:  cmpOr(opts.SchedulerName, corev1.DefaultSchedulerName),
		dir:        dir,
		nonRootUID: opts.NonRootUID,
		backoff:    opts.RestartBackoff,
		capacity:   opts.Capacity,
		reaper:     opts.Reaper,
		log:        opts.Logger,
		root:       os.Geteuid() == 0,
		pathEnv:    cmpOr(os.Getenv("PATH"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
		ready:      make(chan struct{}),
		workers:    make(map[types.UID]*podWorker),
		byName:     make(map[string]*podWorker),
		finished:   make(map[types.UID]bool),
	}
	if r.nonRootUID == 0 {
		r.nonRootUID = 65532
	}
	if r.backoff <= 0 {
		r.backoff = time.Second
	}
	if r.capacity == nil {
		r.capacity = machineCapacity()
	}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r.log = r.log.With("node", r.node)
	for _, sub := range []string{"pods", "pvc", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("create pod runner: %w", err)
		}
	}
	if r.commands, err = installCommands(filepath.Join(dir, "bin"), opts.Commands); err != nil {
		return nil, fmt.Errorf("create pod runner: %w", err)
	}
	switch opts.Mounts {
	case MountAuto:
		r.mode = MountPathMap
		if err := probeMountNamespace(dir); err == nil {
			r.mode = MountNamespace
		} else {
			r.log.Info("containers see their volumes through a path map", "reason", err)
		}
	case MountNamespace:
		if err := probeMountNamespace(dir); err != nil {
			return nil, fmt.Errorf("create pod runner: Mounts is MountNamespace, but %w (it needs root with CAP_SYS_ADMIN); use MountAuto or MountPathMap", err)
		}
		r.mode = MountNamespace
	case MountPathMap:
		r.mode = MountPathMap
	default:
		return nil, fmt.Errorf("create pod runner: Mounts is %v, which is not a MountMode", opts.Mounts)
	}
	if r.cert, err = selfSignedCert(r.node); err != nil {
		return nil, fmt.Errorf("create pod runner: %w", err)
	}
	return r, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// installCommands copies each command's binary into bin, for containers
// running as other users, and returns name → copy.
func installCommands(bin string, commands map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(commands))
	for name, src := range commands {
		if name == "" || strings.ContainsAny(name, "/\x00") {
			return nil, fmt.Errorf("PodRunnerOptions.Commands: %q is not a command name (no slashes)", name)
		}
		// The file itself: a hard link to a symbolic link would keep a
		// relative target that means nothing in bin.
		src, err := filepath.EvalSymlinks(src)
		if err != nil {
			return nil, fmt.Errorf("PodRunnerOptions.Commands[%q]: %w", name, err)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("PodRunnerOptions.Commands[%q]: %w", name, err)
		}
		if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("PodRunnerOptions.Commands[%q]: %s is not an executable file", name, src)
		}
		dst := filepath.Join(bin, name)
		_ = os.Remove(dst)
		// A link when everyone may already execute the file; otherwise a
		// copy, whose mode can change without touching the original.
		if fi.Mode()&0o555 != 0o555 || os.Link(src, dst) != nil {
			if err := copyFile(src, dst); err != nil {
				return nil, fmt.Errorf("PodRunnerOptions.Commands[%q]: %w", name, err)
			}
			if err := os.Chmod(dst, fi.Mode().Perm()|0o555); err != nil {
				return nil, fmt.Errorf("PodRunnerOptions.Commands[%q]: %w", name, err)
			}
		}
		out[name] = dst
	}
	return out, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close() //nolint:errcheck // read-only
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

// machineCapacity is the node capacity of this machine.
func machineCapacity() corev1.ResourceList {
	c := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI),
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		c[corev1.ResourceMemory] = *resource.NewQuantity(int64(si.Totalram)*int64(si.Unit), resource.BinarySI)
	}
	return c
}

// NodeName is the name of the runner's Node.
func (r *PodRunner) NodeName() string { return r.node }

// Dir is the runner's directory.
func (r *PodRunner) Dir() string { return r.dir }

// Mounts is how containers see their volumes: MountNamespace or
// MountPathMap, never MountAuto.
func (r *PodRunner) Mounts() MountMode { return r.mode }

// podDir is the directory of a pod: its UID alone, to keep the paths of
// unix sockets on its volumes short under MountPathMap (108 bytes at most).
func (r *PodRunner) podDir(pod *corev1.Pod) string {
	return filepath.Join(r.dir, "pods", string(pod.UID))
}

// VolumePath is the local directory of a volume of a pod that the runner
// runs (an emptyDir, a ConfigMap's files, ...), for a test to look into.
// A PersistentVolumeClaim's directory is shared by the pods that use the
// claim, and a hostPath volume is its path.
func (r *PodRunner) VolumePath(pod *corev1.Pod, volume string) string {
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Name != volume:
		case v.PersistentVolumeClaim != nil:
			return filepath.Join(r.dir, "pvc", pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		case v.HostPath != nil:
			return v.HostPath.Path
		}
	}
	return filepath.Join(r.podDir(pod), "volumes", volume)
}

// Ready is closed once Run has registered the Node and watches pods.
func (r *PodRunner) Ready() <-chan struct{} { return r.ready }

// Run registers the Node, serves the kubelet endpoint and runs pods until
// ctx ends; it then tears down every container still running and marks the
// Node not ready. Pod objects are left as they are, as by a kubelet that
// stops.
func (r *PodRunner) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("run pod runner: Run was already called")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	ln, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		return fmt.Errorf("run pod runner: listen for the kubelet endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", r.serveLogs)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{r.cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(r.log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	defer func() {
		_ = srv.Close() // followers of a log end with it
		//nolint:errcheck // after Close, ServeTLS returns http.ErrServerClosed
		<-served
	}()

	if err := r.registerNode(ctx, ln.Addr().(*net.TCPAddr).Port); err != nil {
		return fmt.Errorf("run pod runner: %w", err)
	}
	defer r.markNodeStopped()

	factory := informers.NewSharedInformerFactory(r.cs, 0)
	pods := factory.Core().V1().Pods()
	r.lister = pods.Lister()
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(ctx, obj) },
		UpdateFunc: func(_, obj any) { r.observe(ctx, obj) },
		DeleteFunc: r.observeDelete,
	}); err != nil {
		return fmt.Errorf("run pod runner: watch pods: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		r.stop()
		return nil // ended before it was ready
	}
	close(r.ready)
	r.log.Info("pod runner ready", "mounts", r.mode, "dir", r.dir)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
		served <- serveErr // for the deferred Close
		serveErr = fmt.Errorf("run pod runner: kubelet endpoint: %w", serveErr)
		cancel()
	}
	r.stop()
	return serveErr
}

// stop makes the runner take no new pods and waits for the workers, whose
// context has ended, to tear their containers down.
func (r *PodRunner) stop() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	r.wg.Wait()
}

// observe hands a pod event to the pod's worker, starting one for a pod of
// this node, or an unscheduled pod for this runner to bind.
func (r *PodRunner) observe(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return
	}
	if w := r.workers[pod.UID]; w != nil {
		w.wakeUp()
		return
	}
	if r.finished[pod.UID] {
		return
	}
	switch {
	case pod.Spec.NodeName == r.node:
	case pod.Spec.NodeName == "" && pod.Spec.SchedulerName == r.scheduler && pod.DeletionTimestamp == nil:
	default:
		return
	}
	w := newPodWorker(r, pod)
	r.workers[pod.UID] = w
	r.byName[w.namespace+"/"+w.name] = w
	r.wg.Go(func() { w.run(ctx) })
}

func (r *PodRunner) observeDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.workers[pod.UID]; w != nil {
		w.wakeUp()
	}
	delete(r.finished, pod.UID)
}

// forget drops an ended worker.
func (r *PodRunner) forget(w *podWorker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.workers, w.uid)
	if r.byName[w.namespace+"/"+w.name] == w {
		delete(r.byName, w.namespace+"/"+w.name)
	}
	r.finished[w.uid] = true
}

// registerNode creates or updates the runner's Node: Ready, with its
// capacity, its address and the port of its kubelet endpoint.
func (r *PodRunner) registerNode(ctx context.Context, port int) error {
	nodes := r.cs.CoreV1().Nodes()
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: r.node,
		Labels: map[string]string{
			"kubernetes.io/hostname": r.node,
			"kubernetes.io/os":       runtime.GOOS,
			"kubernetes.io/arch":     runtime.GOARCH,
			"aerie.run/pod-runner":   "true",
		},
	}}
	node, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = nodes.Get(ctx, r.node, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", r.node, err)
	}
	now := metav1.Now().Rfc3339Copy()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	var uname unix.Utsname
	_ = unix.Uname(&uname)
	for attempt := 0; ; attempt++ {
		node.Status = corev1.NodeStatus{
			Capacity:    r.capacity,
			Allocatable: r.capacity,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "the local pod runner is ready"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
			},
			// An InternalIP only: the API server tries addresses in the
			// order Hostname, InternalDNS, InternalIP, and the node's name
			// resolves to nothing.
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          "v" + KubernetesVersion,
				ContainerRuntimeVersion: "aerie-local://" + KubernetesVersion,
				OperatingSystem:         runtime.GOOS,
				Architecture:            runtime.GOARCH,
				KernelVersion:           unix.ByteSliceToString(uname.Release[:]),
				OSImage:                 "aerie local pod runner",
			},
		}
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) || attempt == 5 {
			break
		}
		if node, err = nodes.Get(ctx, r.node, metav1.GetOptions{}); err != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", r.node, err)
	}
	return nil
}

// markNodeStopped sets the Node's Ready condition to Unknown, as the node
// lifecycle controller would once a stopped kubelet stops posting status.
func (r *PodRunner) markNodeStopped() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for attempt := 0; attempt < 5; attempt++ {
		node, err := r.cs.CoreV1().Nodes().Get(ctx, r.node, metav1.GetOptions{})
		if err != nil {
			r.log.Warn("mark node stopped", "error", err)
			return
		}
		now := metav1.Now().Rfc3339Copy()
		for i := range node.Status.Conditions {
			if c := &node.Status.Conditions[i]; c.Type == corev1.NodeReady {
				c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "the local pod runner stopped"
				c.LastHeartbeatTime, c.LastTransitionTime = now, now
			}
		}
		_, err = r.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			r.log.Warn("mark node stopped", "error", err)
			return
		}
	}
}

// testLogWriter sends the runner's log to the test's log until the test
// ends; t.Log panics after that.
type testLogWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// itoa is strconv.Itoa for the small numbers in file names.
func itoa[T ~int | ~int32 | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }
