package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aerie-run/aerie/runner/process"
)

// Termination message limits, the kubelet's.
const (
	maxTerminationMessage      = 4096
	maxFallbackMessageLines    = 80
	maxFallbackMessageLogBytes = 2048
)

// outputGrace is how long, after a container's processes are gone, its
// output pipes are read before they are cut: a process that escaped the
// teardown may still hold them.
const outputGrace = 2 * time.Second

// containerRun is one start of a container.
type containerRun struct {
	id        string // the process group's id, and the container ID
	group     process.Group
	cmd       *exec.Cmd
	startedAt metav1.Time
	log       *containerLog
	termFile  string // the local termination message file
	policy    corev1.TerminationMessagePolicy

	// mu orders teardowns and the reaping of the leader: once the leader
	// is reaped its PID can be reused, and the group must not be signalled.
	mu     sync.Mutex
	reaped bool

	exited chan struct{}
	// Set before exited is closed.
	exitCode   int32
	finishedAt metav1.Time
	message    string

	// collected: the worker has recorded the exit.
	collected bool
}

func (run *containerRun) containerID() string { return "aerie-local://" + run.id }

// terminated is the container state of an exited run.
func (run *containerRun) terminated() *corev1.ContainerStateTerminated {
	reason := "Completed"
	if run.exitCode != 0 {
		reason = "Error"
	}
	return &corev1.ContainerStateTerminated{
		ExitCode:    run.exitCode,
		Reason:      reason,
		Message:     run.message,
		StartedAt:   run.startedAt,
		FinishedAt:  run.finishedAt,
		ContainerID: run.containerID(),
	}
}

// teardown ends the run's process group: SIGTERM, grace, SIGKILL.
func (run *containerRun) teardown(ctx context.Context, grace time.Duration, log *slog.Logger) {
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.reaped {
		return // exited and reaped: nothing left to signal
	}
	if rep, err := process.Teardown(ctx, run.group, grace); err != nil {
		log.Warn("tear down container", "container", run.id, "status", rep.Status, "error", err)
	}
}

// launchSpec is everything needed to start a container's process.
type launchSpec struct {
	path     string // the executable
	argv     []string
	env      []string
	dir      string
	mounts   []mount // bind mounts, under MountNamespace
	cred     *syscall.Credential
	hostname string
	termFile string
	policy   corev1.TerminationMessagePolicy
}

// startError is a failure to start a container that the runtime reports
// as the container's termination (StartError, exit code 128) rather than a
// configuration error the kubelet retries.
type startError struct{ err error }

func (e startError) Error() string { return e.err.Error() }
func (e startError) Unwrap() error { return e.err }

// start starts container c. A configuration error (a missing ConfigMap, a
// mount of an unknown volume) leaves it waiting with
// CreateContainerConfigError and is returned, to be retried; a failure to
// run the command terminates it with StartError.
func (w *podWorker) start(ctx context.Context, c *containerState) error {
	log := w.r.log.With("pod", w.namespace+"/"+w.name, "container", c.spec.Name)
	attempt := int32(0)
	if c.run != nil {
		attempt = c.restarts + 1
	}
	spec, err := w.launchSpec(ctx, c, attempt)
	var run *containerRun
	if err == nil {
		run, err = w.launch(spec, c.spec.Name, attempt)
		if err != nil {
			err = startError{err}
		}
	}
	var se startError
	switch {
	case err == nil:
	case errors.As(err, &se):
		log.Warn("start container", "error", err)
		now := metav1.Now().Rfc3339Copy()
		run = &containerRun{id: process.NewID(), exited: make(chan struct{}), collected: true}
		close(run.exited)
		if c.run != nil {
			c.restarts++
		}
		c.run = run
		w.recordTermination(c, &corev1.ContainerStateTerminated{
			ExitCode: 128, Reason: "StartError", Message: err.Error(),
			StartedAt: now, FinishedAt: now, ContainerID: run.containerID(),
		})
		return nil
	default:
		if c.state.Waiting == nil || c.state.Waiting.Message != err.Error() {
			log.Warn("container configuration", "error", err)
		}
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}}
		return err
	}
	log.Debug("container started", "pid", run.group.PID, "command", spec.argv[0])
	if c.run != nil {
		c.restarts++
	}
	c.run = run
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: run.startedAt}}
	return nil
}

