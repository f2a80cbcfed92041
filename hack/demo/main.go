// Command demo runs aerie's main job on its embedded defaults, on one machine
// with no cluster and no container runtime: a local control plane (the
// envtest kube-apiserver and etcd), the controller in-process, the local pod
// runner that runs runner pods as processes, and a session store in SQLite
// (or PostgreSQL when DATABASE_URL is set). It applies a platform layer with a
// skill, a custom tool, a hook and a model script, creates an AgentSession,
// shows its progress, prints its status, transcript and effects, and stops
// everything. `make demo` builds bin/aerie (and bin/kubectl-aerie beside it, for
// `aerie layer pack`) and runs it.
//
// With AERIE_E2E_NODE=real (`make demo NODE=real`) the runner pod runs on a
// real node instead (kubelet, containerd and runc, hack/testenv.NewNode), in
// the runner image built from the Dockerfile (hack/images.sh), with the
// session store in a PostgreSQL server the demo starts, which the pod reaches
// over the node's network (or the one DATABASE_URL names).
//
// With ANTHROPIC_API_KEY or OPENAI_API_KEY set the session talks to a real
// model instead of replaying the script (AERIE_DEMO_MODEL names the model).
// With KEEP=1 everything stays up after the session, for kubectl, until
// Ctrl-C.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	aeriev1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/controllers"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Namespaces of the demo: the controller's, where platform layers live, and
// the session's.
const (
	controllerNamespace = "aerie-system"
	sessionNamespace    = "demo"
	platformLayer       = "demo-platform"
)

type options struct {
	aerie    string // the aerie binary
	layer    string // the platform layer's directory
	session  string // the AgentSession manifest
	dir      string // working directory; a fresh temporary one when empty
	timeout  time.Duration
	keep     bool
	database string // DSN; SQLite in dir when empty
}

func main() {
	var o options
	flag.StringVar(&o.aerie, "aerie", "bin/aerie", "The aerie binary, which runs in the runner pods.")
	flag.StringVar(&o.layer, "layer", "hack/demo/layer",
		"Directory of the platform layer (skills, tools, hooks, scripted model turns).")
	flag.StringVar(&o.session, "session", "hack/demo/session.yaml", "The AgentSession manifest.")
	flag.StringVar(&o.dir, "dir", "",
		"Directory for the control plane, the pods and the SQLite store; "+
			"a fresh temporary one, removed at the end, when empty.")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "How long to wait for the session to finish.")
	flag.BoolVar(&o.keep, "keep", os.Getenv("KEEP") == "1",
		"Keep everything running after the session until Ctrl-C (KEEP=1).")
	flag.Parse()
	o.database = os.Getenv("DATABASE_URL")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// step prints a progress line with the time since the start.
type stepper struct{ start time.Time }

func (s stepper) printf(format string, args ...any) {
	fmt.Printf("[%5.1fs] %s\n", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...))
}

