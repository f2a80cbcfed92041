// Command aerie-controller runs the aerie controller manager: it watches AgentSessions and
// runs each one in a runner pod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/go-logr/logr"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/controllers"
)

// Set by the build (-ldflags "-X main.version=... -X main.commit=...").
var (
	version = "dev"
	commit  = "unknown"
)

type options struct {
	metricsAddr  string
	probeAddr    string
	pprofAddr    string
	leaderElect  bool
	leaderElecNS string
	logLevel     slog.Level
	concurrency  int
	controller   controllers.Config
}

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the metrics endpoint binds to; 0 disables it.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address Go's pprof endpoints (/debug/pprof/) bind to, for profiling; 0 disables them.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles at a time.")
	flag.StringVar(&o.leaderElecNS, "leader-election-namespace", "", "Namespace of the leader-election lease; defaults to the controller's namespace.")
	flag.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "Log level: DEBUG, INFO, WARN or ERROR.")
	flag.IntVar(&o.concurrency, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles, "AgentSessions reconciled in parallel.")
	c := controllers.DefaultConfig(os.Getenv("POD_NAMESPACE"), "")
	flag.StringVar(&c.Namespace, "namespace", c.Namespace, "The controller's namespace, where platform layers (ConfigMaps labelled aerie.run/layer) live; defaults to $POD_NAMESPACE.")
	flag.StringVar(&c.RunnerImage, "runner-image", "", "Image of the runner pods' agent and workspace containers (required).")
	flag.StringVar((*string)(&c.ImagePullPolicy), "runner-image-pull-policy", "", "Pull policy of the runner image: Always, IfNotPresent or Never; empty is Kubernetes' default.")
	flag.StringVar(&c.RunnerCommand, "runner-command", c.RunnerCommand, "Path of the aerie binary in the runner image.")
	flag.StringVar(&c.GitImage, "git-image", c.GitImage, "Image with sh and git that clones git workspaces.")
	flag.StringVar(&c.DatabaseSecret.Name, "database-secret", c.DatabaseSecret.Name, "Secret, in each session's namespace, holding the session store's DSN; only the agent container gets it.")
	flag.StringVar(&c.DatabaseSecret.Key, "database-secret-key", c.DatabaseSecret.Key, "Key of the DSN in --database-secret.")
	flag.Int64Var(&c.AgentUser, "agent-uid", c.AgentUser, "UID (and GID) of the agent container, which holds the secrets.")
	flag.Int64Var(&c.WorkspaceUser, "workspace-uid", c.WorkspaceUser, "UID (and GID) of the workspace container, where tools run.")
	flag.Int64Var(&c.FSGroup, "fs-group", c.FSGroup, "Group shared by both containers: it owns the executor socket's directory.")
	flag.DurationVar(&c.TerminationGrace, "termination-grace", c.TerminationGrace, "Runner pods' termination grace period: time to tear tools down and drain the journal.")
	flag.Parse()
	o.controller = c

	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: o.logLevel}))
	ctrl.SetLogger(logr.FromSlogHandler(logger.Handler()))

	if err := run(ctrl.SetupSignalHandler(), o, logger); err != nil {
		logger.Error("controller stopped", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, logger *slog.Logger) error {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	if err := aeriev1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "aerie-controller.aerie.run",
		LeaderElectionNamespace: o.leaderElecNS,
		// The manager exits right after losing the lease, so a new leader never overlaps
		// with this one's reconciles for long.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         controllers.CacheOptions(),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	m, err := controllers.NewMetrics(metrics.Registry)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	r := &controllers.AgentSessionReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("aerie-controller"),
		Metrics:  m,
		Config:   o.controller,
	}
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: o.concurrency}); err != nil {
		return fmt.Errorf("set up the AgentSession controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	// Ready once the caches have synced: before that the controller
	// would act on an empty view of the cluster.
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("caches not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("add readiness check: %w", err)
	}

	logger.Info("starting aerie controller", "version", version, "commit", commit,
		"namespace", o.controller.Namespace, "runnerImage", o.controller.RunnerImage)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}