// launchSpec works out how to start container c: its command, environment,
// working directory, mounts and user.
func (w *podWorker) launchSpec(ctx context.Context, c *containerState, attempt int32) (launchSpec, error) {
	cs := c.spec
	podEnv, err := w.containerEnv(ctx, cs)
	if err != nil {
		return launchSpec{}, err
	}
	cred, uid, err := w.credential(cs)
	if err != nil {
		return launchSpec{}, err
	}
	if len(cs.Command) == 0 {
		return launchSpec{}, startError{fmt.Errorf("container %s has no command: the local pod runner does not run images, so every container needs one", cs.Name)}
	}
	argv := make([]string, 0, len(cs.Command)+len(cs.Args))
	for _, a := range slices2(cs.Command, cs.Args) {
		argv = append(argv, expandVars(a, podEnv.lookup))
	}

	mounts, err := w.containerMounts(cs, podEnv)
	if err != nil {
		return launchSpec{}, err
	}
	termFile := filepath.Join(w.dir, "containers", cs.Name, "termination-log."+itoa(attempt))
	if err := makeTerminationFile(termFile); err != nil {
		return launchSpec{}, err
	}
	termPath := cmpOr(cs.TerminationMessagePath, corev1.TerminationMessagePathDefault)
	mounts = append(mounts, mount{Target: termPath, Source: termFile, File: true})

	home := "/"
	if uid == 0 {
		home = "/root"
	}
	env := newEnvList()
	env.set("PATH", w.r.pathEnv)
	env.set("HOSTNAME", w.hostname())
	env.set("HOME", home)
	for _, kv := range podEnv.environ() {
		name, value, _ := strings.Cut(kv, "=")
		env.set(name, value)
	}

	dir := cmpOr(cs.WorkingDir, "/")
	if w.r.mode == MountPathMap {
		m := make(map[string]string, len(mounts)+1)
		for _, mt := range mounts {
			m[filepath.Clean(mt.Target)] = mt.Source
		}
		pm := newPathMap(m)
		if local := pm.rewrite(dir); local != dir {
			dir = local
		} else if _, err := os.Stat(dir); err != nil {
			// A runtime creates a missing working directory in the
			// container's file system; here that is a directory of the pod.
			local := filepath.Join(w.dir, "rootfs", filepath.Clean(dir))
			m[filepath.Clean(dir)] = local
			pm = newPathMap(m)
			dir = local
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return launchSpec{}, fmt.Errorf("working directory: %w", err)
		}
		for i := range argv {
			argv[i] = pm.rewrite(argv[i])
		}
		for _, n := range env.names {
			env.values[n] = pm.rewrite(env.values[n])
		}
		name, value, _ := strings.Cut(pm.environ(), "=")
		env.set(name, value)
	}
	path, err := w.r.resolveCommand(argv[0], env.values["PATH"])
	if err != nil {
		return launchSpec{}, startError{err}
	}
	if filepath.IsAbs(argv[0]) {
		// A path of the container's, not a binary of the runner's.
		path = volumeCommand(path, mounts)
	}
	return launchSpec{
		path:     path,
		argv:     argv,
		env:      env.environ(),
		dir:      dir,
		mounts:   mounts,
		cred:     cred,
		hostname: w.hostname(),
		termFile: termFile,
		policy:   cs.TerminationMessagePolicy,
	}, nil
}

func slices2(a, b []string) []string { return append(append([]string(nil), a...), b...) }

func (w *podWorker) hostname() string { return cmpOr(w.pod.Spec.Hostname, w.name) }

// makeTerminationFile creates an empty termination message file that
// every user can write, as the kubelet creates it.
func makeTerminationFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create termination message file: %w", err)
	}
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		return fmt.Errorf("create termination message file: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil { // whatever the umask
		return fmt.Errorf("create termination message file: %w", err)
	}
	return nil
}