// run runs the demo and returns the exit code: 0 when the session
// succeeded.
func run(ctx context.Context, o options) (code int, err error) {
	st := stepper{start: time.Now()}
	aerie, err := filepath.Abs(o.aerie)
	if err != nil {
		return 1, err
	}
	if _, err := os.Stat(aerie); err != nil {
		return 1, fmt.Errorf("find the aerie binary: %w "+
			"(build it with `go build -o bin/ ./cmd/aerie ./cmd/kubectl-aerie`, or run `make demo`)", err)
	}
	dir, removeDir, err := demoDir(o)
	if err != nil {
		return 1, err
	}
	defer removeDir()

	logFile, err := os.Create(filepath.Join(dir, "demo.log"))
	if err != nil {
		return 1, err
	}
	defer func() {
		if cerr := logFile.Close(); cerr != nil && err == nil {
			code, err = 1, fmt.Errorf("close the demo's log: %w", cerr)
		}
	}()
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctrl.SetLogger(logr.FromSlogHandler(logger.Handler()))

	p, err := startPlatform(ctx, st, dir, aerie, o.database, logger, testenv.RealNode())
	if err != nil {
		return 1, err
	}
	defer p.stop()

	st.printf("applying the platform layer %s/%s from %s", controllerNamespace, platformLayer, o.layer)
	if err := applyLayer(ctx, p.cp, aerie, o.layer); err != nil {
		return 1, err
	}
	session, model, err := sessionManifest(ctx, p.cp, o.session)
	if err != nil {
		return 1, err
	}
	if err := p.cp.Client.Create(ctx, session); err != nil {
		return 1, fmt.Errorf("create the AgentSession from %s: %w", o.session, err)
	}
	st.printf("created AgentSession %s/%s (model %s)", session.Namespace, session.Name, model)

	waitCtx, cancelWait := context.WithTimeout(ctx, o.timeout)
	defer cancelWait()
	final, pod, err := follow(waitCtx, st, p.cp, session)
	if final == nil {
		return 1, err
	}
	if err != nil {
		// Show what there is, then fail.
		fmt.Printf("\n%v\n", err)
	}
	code = printOutcome(ctx, p, final, pod, dir, o.keep)
	if o.keep {
		keepRunning(ctx, p.cp, final, dir)
	}
	st.printf("stopping the controller, the %s and the control plane", p.podsName())
	return code, nil
}

// demoDir returns the directory the demo works in, o.dir or a new one,
// and the function that removes it unless the demo is to keep it.
func demoDir(o options) (dir string, remove func(), err error) {
	remove = func() {}
	if dir = o.dir; dir == "" {
		if dir, err = os.MkdirTemp(scratchBase(), "aerie-demo-"); err != nil {
			return "", nil, err
		}
		if !o.keep {
			remove = func() { os.RemoveAll(dir) } //nolint:errcheck // best-effort removal of the demo's directory
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	// Containers run as other users: they must traverse the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		remove()
		return "", nil, err
	}
	return dir, remove, nil
}

// platform is what the session runs on: a local control plane, with the
// controller and the pod runner running against it until stop; or a
// control plane with a real node.
type platform struct {
	cp   *testenv.ControlPlane
	pods podHost
	dsn  string // the session store's

	stopCP func() error       // the control plane's (and the node's)
	stopDB func() error       // the PostgreSQL server's the demo started, or nil
	cancel context.CancelFunc // ends the controller and the pod runner
	wait   []<-chan error     // their ends
}

// podsName names what runs the pods, for the demo's steps.
func (p *platform) podsName() string {
	if _, ok := p.pods.(*testenv.Node); ok {
		return "node"
	}
	return "pod runner"
}

// podHost is where the runner pods run: the local pod runner or a node.
type podHost interface {
	// VolumePath is the local directory of a pod's volume.
	VolumePath(pod *corev1.Pod, volume string) string
}

// startPlatform starts the control plane (with a real node when real),
// creates the namespaces and the database Secret, and starts the controller
// and, without a node, the pod runner. On an error it stops what it started.
func startPlatform(
	ctx context.Context, st stepper, dir, aerie, database string, logger *slog.Logger, real bool,
) (_ *platform, err error) {
	// Everything below stops when runCtx ends, before the control plane.
	runCtx, cancel := context.WithCancel(ctx)
	p := &platform{cancel: cancel}
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	cfg := controllers.DefaultConfig(controllerNamespace, "aerie-runner:demo")
	// The pod runner ignores images and runs command[0] from its Commands.
	cfg.RunnerCommand = "aerie"
	if real {
		if err := p.startNode(ctx, st, database); err != nil {
			return nil, err
		}
		// Imported into the node's containerd, never pulled.
		cfg.RunnerImage, cfg.RunnerCommand = testenv.RunnerImage, controllers.DefaultRunnerCommand
		cfg.ImagePullPolicy = corev1.PullNever
	} else {
		st.printf("starting the local control plane (kube-apiserver and etcd)")
		if p.cp, p.stopCP, err = testenv.NewControlPlane(dir); err != nil {
			return nil, err
		}
		if p.dsn, err = prepareDatabase(dir, database); err != nil {
			return nil, err
		}
	}
	cp := p.cp

	for _, ns := range []string{controllerNamespace, sessionNamespace} {
		if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	if err := cp.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.DatabaseSecret.Name, Namespace: sessionNamespace},
		StringData: map[string]string{cfg.DatabaseSecret.Key: p.dsn},
	}); err != nil {
		return nil, fmt.Errorf("create the database Secret: %w", err)
	}

	if real {
		st.printf("starting the controller")
	} else {
		st.printf("starting the controller and the local pod runner")
	}
	done, err := startController(runCtx, cp, cfg)
	if err != nil {
		return nil, err
	}
	p.wait = append(p.wait, done)
	if !real {
		var runner *testenv.PodRunner
		if runner, done, err = startPodRunner(runCtx, cp, dir, aerie, logger); err != nil {
			return nil, err
		}
		p.pods = runner
		p.wait = append(p.wait, done)
	}
	return p, nil
}

