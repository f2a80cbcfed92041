// Command loadbench measures how fast a controller turns objects created at
// once into pods: the aerie controller with AgentSessions against
// kube-controller-manager's Job controller with Jobs, each on a fresh
// envtest control plane of the same Kubernetes release.
//
// Per object it measures the time from its creation (the earlier of the
// create call returning and the object's ADDED watch event) to its pod's
// ADDED watch event, and reports p50, p99 and max of those latencies, and
// the pods per second (objects over the time from the first create to the
// last pod). No kubelet runs: only the pods' creation is measured.
//
// Results are printed in the Go benchmark format, so benchstat compares
// them (`benchstat -col /controller out.txt`), then as a table. Run it with
// `make bench-controller`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aerie-run/aerie/hack/testenv"
)

// options are the command's flags.
type options struct {
	aerieBin, kcmBin string
	// aerieFlags and kcmFlags are added to the controllers' command
	// lines, for experiments.
	aerieFlags, kcmFlags string
	controllers          string
	runs                 int
	load                 load
	keep                 bool
	// profile, when positive, takes CPU profiles of the API server and
	// of the controller (when it serves pprof) for that long from the
	// first create of each run, into the work directory.
	profile time.Duration
}

func main() {
	o := options{}
	flag.StringVar(&o.aerieBin, "aerie-controller", "bin/aerie-controller",
		"The aerie-controller binary to measure (`make build` builds it).")
	flag.StringVar(&o.kcmBin, "kube-controller-manager", "",
		"The kube-controller-manager binary; "+
			"default: the one `AERIE_ENVTEST_EXTRA=kube-controller-manager hack/envtest.sh` built.")
	flag.StringVar(&o.aerieFlags, "aerie-flags", "",
		"Flags added to aerie-controller's command line, space-separated "+
			"(for experiments: the defaults are what is measured).")
	flag.StringVar(&o.kcmFlags, "kcm-flags", "", "Flags added to kube-controller-manager's command line, space-separated.")
	flag.StringVar(&o.controllers, "controllers", "aerie,job,job-unlimited",
		"Runs to make, in this order each round: aerie, job (kube-controller-manager's default client rate limit), "+
			"job-unlimited (no client rate limit, as aerie).")
	flag.IntVar(&o.runs, "runs", 3, "Rounds: each controller is measured this many times, the controllers taking turns.")
	flag.IntVar(&o.load.objects, "objects", 300, "Objects (AgentSessions or Jobs) created at once per run.")
	flag.IntVar(&o.load.clients, "clients", 16,
		"Goroutines creating them, sharing one client without client-side rate limit.")
	flag.DurationVar(&o.load.timeout, "timeout", 5*time.Minute, "How long a run may wait for its last pod.")
	flag.BoolVar(&o.keep, "keep", false,
		"Keep the work directory (control plane data, controllers' logs) after a successful run; "+
			"it is always kept after a failure.")
	flag.DurationVar(&o.profile, "profile", 0,
		"Take CPU profiles of the API server and of aerie-controller this long from the first create of each run, "+
			"into the run's work directory (`go tool pprof` reads them); implies -keep.")
	flag.Parse()
	o.keep = o.keep || o.profile > 0

	// controller-runtime's own messages (the control plane's start and
	// stop); warnings and errors only.
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "loadbench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	ctls, err := selectControllers(o)
	if err != nil {
		return err
	}
	if o.runs < 1 || o.load.objects < 1 || o.load.clients < 1 {
		return fmt.Errorf("-runs %d, -objects %d, -clients %d: each must be at least 1",
			o.runs, o.load.objects, o.load.clients)
	}
	work, err := os.MkdirTemp("", "aerie-loadbench-")
	if err != nil {
		return fmt.Errorf("create work directory: %w", err)
	}
	failed := true
	defer func() {
		if failed || o.keep {
			// The run is over: a failed write has nobody left to tell.
			_, _ = fmt.Fprintf(stderr, "loadbench: the work directory (controllers' logs) is %s\n", work)
			return
		}
		_ = os.RemoveAll(work)
	}()

	header := fmt.Sprintf("goos: %s\ngoarch: %s\npkg: github.com/aerie-run/aerie/hack/loadbench\n",
		runtime.GOOS, runtime.GOARCH)
	header += fmt.Sprintf("kubernetes: %s\nobjects: %d\nclients: %d\n",
		testenv.KubernetesVersion, o.load.objects, o.load.clients)
	for _, ctl := range ctls {
		header += fmt.Sprintf("# %s: %s\n", ctl.name, ctl.about)
	}
	if _, err := io.WriteString(stdout, header); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	results := map[string][]summary{}
	var order []string
	for round := 1; round <= o.runs; round++ {
		for _, ctl := range ctls {
			if round == 1 {
				order = append(order, ctl.name)
			}
			dir := filepath.Join(work, fmt.Sprintf("%d-%s", round, shortName(ctl.name)))
			if _, err := fmt.Fprintf(stderr, "loadbench: round %d of %d: %s\n", round, o.runs, ctl.name); err != nil {
				return fmt.Errorf("write progress: %w", err)
			}
			s, load, err := runOnce(ctx, ctl, o.load, dir, o.profile)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, ctl.name, err)
			}
			results[ctl.name] = append(results[ctl.name], s)
			_, err = fmt.Fprintf(stdout, "# round %d: load average before %s, after %s; creates took %s, "+
				"the last pod came after %s; API requests until then: %s\n%s\n",
				round, load[0], load[1], s.Creating.Round(time.Millisecond), s.Span.Round(time.Millisecond), s.Requests,
				s.benchLine("Benchmark"+ctl.name))
			if err != nil {
				return fmt.Errorf("write results: %w", err)
			}
		}
	}
	if _, err := io.WriteString(stdout, "\n"+table(order, results)); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	failed = false
	return nil
}