// containerMounts lists the bind mounts of container c's volumeMounts.
func (w *podWorker) containerMounts(c *corev1.Container, env *envList) ([]mount, error) {
	var mounts []mount
	for _, vm := range c.VolumeMounts {
		v, ok := w.volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: the pod has no volume of that name", vm.Name)
		}
		src := v.path
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expandVars(vm.SubPathExpr, env.lookup)
		}
		if sub != "" {
			clean := filepath.Clean(sub)
			if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
				return nil, fmt.Errorf("volumeMount %q: subPath %q must be relative and stay inside the volume", vm.Name, sub)
			}
			src = filepath.Join(src, clean)
			if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) && !v.readOnly {
				if err := os.MkdirAll(src, 0o777); err != nil {
					return nil, fmt.Errorf("volumeMount %q: create subPath: %w", vm.Name, err)
				}
			}
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("volumeMount %q: %w", vm.Name, err)
		}
		mounts = append(mounts, mount{Target: vm.MountPath, Source: src, ReadOnly: vm.ReadOnly || v.readOnly, File: !fi.IsDir()})
	}
	return mounts, nil
}

// credential is who container c runs as, from the container's and the
// pod's securityContext: honoured only when the runner is root (nil
// otherwise, and nil for a container that runs as the runner). uid is the
// effective UID the container gets.
func (w *podWorker) credential(c *corev1.Container) (*syscall.Credential, int64, error) {
	var uid, gid *int64
	var nonRoot *bool
	var groups []int64
	if sc := w.pod.Spec.SecurityContext; sc != nil {
		uid, gid, nonRoot = sc.RunAsUser, sc.RunAsGroup, sc.RunAsNonRoot
		groups = append(groups, sc.SupplementalGroups...)
		if sc.FSGroup != nil {
			groups = append(groups, *sc.FSGroup)
		}
	}
	if sc := c.SecurityContext; sc != nil {
		uid = cmpPtr(sc.RunAsUser, uid)
		gid = cmpPtr(sc.RunAsGroup, gid)
		nonRoot = cmpPtr(sc.RunAsNonRoot, nonRoot)
	}
	self := int64(os.Geteuid())
	if !w.r.root {
		return nil, self, nil
	}
	if uid == nil && nonRoot != nil && *nonRoot {
		uid = &w.r.nonRootUID
	}
	if uid != nil && *uid == 0 && nonRoot != nil && *nonRoot {
		return nil, 0, fmt.Errorf("container %s: runAsNonRoot is set but runAsUser is 0", c.Name)
	}
	if uid == nil && gid == nil && len(groups) == 0 {
		return nil, self, nil
	}
	cred := &syscall.Credential{}
	if uid != nil {
		cred.Uid = uint32(*uid)
	}
	if gid != nil {
		cred.Gid = uint32(*gid)
	}
	for _, g := range groups {
		cred.Groups = append(cred.Groups, uint32(g))
	}
	return cred, int64(cred.Uid), nil
}

func cmpPtr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// volumeCommand is the host's path of a command that a container runs
// from one of its volumes (an executor pod's aerie binary, which an init
// container copied into an emptyDir): the runner opens the command before
// the container's mount namespace exists. Other paths are the host's own.
func volumeCommand(path string, mounts []mount) string {
	for _, m := range mounts {
		if rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.Target, "/")+"/"); ok && filepath.IsLocal(rel) {
			return filepath.Join(m.Source, rel)
		}
	}
	return path
}

// resolveCommand finds the executable of a container's command[0]: a
// Commands entry, a path, or a name looked up in PATH.
func (r *PodRunner) resolveCommand(name, pathEnv string) (string, error) {
	if p, ok := r.commands[name]; ok {
		return p, nil
	}
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH, nor in PodRunnerOptions.Commands", name)
}

