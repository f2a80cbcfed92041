package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
)

// KubernetesVersion is the Kubernetes release whose kube-apiserver and etcd the control plane
// runs; hack/envtest.sh provides the binaries for it.
const KubernetesVersion = "1.37.2"

// ControlPlane is a running kube-apiserver and etcd with aerie's CRDs installed.
type ControlPlane struct {
	// Config reaches the API server with cluster-admin rights.
	Config *rest.Config
	// Scheme knows the Kubernetes built-in types and aerie's API.
	Scheme *k8sruntime.Scheme
	// Client is a controller-runtime client (uncached) using Scheme.
	Client client.Client
	// Kubeconfig is the path of a kubeconfig file for Config, for kubectl and for
	// processes started by the test.
	Kubeconfig string
	// KubectlPath is the kubectl binary of the same Kubernetes release.
	KubectlPath string

	env *envtest.Environment
}

// StartControlPlane starts a control plane for the test and stops it in t.Cleanup.
//
// The binaries are taken from KUBEBUILDER_ASSETS or, when that is unset, from the cache
// that hack/envtest.sh fills (`make envtest`). A missing binary fails the test with
// instructions (or skips it under -short).
func StartControlPlane(t testing.TB) *ControlPlane {
	t.Helper()
	return StartControlPlaneWith(t, ControlPlaneOptions{})
}

// ControlPlaneOptions configures a control plane; the zero value is
// StartControlPlane's.
type ControlPlaneOptions struct {
	// NoWatchCache serves watches from etcd rather than the API server's
	// watch cache (--watch-cache=false), so that a watch resumes from a
	// resource version of before a RestartAPIServer: a restarted cache
	// knows only what came after it and answers 410 Gone.
	NoWatchCache bool
}