// startNode builds the runner image, starts a control plane with a real
// node, imports the image into the node's containerd and, unless database
// names one, starts the PostgreSQL server of the session store.
func (p *platform) startNode(ctx context.Context, st stepper, database string) error {
	st.printf("building the images from the Dockerfile (hack/images.sh; the first time takes about 10 minutes)")
	archive, err := testenv.BuildRunnerImage()
	if err != nil {
		return err
	}
	st.printf("starting a control plane and a node (scheduler, controller manager, containerd, kubelet)")
	n, stop, err := testenv.NewNode(ctx)
	if err != nil {
		return err
	}
	p.cp, p.pods, p.stopCP = n.ControlPlane, n, stop
	st.printf("importing %s into the node's containerd", testenv.RunnerImage)
	if err := n.ImportImage(ctx, archive); err != nil {
		return err
	}
	if p.dsn = database; p.dsn == "" {
		st.printf("starting PostgreSQL for the session store (the pod reaches it at %s)", testenv.ServiceHost())
		pg, stop, err := testenv.NewPostgres()
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w (install it with `apt-get install postgresql`, or set DATABASE_URL)", err)
		}
		p.dsn, p.stopDB = pg.DSN(), stop
	}
	return nil
}

// stop ends the controller and the pod runner, waits for them, and stops
// the control plane and the node, and the PostgreSQL server.
func (p *platform) stop() {
	p.cancel()
	for _, done := range p.wait {
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		}
	}
	if p.stopCP != nil {
		if err := p.stopCP(); err != nil {
			fmt.Fprintf(os.Stderr, "demo: stop the control plane: %v\n", err)
		}
	}
	if p.stopDB != nil {
		if err := p.stopDB(); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		}
	}
}

// printOutcome shows the session's status, transcript and workspace, and
// on a failure its pod, and returns the demo's exit code: 0 for a
// session that succeeded, the runner's exit code or 1 otherwise.
func printOutcome(
	ctx context.Context, p *platform, final *aeriev1.AgentSession, pod *corev1.Pod, dir string, keep bool,
) int {
	printStatus(final)
	if err := printTranscript(ctx, p.dsn, final); err != nil {
		fmt.Printf("(no transcript: %v)\n", err)
	}
	if pod != nil {
		printWorkspace(p.pods.VolumePath(pod, "workspace"))
	}
	if final.Status.Phase == aeriev1.PhaseSucceeded {
		return 0
	}
	if pod != nil {
		printPod(pod)
	}
	code := 1
	if r := final.Status.Result; r != nil && r.ExitCode != nil && *r.ExitCode != 0 {
		code = int(*r.ExitCode)
	}
	fmt.Printf("\nThe session did not succeed. Logs: %s\n", dir)
	if !keep {
		fmt.Println("(run `make demo KEEP=1` to keep the control plane up and look around)")
	}
	return code
}