// selectControllers resolves the -controllers list and the binaries it
// needs; a missing binary is reported with the way to build it.
func selectControllers(o options) ([]controller, error) {
	var out []controller
	for _, name := range strings.Split(o.controllers, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "aerie":
			bin, err := exists(o.aerieBin, "build it with `make build` or `go build -o bin/ ./cmd/aerie-controller`")
			if err != nil {
				return nil, err
			}
			out = append(out, aerieController(bin, strings.Fields(o.aerieFlags)))
		case "job", "job-unlimited":
			bin := o.kcmBin
			if bin == "" {
				var err error
				if bin, err = testenv.EnvtestBinary("kube-controller-manager"); err != nil {
					return nil, err
				}
			} else if _, err := exists(bin,
				"build it with `AERIE_ENVTEST_EXTRA=kube-controller-manager hack/envtest.sh`"); err != nil {
				return nil, err
			}
			if name == "job" {
				// kube-controller-manager's defaults, written out.
				out = append(out, jobController(bin, 20, 30, strings.Fields(o.kcmFlags)))
			} else {
				out = append(out, jobController(bin, -1, 0, strings.Fields(o.kcmFlags)))
			}
		default:
			return nil, fmt.Errorf("-controllers: unknown controller %q; want aerie, job or job-unlimited", name)
		}
	}
	return out, nil
}

// exists returns path made absolute, or an error with how to provide it.
func exists(path, how string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	if fi, err := os.Stat(abs); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file: %s", abs, how)
	}
	return abs, nil
}

// shortName makes a run's name fit a directory name.
func shortName(name string) string {
	return strings.NewReplacer("CreateToPod/", "", "/", "-", "=", "-").Replace(name)
}