// StartControlPlaneWith is StartControlPlane with opts.
func StartControlPlaneWith(t testing.TB, opts ControlPlaneOptions) *ControlPlane {
	t.Helper()
	if _, ok := envtestAssets(); !ok {
		requireDependency(t, fmt.Sprintf("envtest binaries (kube-apiserver, etcd, kubectl %s) not found in KUBEBUILDER_ASSETS or the hack/envtest.sh cache", KubernetesVersion),
			"run `make envtest` (or `export KUBEBUILDER_ASSETS=$(hack/envtest.sh)`) in the repository first")
		return nil
	}
	cp, _, stop, err := newControlPlane(t.TempDir(), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

// NewControlPlane starts a control plane outside a test, for the demo: dir receives its
// kubeconfig. stop shuts it down; the caller must call it.
func NewControlPlane(dir string) (cp *ControlPlane, stop func() error, err error) {
	cp, _, stop, err = newControlPlane(dir, ControlPlaneOptions{}, nil)
	return cp, stop, err
}

// newControlPlane is NewControlPlane with opts, and the environment changed by configure
// (when not nil) before it starts; it returns the environment too, for what a node needs
// of it.
func newControlPlane(
	dir string, opts ControlPlaneOptions, configure func(*envtest.Environment),
) (*ControlPlane, *envtest.Environment, func() error, error) {
	assets, ok := envtestAssets()
	if !ok {
		return nil, nil, nil, fmt.Errorf("envtest binaries (kube-apiserver, etcd, kubectl %s) not found in KUBEBUILDER_ASSETS or the hack/envtest.sh cache: run `make envtest` first", KubernetesVersion)
	}
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, nil, fmt.Errorf("build scheme: %w", err)
	}
	if err := aeriev1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, nil, fmt.Errorf("build scheme: %w", err)
	}
	// The API server's certificates live in a directory of the caller's, not one it
	// removes when it stops, so that RestartAPIServer keeps them (and every
	// client's configuration stays valid).
	certDir := filepath.Join(dir, "kube-apiserver")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, nil, nil, fmt.Errorf("create the API server's directory: %w", err)
	}
	api := &envtest.APIServer{CertDir: certDir}
	if opts.NoWatchCache {
		api.Configure().Set("watch-cache", "false")
	}
	env := &envtest.Environment{
		ControlPlane:          envtest.ControlPlane{APIServer: api},
		Scheme:                scheme,
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		// The race detector and a busy two-core machine make the default 20 s tight.
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if configure != nil {
		configure(env)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start control plane (binaries from %s): %w", assets, err)
	}
	fail := func(err error) (*ControlPlane, *envtest.Environment, func() error, error) {
		_ = env.Stop()
		return nil, nil, nil, err
	}
	admin, err := env.AddUser(envtest.User{Name: "aerie-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fail(fmt.Errorf("add control plane user: %w", err))
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return fail(fmt.Errorf("render kubeconfig: %w", err))
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fail(fmt.Errorf("write kubeconfig: %w", err))
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fail(fmt.Errorf("create client: %w", err))
	}
	return &ControlPlane{
		Config:      cfg,
		Scheme:      scheme,
		Client:      c,
		Kubeconfig:  kubeconfigPath,
		KubectlPath: filepath.Join(assets, "kubectl"),
		env:         env,
	}, env, env.Stop, nil
}

// Namespace creates a namespace with a unique name for the test. envtest runs no namespace
// controller, so namespaces are not deleted afterwards; they die with the control plane.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random namespace suffix: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test-" + hex.EncodeToString(b[:])}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cp.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// Kubectl runs kubectl of the same release against the control plane and returns its
// standard output; a non-zero exit is returned as an error carrying standard error.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, cp.KubectlPath, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := runCmd(cmd); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// RepoRoot returns the root of the aerie repository, found from this source file.
func RepoRoot(t testing.TB) string {
	t.Helper()
	return repoRoot()
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// EnvtestBinary returns the path of a binary of the control plane's Kubernetes release,
// looked up like the control plane's own: in KUBEBUILDER_ASSETS, then in the cache that
// hack/envtest.sh fills. Commands beyond kube-apiserver, etcd and kubectl (such as
// kube-controller-manager) are only there once `AERIE_ENVTEST_EXTRA=<name> hack/envtest.sh`
// has built them; the error says so.
func EnvtestBinary(name string) (string, error) {
	dirs := envtestDirs()
	for _, dir := range dirs {
		if hasBinaries(dir, name) {
			return filepath.Join(dir, name), nil
		}
	}
	where := "KUBEBUILDER_ASSETS (unset) or the hack/envtest.sh cache (no user cache directory)"
	if len(dirs) > 0 {
		where = strings.Join(dirs, " or ")
	}
	return "", fmt.Errorf("%s %s not found in %s: build it with `AERIE_ENVTEST_EXTRA=%s hack/envtest.sh` (from source the first time: several minutes)",
		name, KubernetesVersion, where, name)
}

// envtestAssets finds a directory holding kube-apiserver, etcd and kubectl.
func envtestAssets() (string, bool) {
	for _, dir := range envtestDirs() {
		if hasBinaries(dir, "kube-apiserver", "etcd", "kubectl") {
			return dir, true
		}
	}
	return "", false
}

// envtestDirs are the directories that may hold the envtest binaries, in the order they are
// tried: KUBEBUILDER_ASSETS, then the hack/envtest.sh cache.
func envtestDirs() []string {
	var candidates []string
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		candidates = append(candidates, dir)
	}
	root := os.Getenv("AERIE_ENVTEST_DIR")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err == nil {
			root = filepath.Join(cache, "aerie", "envtest")
		}
	}
	if root != "" {
		candidates = append(candidates, filepath.Join(root, "k8s", KubernetesVersion+"-"+runtime.GOOS+"-"+runtime.GOARCH))
	}
	return candidates
}

func hasBinaries(dir string, names ...string) bool {
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// RestartAPIServer stops the kube-apiserver as a kubelet stops a static
// pod, SIGTERM and SIGKILL once grace has passed (a kube-apiserver drains
// its requests for up to its request timeout, a minute), and starts it
// again on the same port, certificates and etcd: what was stored stays,
// clients reconnect with their configuration, and watches end and must be
// started again.
func (cp *ControlPlane) RestartAPIServer(grace time.Duration) error {
	api := cp.env.ControlPlane.APIServer
	pid, err := processWithArg("--cert-dir=" + api.CertDir)
	if err != nil {
		return fmt.Errorf("find the API server: %w", err)
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(grace); Alive(pid) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	// Gone once envtest has reaped it.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server (pid %d) is still there a minute after SIGKILL", pid)
		}
	}
	// It has exited: Stop only cleans up (its signal finds no process).
	if err := api.Stop(); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop the API server: %w", err)
	}
	if err := api.Start(); err != nil {
		return fmt.Errorf("start the API server again: %w", err)
	}
	return nil
}

// processWithArg finds the process with arg on its command line.
func processWithArg(arg string) (int, error) {
	if pid, ok := FindProcess(func(_ int, args []string) bool { return slices.Contains(args, arg) }); ok {
		return pid, nil
	}
	return 0, fmt.Errorf("no process with %s", arg)
}

// FindProcess returns the first process of the machine whose PID and
// command line (its arguments, the program's first) match says so.
func FindProcess(match func(pid int, args []string) bool) (int, bool) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(pid, strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")) {
			return pid, true
		}
	}
	return 0, false
}