// keepRunning tells how to look at the running platform and waits for
// ctx to end (Ctrl-C).
func keepRunning(ctx context.Context, cp *testenv.ControlPlane, final *aeriev1.AgentSession, dir string) {
	fmt.Printf(`
Everything keeps running until Ctrl-C. In another terminal:

  export KUBECONFIG=%s
  alias kubectl=%s
  kubectl get ags -n %s
  kubectl describe ags %s -n %s
  kubectl logs %s -n %s -c agent
  kubectl get configmap -n %s -l aerie.run/layer

Files: %s (the store, the pods' volumes and logs, demo.log)
`, cp.Kubeconfig, cp.KubectlPath, sessionNamespace, final.Name, sessionNamespace,
		final.Status.PodName, sessionNamespace, controllerNamespace, dir)
	<-ctx.Done()
	fmt.Println("\nstopping")
}

// scratchBase is where the demo makes its directory: a short path, since
// under the pod runner's path map the pods' sockets live below it and a
// socket's path is limited to 108 bytes; and not below /tmp, since runner
// pods mount volumes at /tmp, which in a container's mount namespace would
// hide the pod runner's own volume directories.
func scratchBase() string {
	for _, base := range []string{os.Getenv("TMPDIR"), "/var/tmp"} {
		if base == "" || base == "/tmp" || strings.HasPrefix(base, "/tmp/") {
			continue
		}
		if fi, err := os.Stat(base); err == nil && fi.IsDir() {
			return base
		}
	}
	return os.TempDir()
}

// prepareDatabase returns the session store's DSN: dsn itself, or a SQLite
// file in dir. The runner pod's agent container runs as its own user and
// writes the file, its journal and its WAL next to it: the directory is open
// to it.
func prepareDatabase(dir, dsn string) (string, error) {
	if dsn != "" {
		return dsn, nil
	}
	db := filepath.Join(dir, "db")
	if err := os.MkdirAll(db, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(db, 0o1777); err != nil {
		return "", err
	}
	return filepath.Join(db, "sessions.db"), nil
}

// startController runs the controller manager as cmd/aerie-controller
// builds it, without metrics, probes or leader election.
func startController(ctx context.Context, cp *testenv.ControlPlane, cfg controllers.Config) (<-chan error, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("controller configuration: %w", err)
	}
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:  cp.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   controllers.CacheOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	m, err := controllers.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	r := &controllers.AgentSessionReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("aerie-controller"),
		Metrics:  m,
		Config:   cfg,
	}
	opts := controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: ptrTo(true)}
	if err := r.SetupWithManager(mgr, opts); err != nil {
		return nil, fmt.Errorf("set up the AgentSession controller: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		if err := mgr.Start(ctx); err != nil {
			done <- fmt.Errorf("controller: %w", err)
			return
		}
		done <- nil
	}()
	return done, nil
}

func ptrTo[T any](v T) *T { return &v }

// startPodRunner runs the local pod runner with the aerie binary as the
// runner pods' "aerie" command, and returns once its Node is ready.
func startPodRunner(
	ctx context.Context, cp *testenv.ControlPlane, dir, aerie string, logger *slog.Logger,
) (*testenv.PodRunner, <-chan error, error) {
	r, err := testenv.NewPodRunner(cp.Config, testenv.PodRunnerOptions{
		Dir:      filepath.Join(dir, "r"),
		Commands: map[string]string{"aerie": aerie},
		Logger:   logger,
	})
	if err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() {
		if err := r.Run(ctx); err != nil {
			done <- fmt.Errorf("pod runner: %w", err)
			return
		}
		done <- nil
	}()
	select {
	case <-r.Ready():
		return r, done, nil
	case err := <-done:
		if err == nil {
			err = ctx.Err()
		}
		done <- nil
		return nil, done, fmt.Errorf("start the pod runner: %w", err)
	case <-time.After(time.Minute):
		return nil, done, errors.New("start the pod runner: not ready within a minute")
	}
}

