package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Node is a single-node cluster on a control plane: kube-scheduler and
// kube-controller-manager (garbage collection, service-account tokens,
// namespace deletion, ... the real controllers), containerd with runc, a
// bridge CNI network, and a kubelet. Images come from archives imported into
// containerd (ImportImage), never from a registry.
//
// Not run: kube-proxy (Services have no ClusterIP routing) and CoreDNS.
// The kubelet accepts anonymous requests on NodeIP (for the API server's
// logs, exec and port-forward); it authenticates to the API server as
// system:node:<name> in system:masters.
type Node struct {
	*ControlPlane
	// Name is the Node's name.
	Name string
	// NodeIP is the node's address (the host's), where pods reach servers
	// the test starts: a server for pods must listen on it (or on all
	// addresses), not on 127.0.0.1, which is each pod's own.
	NodeIP string
	// Dir holds the node's state: containerd's, the kubelet's, the CNI's.
	Dir string

	bins   string // hack/node.sh's directory
	sock   string
	bridge string
	procs  []*nodeProc
}

// nodeProc is one of the node's processes.
type nodeProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

const (
	nodeName     = "aerie-node"
	nodeBridge   = "aerie0"
	nodePodCIDR  = "10.88.0.0/16"
	pauseImage   = "localhost/aerie/pause:1"
	nodeLockPath = "/run/aerie-node.lock"
	// nodeDirPrefix names a node's directory in the temporary directory.
	nodeDirPrefix = "aerie-node-"
)

// NodeBinDir returns the directory hack/node.sh fills (containerd, the CNI
// plugins, pause.tar), building them when missing.
func NodeBinDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(), "hack", "node.sh"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("run hack/node.sh: %w", err)
	}
	return strings.TrimSpace(out.String()), nil
}

// StartNode starts a control plane with a real node for the test and tears
// both down in t.Cleanup. It needs Linux, root, runc on PATH and the node's
// binaries (hack/node.sh builds them, the first time in about 10 minutes).
func StartNode(t testing.TB) *Node {
	t.Helper()
	if why := nodeUnsupported(); why != "" {
		requireDependency(t, "a real node cannot run here: "+why,
			"run the node's tests as root on Linux")
		return nil
	}
	n, stop, err := NewNode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return n
}

// nodeUnsupported says why this machine cannot run a node, or "".
func nodeUnsupported() string {
	switch {
	case runtime.GOOS != "linux":
		return "not Linux"
	case os.Geteuid() != 0:
		return "not root"
	}
	return ""
}

// NewNode starts a control plane and a node outside a test (hack/node).
// stop tears both down and reports anything it left behind; the caller
// must call it. One node runs on a machine at a time: NewNode waits for
// another's stop.
func NewNode(ctx context.Context) (n *Node, stop func() error, err error) {
	if why := nodeUnsupported(); why != "" {
		return nil, nil, errors.New("a real node cannot run here: " + why)
	}
	bins, err := NodeBinDir(ctx)
	if err != nil {
		return nil, nil, err
	}
	lock, err := os.OpenFile(nodeLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open node lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		_ = lock.Close()
		return nil, nil, fmt.Errorf("lock %s: %w", nodeLockPath, err)
	}
	// Under the lock no node runs: whatever one left is stale.
	if err := cleanStale(bins); err != nil {
		_ = lock.Close()
		return nil, nil, fmt.Errorf("clean up what an earlier node left: %w", err)
	}
	dir, err := os.MkdirTemp("", nodeDirPrefix)
	if err != nil {
		_ = lock.Close()
		return nil, nil, fmt.Errorf("create node dir: %w", err)
	}
	cp, env, stopCP, err := newControlPlane(dir, ControlPlaneOptions{}, func(env *envtest.Environment) {
		// The ServiceAccount admission plugin, off in envtest since it runs
		// no token controller: the controller manager here is one.
		env.ControlPlane.GetAPIServer().Configure().Disable("disable-admission-plugins").
			// The node's name resolves nowhere: reach the kubelet (logs,
			// exec) at its InternalIP.
			Set("kubelet-preferred-address-types", "InternalIP")
		// etcd's data in the node's directory, so that a node whose
		// process was killed leaves an etcd cleanStale finds by it.
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")}
	})
	if err != nil {
		_ = lock.Close()
		return nil, nil, err
	}
	n = &Node{ControlPlane: cp, Name: nodeName, Dir: dir, bins: bins, bridge: nodeBridge,
		sock: filepath.Join(dir, "containerd.sock")}
	stop = func() error {
		errs := []error{n.stop(context.Background()), stopCP()}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove node dir: %w", err))
		}
		errs = append(errs, lock.Close())
		return errors.Join(errs...)
	}
	if err := n.start(ctx, env); err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	return n, stop, nil
}

