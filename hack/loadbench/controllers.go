package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/controllers"
)

// runnerImage is the image of every pod: no kubelet runs them, so it is
// never pulled.
const runnerImage = "ghcr.io/aerie-run/aerie-runner:bench"

// platformNamespace is the aerie controller's own namespace.
const platformNamespace = "aerie-system"

// modelSecret holds the sessions' model API key.
const modelSecret = "model-credentials"

// controller is a controller manager under test: a process started
// against the control plane, and the kind of object it turns into pods.
type controller struct {
	// name is the run's name in the benchmark format, with its settings
	// as sub-benchmark keys.
	name string
	// about says which settings the run used, for the report.
	about string
	// command is the controller's command line for the kubeconfig.
	command func(kubeconfig string) []string
	// env is added to the process's environment.
	env func(kubeconfig string) []string
	// prepare creates what the controller needs in a namespace before
	// objects are created there.
	prepare func(ctx context.Context, c client.Client, ns string) error
	kind    kind
	// pprofFlag is the controller's flag that takes an address to serve
	// Go's pprof endpoints on; empty when it has none.
	pprofFlag string
}

// aerieController runs cmd/aerie-controller as it is deployed: its default
// flags (MaxConcurrentReconciles, log level; the client has no client-side
// rate limit, as ctrl.GetConfig leaves it), with no metrics or probe
// listeners and no leader election.
func aerieController(bin string, extra []string) controller {
	return controller{
		name: "CreateToPod/controller=aerie/client-qps=unlimited",
		about: fmt.Sprintf("aerie-controller: --max-concurrent-reconciles at its default (%d in this source tree), "+
			"client QPS unlimited (ctrl.GetConfig's -1), no leader election; extra flags %q",
			controllers.DefaultMaxConcurrentReconciles, extra),
		command: func(string) []string {
			return append([]string{bin,
				"--namespace=" + platformNamespace,
				"--runner-image=" + runnerImage,
				"--metrics-bind-address=0",
				"--health-probe-bind-address=0",
			}, extra...)
		},
		env:       func(kubeconfig string) []string { return []string{"KUBECONFIG=" + kubeconfig} },
		pprofFlag: "--pprof-bind-address",
		prepare: func(ctx context.Context, c client.Client, ns string) error {
			for _, s := range []*corev1.Secret{
				{
					ObjectMeta: metav1.ObjectMeta{Name: controllers.DefaultDatabaseSecret, Namespace: ns},
					StringData: map[string]string{controllers.DefaultDatabaseKey: "postgres://aerie@db/aerie"},
				},
				{
					ObjectMeta: metav1.ObjectMeta{Name: modelSecret, Namespace: ns},
					StringData: map[string]string{"api-key": "sk-bench"},
				},
			} {
				if err := c.Create(ctx, s); err != nil {
					return fmt.Errorf("create Secret %s/%s: %w", ns, s.Name, err)
				}
			}
			return nil
		},
		kind: kind{
			name:   "AgentSession",
			object: session,
			list:   func() client.ObjectList { return &aeriev1alpha1.AgentSessionList{} },
		},
	}
}

// session is the i-th AgentSession of a run: a prompt and a model, as a
// user would write it.
func session(ns string, i int) client.Object {
	return &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("session-%03d", i), Namespace: ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Fix the failing tests.",
			Model: aeriev1alpha1.ModelSpec{
				Provider:        aeriev1alpha1.ProviderAnthropic,
				Name:            "claude-sonnet-4-5",
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: modelSecret, Key: "api-key"},
			},
		},
	}
}

// jobController runs kube-controller-manager with only its Job controller,
// at its default --concurrent-job-syncs (5), with the client rate limit
// given: qps <= 0 is unlimited (a QPS below zero turns client-go's limiter
// off, as ctrl.GetConfig does for aerie).
func jobController(bin string, qps float64, burst int, extra []string) controller {
	rate := "unlimited"
	if qps > 0 {
		rate = strconv.FormatFloat(qps, 'f', -1, 64)
	}
	return controller{
		name: "CreateToPod/controller=job/client-qps=" + rate,
		about: fmt.Sprintf("kube-controller-manager --controllers=job-controller: --concurrent-job-syncs default (5), "+
			"--kube-api-qps=%s --kube-api-burst=%d (defaults 20 and 30); extra flags %q",
			rate, burst, extra),
		command: func(kubeconfig string) []string {
			q := "-1"
			if qps > 0 {
				q = strconv.FormatFloat(qps, 'f', -1, 64)
			}
			return append([]string{bin,
				"--kubeconfig=" + kubeconfig,
				"--controllers=job-controller",
				"--leader-elect=false",
				"--use-service-account-credentials=false",
				"--secure-port=0",
				"--kube-api-qps=" + q,
				"--kube-api-burst=" + strconv.Itoa(burst),
			}, extra...)
		},
		env:     func(string) []string { return nil },
		prepare: func(context.Context, client.Client, string) error { return nil },
		kind: kind{
			name:   "Job",
			object: job,
			list:   func() client.ObjectList { return &batchv1.JobList{} },
		},
	}
}

// job is the i-th Job of a run: one pod running the runner's command once.
func job(ns string, i int) client.Object {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%03d", i), Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name:    "agent",
					Image:   runnerImage,
					Command: []string{"/aerie", "runner"},
				}},
			}},
		},
	}
}

// process is a running controller manager.
type process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start runs the controller's command with its output in logPath, and
// with its pprof endpoints on pprofAddr when that is not empty.
func start(ctl controller, kubeconfig, logPath, pprofAddr string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create controller log: %w", err)
	}
	argv := ctl.command(kubeconfig)
	if pprofAddr != "" {
		argv = append(argv, ctl.pprofFlag+"="+pprofAddr)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), ctl.env(kubeconfig)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	p := &process{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close() //nolint:errcheck // the controller wrote the log, through its own descriptor
		close(p.done)
	}()
	return p, nil
}

// stop ends the process: SIGTERM, then SIGKILL after a grace period.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited describes how the process ended, with the tail of its log.
func (p *process) exited() error {
	tail, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(tail)), "\n")
	lines = lines[max(0, len(lines)-20):]
	return fmt.Errorf("%s exited (%v); the end of its log %s:\n%s", p.cmd.Path, p.err, p.log, strings.Join(lines, "\n"))
}

// warmUp creates one object in ns and waits for its pod, so that the
// measured run starts with the controller's caches synced and its
// connections open.
func warmUp(ctx context.Context, c client.Client, ctl controller, p *process, ns string, timeout time.Duration) error {
	obj := ctl.kind.object(ns, 0)
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("create the warm-up %s: %w", ctl.kind.name, err)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list the warm-up pods: %w", err)
		}
		for i := range pods.Items {
			if metav1.IsControlledBy(&pods.Items[i], obj) {
				return nil
			}
		}
		select {
		case <-p.done:
			return p.exited()
		case <-deadline.C:
			return fmt.Errorf("the warm-up %s got no pod within %s: see the controller's log %s", ctl.kind.name, timeout, p.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