// applyLayer packs dir with `aerie layer pack` and creates the ConfigMap
// as a platform layer.
func applyLayer(ctx context.Context, cp *testenv.ControlPlane, aerie, dir string) error {
	out, err := exec.CommandContext(ctx, aerie,
		"layer", "pack", dir, "--name", platformLayer, "-n", controllerNamespace).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("aerie layer pack %s: %w: %s", dir, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return fmt.Errorf("aerie layer pack %s: %w", dir, err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(out, &cm); err != nil {
		return fmt.Errorf("read the packed layer: %w", err)
	}
	if err := cp.Client.Create(ctx, &cm); err != nil {
		return fmt.Errorf("create the platform layer: %w", err)
	}
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("          %s\n", strings.ReplaceAll(k, "__", "/"))
	}
	return nil
}

// sessionManifest reads the AgentSession; with an API key in the
// environment it switches the session to that provider, with a Secret for
// the key.
func sessionManifest(
	ctx context.Context, cp *testenv.ControlPlane, path string,
) (*aeriev1.AgentSession, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read the AgentSession: %w", err)
	}
	var s aeriev1.AgentSession
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	s.Namespace = sessionNamespace
	var provider aeriev1.ModelProvider
	var key, model string
	switch {
	case os.Getenv("ANTHROPIC_API_KEY") != "":
		provider, key, model = aeriev1.ProviderAnthropic, os.Getenv("ANTHROPIC_API_KEY"), "claude-sonnet-4-5"
	case os.Getenv("OPENAI_API_KEY") != "":
		provider, key, model = aeriev1.ProviderOpenAI, os.Getenv("OPENAI_API_KEY"), "gpt-5"
	}
	if provider != "" {
		if m := os.Getenv("AERIE_DEMO_MODEL"); m != "" {
			model = m
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "model-credentials", Namespace: sessionNamespace},
			StringData: map[string]string{"api-key": key},
		}
		if err := cp.Client.Create(ctx, secret); err != nil {
			return nil, "", fmt.Errorf("create the API key Secret: %w", err)
		}
		s.Spec.Model = aeriev1.ModelSpec{
			Provider:        provider,
			Name:            model,
			APIKeySecretRef: &aeriev1.KeyReference{Name: secret.Name, Key: "api-key"},
		}
	}
	return &s, string(s.Spec.Model.Provider) + "/" + s.Spec.Model.Name, nil
}

// follow prints the session's phase changes, the events of the session
// and its pods, and the agent's own events from its log, until the session
// finishes. It returns the finished session and the last state seen of its
// runner pod (whose volumes outlive it on the pod runner).
func follow(
	ctx context.Context, st stepper, cp *testenv.ControlPlane, s *aeriev1.AgentSession,
) (*aeriev1.AgentSession, *corev1.Pod, error) {
	var (
		phase    aeriev1.AgentSessionPhase
		pods     = map[string]*corev1.Pod{}
		seen     = map[string]bool{}
		streamed = map[string]chan struct{}{}
	)
	defer func() {
		// A log ends with its container; give the last ones a moment to
		// drain.
		deadline := time.After(5 * time.Second)
		for _, done := range streamed {
			select {
			case <-done:
			case <-deadline:
				return
			}
		}
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last *aeriev1.AgentSession
	for {
		var cur aeriev1.AgentSession
		if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, &cur); err != nil {
			if ctx.Err() != nil && last != nil {
				return last, pods[last.Status.PodName],
					fmt.Errorf("the session did not finish in time (phase %s): %w", phase, ctx.Err())
			}
			return nil, nil, fmt.Errorf("get the AgentSession: %w", err)
		}
		last = &cur
		printEvents(ctx, st, cp, seen)
		if cur.Status.Phase != phase {
			phase = cur.Status.Phase
			st.printf("phase %s", phase)
		}
		if name := cur.Status.PodName; name != "" {
			var p corev1.Pod
			err := cp.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &p)
			switch {
			case err == nil:
				pods[name] = &p
			case !apierrors.IsNotFound(err):
				return nil, nil, fmt.Errorf("get the runner pod: %w", err)
			}
			if p := pods[name]; p != nil && streamed[name] == nil && agentStarted(p) {
				done := make(chan struct{})
				streamed[name] = done
				go func() {
					defer close(done)
					streamAgentLog(ctx, cp, p)
				}()
			}
		}
		if phase.Finished() {
			printEvents(ctx, st, cp, seen)
			return &cur, pods[cur.Status.PodName], nil
		}
		select {
		case <-ctx.Done():
			return &cur, pods[cur.Status.PodName],
				fmt.Errorf("the session did not finish in time (phase %s): %w", phase, ctx.Err())
		case <-tick.C:
		}
	}
}