// start runs the node's processes on the control plane and waits for the
// Node to be Ready.
func (n *Node) start(ctx context.Context, env *envtest.Environment) error {
	ip, err := hostIP()
	if err != nil {
		return err
	}
	n.NodeIP = ip
	certDir := env.ControlPlane.GetAPIServer().CertDir
	kubelet, err := env.AddUser(envtest.User{Name: "system:node:" + n.Name, Groups: []string{"system:nodes", "system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add kubelet user: %w", err)
	}
	kubeletConfig, err := kubelet.KubeConfig()
	if err != nil {
		return fmt.Errorf("render kubelet kubeconfig: %w", err)
	}
	kubeletKubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := os.WriteFile(kubeletKubeconfig, kubeletConfig, 0o600); err != nil {
		return fmt.Errorf("write kubelet kubeconfig: %w", err)
	}
	if err := n.writeConfigs(); err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	sched, err := EnvtestBinary("kube-scheduler")
	if err != nil {
		return err
	}
	kcm, err := EnvtestBinary("kube-controller-manager")
	if err != nil {
		return err
	}
	kubeletBin, err := EnvtestBinary("kubelet")
	if err != nil {
		return err
	}
	n.run("kube-scheduler", sched, "--kubeconfig="+n.Kubeconfig, "--leader-elect=false", "--secure-port=0")
	n.run("kube-controller-manager", kcm, "--kubeconfig="+n.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
		"--root-ca-file="+filepath.Join(certDir, "apiserver.crt"),
		"--use-service-account-credentials=false")
	n.run("kubelet", kubeletBin, "--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+kubeletKubeconfig, "--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet-pki"),
		"--hostname-override="+n.Name, "--node-ip="+n.NodeIP, "--v=1")
	return n.waitReady(ctx, time.Time{})
}

// RestartKubelet stops the kubelet as a service manager restarts it
// (SIGTERM), starts it again with the same flags and waits until it has
// reported the Node Ready again. The pods' containers run on meanwhile,
// under containerd.
func (n *Node) RestartKubelet(ctx context.Context) error {
	i := slices.IndexFunc(n.procs, func(p *nodeProc) bool { return p.name == "kubelet" })
	if i < 0 {
		return errors.New("the node runs no kubelet")
	}
	old := n.procs[i]
	n.signal("kubelet", syscall.SIGTERM, 20*time.Second)
	n.procs = slices.Delete(n.procs, i, i+1)
	since := time.Now()
	n.run("kubelet", old.cmd.Path, old.cmd.Args[1:]...)
	return n.waitReady(ctx, since)
}

// hostIP is the host's address on the interface of its default route.
func hostIP() (string, error) {
	c, err := net.Dial("udp4", "192.0.2.255:9")
	if err != nil {
		return "", fmt.Errorf("find the host's address: %w", err)
	}
	defer func() { _ = c.Close() }()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// writeConfigs writes containerd's, the CNI's and the kubelet's configuration.
func (n *Node) writeConfigs() error {
	runc := filepath.Join(n.bins, "runc")
	d := n.Dir
	containerd := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[4]q
[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  netns_mounts_under_state_dir = true
  # The kubelet asks for OOM scores below containerd's own, which a host
  # that runs the node inside a container may refuse; cap them at it.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[5]q
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[6]q]
    conf_dir = %[7]q
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
`, filepath.Join(d, "containerd", "root"), filepath.Join(d, "containerd", "state"), n.sock, pauseImage,
		runc, n.bins, filepath.Join(d, "cni"))
	cni := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"aerie-node","plugins":[{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,"hairpinMode":true,
"ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":%q}}]}`,
		n.bridge, nodePodCIDR, filepath.Join(d, "cni-ipam"))
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%%, imagefs.available: 2%%}
serializeImagePulls: false
registerNode: true
syncFrequency: 10s
`, n.sock, n.NodeIP)
	for name, content := range map[string]string{
		"containerd.toml":        containerd,
		"cni/10-aerie.conflist":  cni,
		"kubelet.yaml":           kubelet,
		"netns/.keep":            "",
		"kubelet-pki/.keep":      "",
		"containerd/root/.keep":  "",
		"containerd/state/.keep": "",
		"cni-ipam/.keep":         "",
	} {
		p := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o711); err != nil {
			return fmt.Errorf("create node dir for %s: %w", name, err)
		}
		if strings.HasSuffix(name, "/.keep") {
			continue
		}
		if err := writeFile(p, content, 0o600); err != nil {
			return fmt.Errorf("write node config %s: %w", name, err)
		}
	}
	return nil
}

// startContainerd runs containerd, waits for its socket and imports the
// sandbox image.
func (n *Node) startContainerd(ctx context.Context) error {
	p := n.run("containerd", filepath.Join(n.bins, "containerd"), "--config", filepath.Join(n.Dir, "containerd.toml"))
	ok := Poll(30*time.Second, func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		return n.ctr(ctx, "version") == nil
	})
	select {
	case <-p.done:
		return fmt.Errorf("containerd exited: %v; the end of its log:\n%s", p.err, n.logTail("containerd"))
	default:
	}
	if !ok {
		return fmt.Errorf("containerd did not answer on %s within 30s; the end of its log:\n%s", n.sock, n.logTail("containerd"))
	}
	return n.ImportImage(ctx, filepath.Join(n.bins, "pause.tar"))
}

// ImportImage imports an image archive (OCI or docker-archive) into the
// node's containerd, where the kubelet finds it: pods using it need
// imagePullPolicy IfNotPresent or Never.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	if err := n.ctr(ctx, "-n", "k8s.io", "images", "import", "--no-unpack=false", archive); err != nil {
		return fmt.Errorf("import image %s: %w", archive, err)
	}
	return nil
}

// ctr runs ctr against the node's containerd.
func (n *Node) ctr(ctx context.Context, args ...string) error {
	_, err := n.ctrOutput(ctx, args...)
	return err
}

func (n *Node) ctrOutput(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(n.bins, "ctr"), append([]string{"--address", n.sock}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// run starts one of the node's processes, its output in <Dir>/<name>.log.
func (n *Node) run(name, bin string, args ...string) *nodeProc {
	p := &nodeProc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "PATH="+n.bins+":"+os.Getenv("PATH"))
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Appended to: a restarted process's log goes on from its last run's.
	log, err := os.OpenFile(filepath.Join(n.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		p.cmd.Stdout, p.cmd.Stderr = log, log
	}
	if err := p.cmd.Start(); err != nil {
		p.err = err
		close(p.done)
		return p
	}
	n.procs = append(n.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		if log != nil {
			_ = log.Close()
		}
		close(p.done)
	}()
	return p
}

// logTail is the last lines of a process's log, for an error (the log
// goes with Dir).
func (n *Node) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, name+".log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// waitReady waits for the Node to register and be Ready, by a heartbeat
// after since, and for the default ServiceAccount of namespace default (the
// token controller's work).
func (n *Node) waitReady(ctx context.Context, since time.Time) error {
	var last string
	ok := Poll(2*time.Minute, func() bool {
		for _, p := range n.procs {
			select {
			case <-p.done:
				last = fmt.Sprintf("%s exited: %v; the end of its log:\n%s", p.name, p.err, n.logTail(p.name))
				return true
			default:
			}
		}
		var node corev1.Node
		if err := n.Client.Get(ctx, client.ObjectKey{Name: n.Name}, &node); err != nil {
			last = "Node not registered: " + err.Error()
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Node Ready=%s: %s", c.Status, c.Message)
				if c.Status != corev1.ConditionTrue {
					return false
				}
				// The API has second resolution.
				if c.LastHeartbeatTime.Time.Before(since.Truncate(time.Second)) {
					last = "no Ready heartbeat since " + since.Format(time.RFC3339)
					return false
				}
			}
		}
		var sa corev1.ServiceAccount
		if err := n.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &sa); err != nil {
			last = "no default ServiceAccount yet: " + err.Error()
			return false
		}
		last = ""
		return true
	})
	if !ok || last != "" {
		return fmt.Errorf("node %s not ready within 2m: %s\nthe end of the kubelet's log:\n%s", n.Name, last, n.logTail("kubelet"))
	}
	return nil
}

// stop empties the node and ends its processes, then removes what they
// leave behind: mounts under Dir, the bridge, the pods' cgroups. It
// returns an error naming whatever is still there.
func (n *Node) stop(ctx context.Context) error {
	var errs []error
	if n.Client != nil && len(n.procs) > 0 {
		errs = append(errs, n.drain(ctx))
	}
	// The kubelet first, so that it restarts nothing, then containerd's
	// clients, containerd last.
	for _, name := range []string{"kubelet", "kube-controller-manager", "kube-scheduler"} {
		n.signal(name, syscall.SIGTERM, 20*time.Second)
	}
	errs = append(errs, n.removeContainers(ctx))
	n.signal("containerd", syscall.SIGTERM, 20*time.Second)
	errs = append(errs, n.killShims(), n.unmountAll(), n.removeBridge(), removeKubeCgroups())
	return errors.Join(errs...)
}

// drain deletes every pod of the node and waits (up to a minute) for the
// kubelet to have stopped their sandboxes, which tears down their network.
func (n *Node) drain(ctx context.Context) error {
	var pods corev1.PodList
	if err := n.Client.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
		return fmt.Errorf("list the node's pods: %w", err)
	}
	for i := range pods.Items {
		_ = n.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))
	}
	Poll(time.Minute, func() bool {
		out, err := n.ctrOutput(ctx, "-n", "k8s.io", "tasks", "ls", "-q")
		return err != nil || strings.TrimSpace(out) == ""
	})
	return nil
}

// signal sends sig to the named process's group and waits up to grace
// for it to end, then kills the group.
func (n *Node) signal(name string, sig syscall.Signal, grace time.Duration) {
	for _, p := range n.procs {
		if p.name != name {
			continue
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
}

// removeContainers kills and removes whatever containers are left in
// containerd, the sandboxes too, when containerd is running.
func (n *Node) removeContainers(ctx context.Context) error {
	if n.ctr(ctx, "version") != nil {
		return nil
	}
	out, err := n.ctrOutput(ctx, "-n", "k8s.io", "tasks", "ls", "-q")
	if err != nil {
		return err
	}
	for _, id := range strings.Fields(out) {
		_ = n.ctr(ctx, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id)
		Poll(10*time.Second, func() bool { return n.ctr(ctx, "-n", "k8s.io", "tasks", "delete", id) == nil })
	}
	out, err = n.ctrOutput(ctx, "-n", "k8s.io", "containers", "ls", "-q")
	if err != nil {
		return err
	}
	if ids := strings.Fields(out); len(ids) > 0 {
		_ = n.ctr(ctx, append([]string{"-n", "k8s.io", "containers", "rm"}, ids...)...)
	}
	return nil
}

// killShims kills the containerd shims still running from the node's
// binaries (they outlive containerd by design), by process id.
func (n *Node) killShims() error {
	shim := filepath.Join(n.bins, "containerd-shim-runc-v2")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	var left []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && exe == shim {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			if !Poll(5*time.Second, func() bool { return !Alive(pid) }) {
				left = append(left, e.Name())
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("containerd shims still running: pids %s", strings.Join(left, " "))
	}
	return nil
}

// unmountAll unmounts everything mounted under Dir, deepest first.
func (n *Node) unmountAll() error {
	var errs []error
	for range 3 {
		mounts, err := mountsUnder(n.Dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		errs = errs[:0]
		for i := len(mounts) - 1; i >= 0; i-- {
			if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mounts[i], err))
			}
		}
	}
	mounts, _ := mountsUnder(n.Dir)
	if len(mounts) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %s", strings.Join(mounts, " ")))
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points at or below dir, in mount order.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		// Octal escapes (\040 for a space) do not occur in the node's paths.
		if p := fields[4]; p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out, s.Err()
}

// cleanStale removes what nodes left when their process died without
// stopping them (killed, or a test binary's timeout): the processes that
// name their directories (kubelet, containerd, the control plane's), the
// containerd shims and the pods' processes, the mounts and the directories
// themselves, the bridge and the kubelet's cgroups.
func cleanStale(bins string) error {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), nodeDirPrefix+"*"))
	if err != nil || len(dirs) == 0 {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		killNaming(dir)
	}
	stale := &Node{bins: bins, bridge: nodeBridge}
	errs = append(errs, stale.killShims(), killKubePods())
	for _, dir := range dirs {
		stale.Dir = dir
		errs = append(errs, stale.unmountAll())
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
		}
	}
	errs = append(errs, stale.removeBridge(), removeKubeCgroups())
	return errors.Join(errs...)
}

// killNaming kills every process with an argument naming a path under dir.
func killNaming(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(dir+"/")) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		Poll(5*time.Second, func() bool { return !Alive(pid) })
	}
}

// killKubePods kills the processes left in the kubelet's pod cgroups.
func killKubePods() error {
	var left []string
	for _, root := range kubeCgroupRoots() {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					if !Poll(5*time.Second, func() bool { return !Alive(pid) }) {
						left = append(left, f)
					}
				}
			}
			return nil
		})
	}
	if len(left) > 0 {
		return fmt.Errorf("pod processes still running: pids %s", strings.Join(left, " "))
	}
	return nil
}

// removeBridge deletes the CNI bridge, if it is there.
func (n *Node) removeBridge() error {
	if _, err := net.InterfaceByName(n.bridge); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", n.bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("delete bridge %s: %w: %s", n.bridge, err, out)
	}
	return nil
}

var cgroupMu sync.Mutex

// kubeCgroupRoots are the kubelet's kubepods cgroups, in every cgroup v1
// hierarchy and in the unified one.
func kubeCgroupRoots() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	return roots
}

// removeKubeCgroups removes the kubelet's cgroup trees (kubepods, and the
// ones it makes for system and kubelet slices), deepest first, in every
// cgroup v1 hierarchy and in the unified one.
func removeKubeCgroups() error {
	cgroupMu.Lock()
	defer cgroupMu.Unlock()
	var errs []error
	for _, root := range kubeCgroupRoots() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// Pod waits up to timeout for the named pod to be Running with every
// container ready, and returns it; it fails the test otherwise.
func (n *Node) Pod(t testing.TB, namespace, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	ok := Poll(timeout, func() bool {
		if err := n.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, &pod); err != nil {
			return false
		}
		if pod.Status.Phase != corev1.PodRunning {
			return false
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.ContainersReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("pod %s/%s not running and ready within %s: phase %s, %+v", namespace, name, timeout, pod.Status.Phase, pod.Status.ContainerStatuses)
	}
	return &pod
}

// Mounts is how the node's containers see their volumes: in mount
// namespaces of their own, as on every real node.
func (n *Node) Mounts() MountMode { return MountNamespace }

// VolumePath is the kubelet's directory of a volume of a pod on the node
// (an emptyDir, a ConfigMap's, a Secret's or a projected volume's files),
// for a test to look into.
func (n *Node) VolumePath(pod *corev1.Pod, volume string) string {
	plugin := "kubernetes.io~empty-dir"
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Name != volume:
		case v.ConfigMap != nil:
			plugin = "kubernetes.io~configmap"
		case v.Secret != nil:
			plugin = "kubernetes.io~secret"
		case v.Projected != nil:
			plugin = "kubernetes.io~projected"
		}
	}
	return filepath.Join(n.Dir, "kubelet", "pods", string(pod.UID), "volumes", plugin, volume)
}
