// Command aerie-controller runs the aerie controller manager: it watches AgentSessions and
// runs each one in a runner pod.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
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
	metricsAddr     string
	metricsSecure   bool
	metricsCertPath string
	metricsCertName string
	metricsCertKey  string
	enableHTTP2     bool
	probeAddr       string
	pprofAddr       string
	leaderElect     bool
	leaderElecNS    string
	logLevel        slog.Level
	concurrency     int
	controller      controllers.Config
}

func main() {
	o := bindFlags(flag.CommandLine)
	flag.Parse()

	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: o.logLevel}))
	ctrl.SetLogger(logr.FromSlogHandler(logger.Handler()))

	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfig, *o, logger); err != nil {
		logger.Error("controller stopped", "error", err)
		os.Exit(1)
	}
}

// bindFlags defines the controller's flags in fs; the options hold their values once fs is
// parsed.
func bindFlags(fs *flag.FlagSet) *options {
	o := &options{controller: controllers.DefaultConfig(os.Getenv("POD_NAMESPACE"), "")}
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the metrics endpoint binds to; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve the metrics over HTTPS, to clients whose token the API server authenticates and authorizes "+
			"for GET /metrics; false serves plain HTTP to anyone.")
	fs.StringVar(&o.metricsCertPath, "metrics-cert-path", "",
		"Directory holding the metrics endpoint's certificate and key, reloaded when they change; "+
			"empty generates a self-signed certificate at start.")
	fs.StringVar(&o.metricsCertName, "metrics-cert-name", "tls.crt",
		"File name of the metrics certificate in --metrics-cert-path.")
	fs.StringVar(&o.metricsCertKey, "metrics-cert-key", "tls.key",
		"File name of the metrics certificate's key in --metrics-cert-path.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Offer HTTP/2 on the metrics endpoint; off by default for HTTP/2's stream-reset attacks "+
			"(CVE-2023-44487, CVE-2023-39325).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0",
		"Address Go's pprof endpoints (/debug/pprof/) bind to, for profiling; 0 disables them.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElecNS, "leader-election-namespace", "",
		"Namespace of the leader-election lease; defaults to the controller's namespace.")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "Log level: DEBUG, INFO, WARN or ERROR.")
	fs.IntVar(&o.concurrency, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles,
		"AgentSessions reconciled in parallel.")
	c := &o.controller
	fs.StringVar(&c.Namespace, "namespace", c.Namespace,
		"The controller's namespace, where platform layers (ConfigMaps labelled aerie.run/layer) live; "+
			"defaults to $POD_NAMESPACE.")
	fs.StringVar(&c.RunnerImage, "runner-image", "",
		"Image of the runner pods' agent and workspace containers (required).")
	fs.StringVar((*string)(&c.ImagePullPolicy), "runner-image-pull-policy", "",
		"Pull policy of the runner image: Always, IfNotPresent or Never; empty is Kubernetes' default.")
	fs.StringVar(&c.RunnerCommand, "runner-command", c.RunnerCommand, "Path of the aerie binary in the runner image.")
	fs.StringVar(&c.GitImage, "git-image", c.GitImage,
		"Image with sh and git that clones git workspaces (default: the runner image).")
	fs.StringVar(&c.DatabaseSecret.Name, "database-secret", c.DatabaseSecret.Name,
		"Secret, in each session's namespace, holding the session store's DSN; only the agent container gets it.")
	fs.StringVar(&c.DatabaseSecret.Key, "database-secret-key", c.DatabaseSecret.Key,
		"Key of the DSN in --database-secret.")
	fs.Int64Var(&c.AgentUser, "agent-uid", c.AgentUser, "UID (and GID) of the agent container, which holds the secrets.")
	fs.Int64Var(&c.WorkspaceUser, "workspace-uid", c.WorkspaceUser,
		"UID (and GID) of the workspace container, where tools run.")
	fs.Int64Var(&c.FSGroup, "fs-group", c.FSGroup,
		"Group shared by both containers: it owns the executor socket's directory.")
	fs.DurationVar(&c.TerminationGrace, "termination-grace", c.TerminationGrace,
		"Runner pods' termination grace period: time to tear tools down and drain the journal.")
	return o
}

// run runs the controller manager until ctx ends, with the cluster configuration that
// kubeconfig loads.
func run(ctx context.Context, kubeconfig func() (*rest.Config, error), o options, logger *slog.Logger) error {
	metricsOpts, err := metricsServer(o)
	if err != nil {
		return err
	}
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	if err := aeriev1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}

	cfg, err := kubeconfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
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
		"namespace", o.controller.Namespace, "runnerImage", o.controller.RunnerImage,
		"metricsBindAddress", o.metricsAddr, "metricsSecure", o.metricsSecure)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// metricsServer configures the metrics endpoint. Served securely, it speaks HTTPS and
// answers only requests whose bearer token the API server authenticates (a TokenReview) and
// authorizes for GET on the path (a SubjectAccessReview): the controller's ServiceAccount
// needs the rules of config/rbac/metrics_auth_role.yaml, a scraper those of
// metrics_reader_role.yaml.
func metricsServer(o options) (metricsserver.Options, error) {
	m := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if !o.metricsSecure {
		if o.metricsCertPath != "" {
			return m, errors.New("--metrics-cert-path needs --metrics-secure: plain HTTP takes no certificate")
		}
		return m, nil
	}
	m.FilterProvider = filters.WithAuthenticationAndAuthorization
	if !o.enableHTTP2 {
		m.TLSOpts = append(m.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	if o.metricsCertPath != "" {
		// controller-runtime serves a self-signed certificate when it finds no files; a
		// mistyped path must stop the controller instead.
		for _, name := range []string{o.metricsCertName, o.metricsCertKey} {
			if _, err := os.Stat(filepath.Join(o.metricsCertPath, name)); err != nil {
				return m, fmt.Errorf("metrics certificate: %w", err)
			}
		}
		m.CertDir, m.CertName, m.KeyName = o.metricsCertPath, o.metricsCertName, o.metricsCertKey
	}
	return m, nil
}