// launch starts a container's process, in a process group of its own, and
// a goroutine that follows it to its end.
func (w *podWorker) launch(spec launchSpec, name string, attempt int32) (*containerRun, error) {
	logDir := filepath.Join(w.dir, "logs", name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	l, err := newContainerLog(filepath.Join(logDir, itoa(attempt)+".log"))
	if err != nil {
		return nil, err
	}
	w.addLog(name, l)
	pipes := make([]*os.File, 0, 5)
	closeAll := func() {
		for _, f := range pipes {
			_ = f.Close()
		}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		l.finish()
		return nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	pipes = append(pipes, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll()
		l.finish()
		return nil, fmt.Errorf("create stderr pipe: %w", err)
	}
	pipes = append(pipes, errR, errW)
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		closeAll()
		l.finish()
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	pipes = append(pipes, devNull)

	cmd := &exec.Cmd{
		Path:   spec.path,
		Args:   spec.argv,
		Env:    spec.env,
		Dir:    spec.dir,
		Stdin:  devNull,
		Stdout: outW,
		Stderr: errW,
		// Pdeathsig: a runner killed before it could tear down takes the
		// containers' leaders with it.
		SysProcAttr: &syscall.SysProcAttr{Credential: spec.cred, Pdeathsig: syscall.SIGKILL},
	}
	run := &containerRun{id: process.NewID(), cmd: cmd, log: l, termFile: spec.termFile, policy: spec.policy, exited: make(chan struct{})}
	started := make(chan error, 1)
	go w.follow(run, spec, outR, errR, started)
	err = <-started
	_ = outW.Close()
	_ = errW.Close()
	_ = devNull.Close()
	if err != nil {
		_ = outR.Close()
		_ = errR.Close()
		l.finish()
		return nil, err
	}
	return run, nil
}

// openCommand opens the command at path twice, by O_PATH descriptors that
// a child in another mount namespace executes it by (see start).
func openCommand(path string) ([]int, error) {
	var fds []int
	for range 2 {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, fmt.Errorf("open command %s: %w", path, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// startProcess starts run's process on this thread. A command executed by its
// descriptor (byFD) whose exec is refused with EACCES is started once more
// by the spare descriptor: a start is refused so, rarely, when many
// processes start at once. Plain os/exec through /proc/self/fd/N does the
// same outside the runner (as root, with no namespace or credentials), and
// by path it does not, so the race is in the kernel's exec through the
// descriptor link; the log says whether the first descriptor still named
// the command.
func (w *podWorker) startProcess(run *containerRun, byFD []int, log *slog.Logger) error {
	var err error
	for i := 0; ; i++ {
		if w.r.reaper != nil {
			// On this thread, which is in the container's mount namespace.
			run.group, err = w.r.reaper.StartLocked(run.cmd, run.id)
		} else {
			run.group, err = process.Start(run.cmd, run.id)
		}
		if err == nil || !errors.Is(err, unix.EACCES) || i+1 >= len(byFD) {
			return err
		}
		var a, b unix.Stat_t
		same := unix.Fstat(byFD[i], &a) == nil && unix.Fstat(byFD[i+1], &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
		log.Warn("exec by descriptor refused; starting by the spare one", "error", err, "descriptor_still_the_command", same)
		run.cmd = respawnable(run.cmd, fmt.Sprintf("/proc/self/fd/%d", byFD[i+1]))
	}
}

// respawnable is a fresh exec.Cmd like cmd, with path: an exec.Cmd starts
// once.
func respawnable(cmd *exec.Cmd, path string) *exec.Cmd {
	return &exec.Cmd{
		Path: path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir,
		Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr, ExtraFiles: cmd.ExtraFiles,
		SysProcAttr: cmd.SysProcAttr, WaitDelay: cmd.WaitDelay,
	}
}

// follow starts run's process and follows it to its end: it records the
// exit, ends whatever the container left running, reaps the leader,
// collects the output and the termination message, and wakes the worker.
//
// It runs on a thread of its own, locked for good and ended with the
// goroutine: under MountNamespace the thread enters the container's mount
// namespace, which must not leak to other goroutines; and Pdeathsig is
// sent when the thread that started the child ends, which must not happen
// before the container does.
func (w *podWorker) follow(run *containerRun, spec launchSpec, outR, errR *os.File, started chan<- error) {
	runtime.LockOSThread()
	log := w.r.log.With("pod", w.namespace+"/"+w.name, "container", run.cmd.Args[0])
	var byFD []int // the command's descriptors, when it is executed by one
	if w.r.mode == MountNamespace {
		// A command below a mount path (the runner's Dir, with the
		// Commands copies, under a volume mounted at /tmp) would be hidden
		// in the namespace: it is opened before and executed by its
		// descriptor, which the child inherits up to its exec.
		if hiddenBy(run.cmd.Path, spec.mounts) {
			fds, err := openCommand(run.cmd.Path)
			if err != nil {
				started <- err
				return
			}
			defer func() {
				for _, fd := range fds {
					unix.Close(fd)
				}
			}()
			byFD = fds
			run.cmd.Path = fmt.Sprintf("/proc/self/fd/%d", fds[0])
		}
		if err := enterMountNamespace(spec.hostname, spec.mounts); err != nil {
			started <- err
			return
		}
		if err := os.MkdirAll(spec.dir, 0o755); err != nil {
			started <- fmt.Errorf("working directory: %w", err)
			return
		}
	}
	err := w.startProcess(run, byFD, log)
	if err != nil {
		started <- err
		return
	}
	run.startedAt = metav1.Now().Rfc3339Copy()
	started <- nil

	var copied sync.WaitGroup
	copied.Go(func() { run.log.copyStream("stdout", outR) })
	copied.Go(func() { run.log.copyStream("stderr", errR) })

	st, waitErr := process.AwaitExit(run.group.PID)
	run.mu.Lock()
	// What the container started ends with it, as in a container whose
	// first process exits.
	if rep, err := process.Teardown(context.Background(), run.group, time.Millisecond); err != nil {
		log.Warn("end the container's other processes", "status", rep.Status, "error", err)
	}
	if w.r.reaper != nil {
		_ = w.r.reaper.Wait(run.cmd)
	} else {
		_ = run.cmd.Wait()
	}
	run.reaped = true
	run.mu.Unlock()

	output := make(chan struct{})
	go func() { copied.Wait(); close(output) }()
	select {
	case <-output:
	case <-time.After(outputGrace):
		_ = outR.SetReadDeadline(time.Now())
		_ = errR.SetReadDeadline(time.Now())
		<-output
	}
	_ = outR.Close()
	_ = errR.Close()
	run.log.finish()

	run.finishedAt = metav1.Now().Rfc3339Copy()
	switch {
	case waitErr != nil:
		run.exitCode = 128
		log.Warn("wait for container", "error", waitErr)
	case st.Signal != 0:
		run.exitCode = 128 + int32(st.Signal)
	default:
		run.exitCode = int32(st.Code)
	}
	// Read from another goroutine, on another thread: this one may be in
	// the container's mount namespace, where a volume mounted at, say, /tmp
	// hides the runner's files.
	message := make(chan string)
	go func() { message <- terminationMessage(run.termFile, run.policy, run.exitCode, run.log.path) }()
	run.message = <-message
	log.Debug("container exited", "exitCode", run.exitCode)
	close(run.exited)
	w.wakeUp()
}

// terminationMessage is what the kubelet reports as a terminated
// container's message: the end of the termination message file (4096
// bytes at most), or with FallbackToLogsOnError, when that is empty and the
// container failed, the end of its log.
func terminationMessage(file string, policy corev1.TerminationMessagePolicy, exitCode int32, logPath string) string {
	data, err := readTail(file, maxTerminationMessage)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Sprintf("Error on reading termination log %s: %v", file, err)
	}
	if len(data) > 0 || policy != corev1.TerminationMessageFallbackToLogsOnError || exitCode == 0 {
		return string(data)
	}
	var buf bytes.Buffer
	if err := streamLog(context.Background(), &buf, func() {}, logPath, nil, logOptions{Tail: maxFallbackMessageLines}); err != nil {
		return ""
	}
	b := buf.Bytes()
	if len(b) > maxFallbackMessageLogBytes {
		b = b[len(b)-maxFallbackMessageLogBytes:]
	}
	return string(b)
}

// readTail reads the last n bytes of a file.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > n {
		if _, err := f.Seek(fi.Size()-n, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, n))
}

// hiddenBy says whether a mount's target is path or one of its parents.
func hiddenBy(path string, mounts []mount) bool {
	for _, m := range mounts {
		t := filepath.Clean(m.Target)
		if path == t || strings.HasPrefix(path, t+"/") {
			return true
		}
	}
	return false
}