// runOnce measures one controller on a control plane of its own, so that
// every run starts from the same empty etcd and no other controller's
// watches: the API server's settings are envtest's in every run. It returns
// the load average before and after the measured burst.
func runOnce(
	ctx context.Context, ctl controller, l load, dir string, profile time.Duration,
) (summary, [2]string, error) {
	var load [2]string
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return summary{}, load, err
	}
	cp, stopPlane, err := testenv.NewControlPlane(dir)
	if err != nil {
		return summary{}, load, err
	}
	defer func() {
		if err := stopPlane(); err != nil {
			fmt.Fprintf(os.Stderr, "loadbench: stop the control plane: %v\n", err)
		}
	}()

	// The load's client: no client-side rate limit, for either kind.
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		return summary{}, load, fmt.Errorf("create client: %w", err)
	}
	const benchNS, warmNS = "bench", "warm-up"
	for _, ns := range []string{benchNS, warmNS, platformNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return summary{}, load, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	for _, ns := range []string{benchNS, warmNS} {
		if err := ctl.prepare(ctx, c, ns); err != nil {
			return summary{}, load, err
		}
	}

	var pprofAddr string
	if profile > 0 && ctl.pprofFlag != "" {
		if pprofAddr, err = freeAddress(); err != nil {
			return summary{}, load, err
		}
	}
	p, err := start(ctl, cp.Kubeconfig, filepath.Join(dir, "controller.log"), pprofAddr)
	if err != nil {
		return summary{}, load, err
	}
	defer p.stop()
	if err := warmUp(ctx, c, ctl, p, warmNS, 2*time.Minute); err != nil {
		return summary{}, load, err
	}

	load[0] = loadAverage()
	before, err := scrapeRequests(ctx, cp.Config)
	if err != nil {
		return summary{}, load, err
	}
	profiled := make(chan error, 1)
	if profile > 0 {
		go func() {
			profiled <- profileAPIServer(ctx, cp.Config, profile, filepath.Join(dir, "apiserver.cpu.pprof"))
		}()
		if pprofAddr != "" {
			go func() {
				url := "http://" + pprofAddr + "/debug/pprof/profile"
				if err := profileURL(ctx, url, profile, filepath.Join(dir, "controller.cpu.pprof")); err != nil {
					fmt.Fprintf(os.Stderr, "loadbench: %v\n", err)
				}
			}()
		}
	} else {
		profiled <- nil
	}
	cpu := sampleCPU(p.cmd.Process.Pid)
	s, err := measure(ctx, c, ctl.kind, benchNS, l)
	s.CPU = sampleCPU(p.cmd.Process.Pid).since(cpu)
	s.ControllerRSS = peakRSS(p.cmd.Process.Pid)
	load[1] = loadAverage()
	if perr := <-profiled; perr != nil && err == nil {
		err = perr
	}
	if err == nil {
		var after requests
		if after, err = scrapeRequests(ctx, cp.Config); err == nil {
			s.Requests = after.since(before)
		}
	}
	if err != nil {
		select {
		case <-p.done:
			err = fmt.Errorf("%w; %w", err, p.exited())
		default:
		}
		return summary{}, load, err
	}
	return s, load, nil
}

// loadAverage is the 1, 5 and 15 minute load averages, "?" where the
// system does not say.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// profileAPIServer writes a CPU profile of the API server over d to path.
func profileAPIServer(ctx context.Context, cfg *rest.Config, d time.Duration, path string) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create profile client: %w", err)
	}
	body, err := dc.RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("profile the API server: %w", err)
	}
	return os.WriteFile(path, body, 0o644)
}

// profileURL writes a CPU profile over d from a pprof endpoint to path.
func profileURL(ctx context.Context, url string, d time.Duration, path string) error {
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?seconds=%d", url, int(d.Seconds())), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile the controller: %w", err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile the controller: %s: %v", resp.Status, err)
	}
	return os.WriteFile(path, body, 0o644)
}

// freeAddress is a loopback address with a port free at the moment.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close() //nolint:errcheck // a listener closed unused
	return l.Addr().String(), nil
}