// agentStarted reports whether the pod's agent container has started, so
// that its log can be followed.
func agentStarted(p *corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == controllers.ContainerAgent && (c.State.Running != nil || c.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// printPod prints the containers' states of a runner pod that did not
// succeed: what the pod runner saw of them.
func printPod(p *corev1.Pod) {
	fmt.Printf("\n── Runner pod %s/%s: %s %s\n", p.Namespace, p.Name, p.Status.Phase, p.Status.Message)
	for _, c := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		switch st := c.State; {
		case st.Terminated != nil:
			fmt.Printf("%-10s terminated: exit %d, %s: %s\n",
				c.Name, st.Terminated.ExitCode, st.Terminated.Reason, preview(st.Terminated.Message, 600))
		case st.Running != nil:
			fmt.Printf("%-10s running\n", c.Name)
		case st.Waiting != nil:
			fmt.Printf("%-10s waiting: %s: %s\n", c.Name, st.Waiting.Reason, preview(st.Waiting.Message, 600))
		}
	}
}

// printEvents prints the Kubernetes events of the session's namespace not
// printed yet: the controller's and the pod runner's.
func printEvents(ctx context.Context, st stepper, cp *testenv.ControlPlane, seen map[string]bool) {
	var list corev1.EventList
	if err := cp.Client.List(ctx, &list); err != nil {
		return
	}
	sort.Slice(list.Items, func(i, j int) bool { return eventTime(list.Items[i]).Before(eventTime(list.Items[j])) })
	for _, e := range list.Items {
		if e.Namespace != sessionNamespace && e.InvolvedObject.Namespace != sessionNamespace {
			continue
		}
		// By what it says: a repeated event is news only once.
		line := fmt.Sprintf("event %s/%s: %s: %s",
			strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, e.Reason, e.Message)
		if seen[line] {
			continue
		}
		seen[line] = true
		st.printf("%s", line)
	}
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// streamAgentLog follows the agent container's log with kubectl, through
// the pod runner's kubelet endpoint, and prints its JSON Lines events for
// people.
func streamAgentLog(ctx context.Context, cp *testenv.ControlPlane, pod *corev1.Pod) {
	cmd := exec.CommandContext(ctx, cp.KubectlPath, "--kubeconfig", cp.Kubeconfig,
		"logs", "--follow", pod.Name, "-n", pod.Namespace, "-c", controllers.ContainerAgent)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var e events.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type == "" {
			continue // the runner's own log lines go to standard error
		}
		if line := describeEvent(e); line != "" {
			fmt.Printf("          │ %s\n", line)
		}
	}
	_ = cmd.Wait()
}

// describeEvent is one line for an agent event, or "" for the events not
// worth a line.
func describeEvent(e events.Event) string {
	switch e.Type {
	case events.SessionStart:
		return fmt.Sprintf("session %s started · %s/%s", e.Session, e.Provider, e.Model)
	case events.AssistantMessage:
		return "assistant: " + preview(e.Text, 200)
	case events.ToolCall:
		return fmt.Sprintf("▸ %s %s", e.Tool, preview(e.Arguments, 120))
	case events.ToolResult:
		mark := "✓"
		if e.IsError {
			mark = "✗"
		}
		return fmt.Sprintf("  %s %s (%s) %s", mark, e.Tool, e.Duration.Round(time.Millisecond), preview(e.Text, 120))
	case events.Hook:
		return strings.TrimSpace(fmt.Sprintf("  hook %s %s", e.Status, preview(e.Reason, 120)))
	case events.Warning:
		return "! " + e.Reason
	case events.SessionEnd:
		return fmt.Sprintf("session ended: %s after %d turns", e.Outcome, e.Turn)
	}
	return ""
}

func preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func printStatus(s *aeriev1.AgentSession) {
	fmt.Printf("\n── Status of AgentSession %s/%s\n", s.Namespace, s.Name)
	fmt.Printf("phase:      %s\n", s.Status.Phase)
	if r := s.Status.Result; r != nil {
		fmt.Printf("outcome:    %s", r.Outcome)
		if r.ExitCode != nil {
			fmt.Printf(" (exit code %d)", *r.ExitCode)
		}
		fmt.Println()
		if r.Message != "" {
			fmt.Printf("message:    %s\n", r.Message)
		}
		if r.Summary != "" {
			fmt.Printf("summary:    %s\n", preview(r.Summary, 400))
		}
	}
	if u := s.Status.Usage; u != nil {
		fmt.Printf("usage:      %d turns, %d tool calls, %d tokens (%d in, %d out, %d cache reads)\n",
			u.Turns, u.ToolCalls, u.TotalTokens, u.InputTokens, u.OutputTokens, u.CacheReadTokens)
	}
	fmt.Printf("session id: %s, pod %s, %d attempt(s)\n", s.Status.SessionID, s.Status.PodName, s.Status.Attempts)
	for _, c := range s.Status.Conditions {
		fmt.Printf("condition:  %s=%s %s %s\n", c.Type, c.Status, c.Reason, preview(c.Message, 160))
	}
}

// printTranscript prints the session's journal as the store holds it.
func printTranscript(ctx context.Context, dsn string, s *aeriev1.AgentSession) error {
	id, err := uuid.Parse(s.Status.SessionID)
	if err != nil {
		return fmt.Errorf("status.sessionID %q: %w", s.Status.SessionID, err)
	}
	st, err := dburl.Open(ctx, dsn)
	if err != nil {
		return fmt.Errorf("open the session store: %w", err)
	}
	defer st.Close() //nolint:errcheck // read-only
	entries, err := st.Entries(ctx, s.Namespace, id)
	if err != nil {
		return fmt.Errorf("read the session's entries: %w", err)
	}
	fmt.Printf("\n── Transcript (%d entries in the session store)\n", len(entries))
	for _, e := range entries {
		switch p := e.Payload.(type) {
		case transcript.UserMessage:
			fmt.Printf("%4d user:      %s\n", e.Seq, preview(blocksText(p.Content), 300))
		case transcript.AssistantMessage:
			if t := blocksText(p.Content); t != "" {
				fmt.Printf("%4d assistant: %s\n", e.Seq, preview(t, 300))
			}
			for _, b := range p.Content {
				if b.Type == "tool_use" {
					fmt.Printf("%4d   call %s %s\n", e.Seq, b.Name, preview(string(b.Input), 200))
				}
			}
		case transcript.ToolResult:
			mark := "result"
			if p.IsError {
				mark = "error "
			}
			fmt.Printf("%4d   %s %s\n", e.Seq, mark, preview(blocksText(p.Content), 200))
		}
	}
	return nil
}

func blocksText(bs []transcript.Block) string {
	var parts []string
	for _, b := range bs {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, " ")
}

// printWorkspace lists the files the session left in its workspace volume,
// with the content of the small ones.
func printWorkspace(dir string) {
	fmt.Printf("\n── Workspace (%s)\n", dir)
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		fmt.Printf("%s (%d bytes)\n", rel, info.Size())
		if info.Size() <= 2048 {
			if data, err := os.ReadFile(p); err == nil {
				for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
					fmt.Printf("    %s\n", line)
				}
			}
		}
		return nil
	})
	if err != nil {
		fmt.Printf("(cannot read the workspace: %v)\n", err)
	} else if n == 0 {
		fmt.Println("(empty)")
	}
}
