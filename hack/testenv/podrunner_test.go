package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/aerie-run/aerie/runner/process"
)

// testReaper reaps for the whole test binary: the test process is a child
// subreaper, as the runner is in the demo, so that orphans of torn-down
// containers come back to it, and a check that nothing is left behind
// sees them. It is set before any test runs.
var testReaper *process.Reaper

func TestMain(m *testing.M) {
	// Without a logger controller-runtime (envtest) prints a warning with
	// a goroutine stack, which reads like a panic in a failed run's output.
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	RunSubreaped(m, &testReaper)
}

// tagEnv is set in every container of the pod runner tests to the test's
// namespace; descendants inherit it, so /proc shows what a test left.
const tagEnv = "PODRUNNER_TEST_NAMESPACE"

// podRunnerEnv is a control plane with two runners: one with the default
// scheduler name and the best mount mode of the machine, and one that
// always maps paths and binds only pods of its own scheduler name.
type podRunnerEnv struct {
	cp      *ControlPlane
	cs      kubernetes.Interface
	runner  *PodRunner
	pathMap *PodRunner
}

func startPodRunnerEnv(t *testing.T) *podRunnerEnv {
	t.Helper()
	cp := StartControlPlane(t)
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := filepathLookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	commands := map[string]string{"aerie": sh}
	return &podRunnerEnv{
		cp: cp,
		cs: cs,
		runner: StartPodRunner(t, cp, PodRunnerOptions{
			Reaper:   testReaper,
			Commands: commands,
		}),
		pathMap: StartPodRunner(t, cp, PodRunnerOptions{
			NodeName:      "aerie-local-path-map",
			SchedulerName: "aerie-path-map",
			Mounts:        MountPathMap,
			Reaper:        testReaper,
			Commands:      commands,
		}),
	}
}

func filepathLookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", name)
}

// sh is a container that runs script with sh.
func sh(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: "ignored.example/image:1", Command: []string{"sh", "-c", script}}
}

// newPod returns a pod of the test's namespace whose containers carry the
// test's tag, restartPolicy Never unless changed.
func newPod(ns, name string, containers ...corev1.Container) *corev1.Pod {
	for i := range containers {
		containers[i].Env = append(containers[i].Env, corev1.EnvVar{Name: tagEnv, Value: ns})
	}
	grace := int64(5)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			Containers:                    containers,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
		},
	}
}

func (e *podRunnerEnv) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.cp.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// waitPod polls the pod until done says it is what the test waits for.
func (e *podRunnerEnv) waitPod(t *testing.T, ns, name, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		pod, err := e.cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod %s: %v", name, err)
		}
		if done(pod) {
			return pod
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(pod.Status, "", "  ")
			t.Fatalf("pod %s: not %s after 90s; status:\n%s", name, what, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil {
			return false
		}
	}
	return true
}

// containerStatus returns the status of the named container or init
// container.
func containerStatus(t *testing.T, pod *corev1.Pod, name string) corev1.ContainerStatus {
	t.Helper()
	for _, s := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("pod %s has no status for container %s", pod.Name, name)
	return corev1.ContainerStatus{}
}

// terminated returns the terminated state of a container, failing the test
// when it is not terminated.
func terminated(t *testing.T, pod *corev1.Pod, name string) *corev1.ContainerStateTerminated {
	t.Helper()
	s := containerStatus(t, pod, name)
	if s.State.Terminated == nil {
		t.Fatalf("container %s of pod %s is not terminated: %+v", name, pod.Name, s.State)
	}
	return s.State.Terminated
}

func condition(pod *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// noProcessLeft checks, until it holds or a deadline passes, that no
// process carries the namespace's tag.
func noProcessLeft(t *testing.T, ns string) {
	t.Helper()
	want := []byte(tagEnv + "=" + ns + "\x00")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil || !bytes.Contains(env, want) {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			left = append(left, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of %s left behind:\n%s", ns, strings.Join(left, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits until a file exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 60s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

func TestPodRunner(t *testing.T) {
	e := startPodRunnerEnv(t)
	if e.runner.Mounts() == MountAuto || e.pathMap.Mounts() != MountPathMap {
		t.Fatalf("mount modes: %v and %v", e.runner.Mounts(), e.pathMap.Mounts())
	}
	t.Logf("mount mode of the default runner: %v", e.runner.Mounts())

	t.Run("Node", func(t *testing.T) {
		t.Parallel()
		node, err := e.cs.CoreV1().Nodes().Get(t.Context(), e.runner.NodeName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if condition := nodeReady(node); condition != corev1.ConditionTrue {
			t.Errorf("node Ready = %q, want True", condition)
		}
		if node.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
			t.Error("node has no kubelet endpoint port")
		}
		if q := node.Status.Allocatable[corev1.ResourcePods]; q.Value() != 110 {
			t.Errorf("allocatable pods = %s, want 110", q.String())
		}
	})

	for _, tc := range []struct {
		name string
		r    *PodRunner
	}{{"Volumes", e.runner}, {"VolumesPathMap", e.pathMap}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testVolumes(t, e, tc.r)
		})
	}
	t.Run("InitContainers", func(t *testing.T) { t.Parallel(); testInitContainers(t, e) })
	t.Run("DeletionGrace", func(t *testing.T) { t.Parallel(); testDeletionGrace(t, e) })
	t.Run("ActiveDeadline", func(t *testing.T) { t.Parallel(); testActiveDeadline(t, e) })
	t.Run("RunAsUser", func(t *testing.T) { t.Parallel(); testRunAsUser(t, e) })
	t.Run("Logs", func(t *testing.T) { t.Parallel(); testLogs(t, e) })
	t.Run("Restart", func(t *testing.T) { t.Parallel(); testRestart(t, e) })
	t.Run("PersistentVolumeClaim", func(t *testing.T) { t.Parallel(); testPVC(t, e) })
	t.Run("StartErrors", func(t *testing.T) { t.Parallel(); testStartErrors(t, e) })
	t.Run("Projected", func(t *testing.T) { t.Parallel(); testProjected(t, e) })
	t.Run("RunnerRestart", func(t *testing.T) { t.Parallel(); testRunnerRestart(t, e) })
	t.Run("Sidecars", func(t *testing.T) { t.Parallel(); testSidecars(t, e) })
	t.Run("MountOverTmp", func(t *testing.T) { t.Parallel(); testMountOverTmp(t, e) })
}

func nodeReady(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// testVolumes runs a pod of two containers that share an emptyDir, read a
// ConfigMap layer with an executable at a nested path, and take env from a
// Secret, and checks what each saw and how they ended.
func testVolumes(t *testing.T, e *podRunnerEnv, r *PodRunner) {
	ns := e.cp.Namespace(t)
	e.create(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "layer"},
		Data: map[string]string{
			"greeting": "hello from the layer",
			// The script finds the greeting from its own path: under a
			// path map, a path written in a file is not rewritten.
			"hello.sh": "#!/bin/sh\necho \"$GREETING_PREFIX: $(cat \"$(dirname \"$0\")/../../greeting\")\"\n",
			"unused":   "not projected",
		},
	})
	e.create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		Data:       map[string][]byte{"token": []byte("s3cret"), "user": []byte("alice")},
	})
	pod := newPod(ns, "volumes",
		corev1.Container{
			Name: "writer", Image: "ignored",
			// "aerie" is a Commands entry (sh, here).
			Command: []string{"aerie", "-c", `
echo "user=$CREDS_user" > /workspace/.from-writer
mv /workspace/.from-writer /workspace/from-writer
while [ ! -e /workspace/from-reader ]; do sleep 0.02; done
printf '%s' "$MSG" > /dev/termination-log`},
			Env: []corev1.EnvVar{
				{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}},
				{Name: "MSG", Value: "token=$(TOKEN) $$(TOKEN) $(UNDEFINED)"},
			},
			EnvFrom:      []corev1.EnvFromSource{{Prefix: "CREDS_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}},
		},
		corev1.Container{
			Name: "reader", Image: "ignored",
			Command:    []string{"sh", "-c"},
			Args:       []string{`exec > /dev/termination-log; while [ ! -e /workspace/from-writer ]; do sleep 0.02; done; cat /workspace/from-writer; /etc/aerie/layers/0/tools/bin/hello; stat -c '%a' /etc/aerie/layers/0/tools/bin/hello /etc/aerie/layers/0/greeting; if touch /etc/aerie/layers/0/x 2>/dev/null; then echo layer writable; else echo layer read-only; fi; pwd; hostname; echo "map=${AERIE_PATH_MAP:+set}"; echo "pod=$(POD_NAME)"; touch /workspace/from-reader; exit 3`},
			WorkingDir: "/workspace",
			Env: []corev1.EnvVar{
				{Name: "GREETING_PREFIX", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "layer"}, Key: "greeting"}}},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "workspace", MountPath: "/workspace"},
				{Name: "layer", MountPath: "/etc/aerie/layers/0"},
			},
		},
	)
	pod.Spec.SchedulerName = r.scheduler
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "layer", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "layer"},
			DefaultMode:          ptr(int32(0o440)),
			Items: []corev1.KeyToPath{
				{Key: "greeting", Path: "greeting"},
				{Key: "hello.sh", Path: "tools/bin/hello", Mode: ptr(int32(0o755))},
			},
		}}},
	}
	e.create(t, pod)
	got := e.waitPod(t, ns, pod.Name, "finished", finished)

	if got.Spec.NodeName != r.NodeName() {
		t.Errorf("nodeName = %q, want %q (bound by the runner)", got.Spec.NodeName, r.NodeName())
	}
	if got.Status.Phase != corev1.PodFailed {
		t.Errorf("phase = %s, want Failed (reader exited 3, restartPolicy Never)", got.Status.Phase)
	}
	w := terminated(t, got, "writer")
	if w.ExitCode != 0 || w.Reason != "Completed" {
		t.Errorf("writer: exit %d reason %s, want 0 Completed", w.ExitCode, w.Reason)
	}
	if want := "token=s3cret $(TOKEN) $(UNDEFINED)"; w.Message != want {
		t.Errorf("writer's termination message = %q, want %q", w.Message, want)
	}
	rd := terminated(t, got, "reader")
	if rd.ExitCode != 3 || rd.Reason != "Error" {
		t.Errorf("reader: exit %d reason %s, want 3 Error", rd.ExitCode, rd.Reason)
	}
	lines := strings.Split(strings.TrimSpace(rd.Message), "\n")
	if len(lines) != 9 {
		t.Fatalf("reader's termination message has %d lines, want 9:\n%s", len(lines), rd.Message)
	}
	wantLayer := "layer read-only"
	wantPwd, wantHost, wantMap := "/workspace", pod.Name, "map="
	if r.Mounts() == MountPathMap {
		wantLayer = "layer writable" // readOnly is not enforced under a path map
		wantPwd = r.VolumePath(got, "workspace")
		wantHost, _ = os.Hostname()
		wantMap = "map=set"
	}
	want := []string{
		"user=alice",
		"hello from the layer: hello from the layer",
		"755", "440",
		wantLayer, wantPwd, wantHost, wantMap,
		"pod=volumes",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("what the reader saw (-want +got):\n%s", diff)
	}
	for typ, want := range map[corev1.PodConditionType]corev1.ConditionStatus{
		corev1.PodScheduled: corev1.ConditionTrue, corev1.PodInitialized: corev1.ConditionTrue,
		corev1.ContainersReady: corev1.ConditionFalse, corev1.PodReady: corev1.ConditionFalse,
	} {
		if got := condition(got, typ); got != want {
			t.Errorf("condition %s = %q, want %q", typ, got, want)
		}
	}
	for _, name := range []string{"writer", "reader"} {
		term := terminated(t, got, name)
		if term.StartedAt.IsZero() || term.FinishedAt.Before(&term.StartedAt) {
			t.Errorf("%s: startedAt %v, finishedAt %v", name, term.StartedAt, term.FinishedAt)
		}
	}
	noProcessLeft(t, ns)
}

func testInitContainers(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	workspace := []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}}
	step := func(name, script string) corev1.Container {
		c := sh(name, script)
		c.VolumeMounts = workspace
		return c
	}
	pod := newPod(ns, "ordered", step("main", "cat /workspace/order > /dev/termination-log"))
	pod.Spec.InitContainers = []corev1.Container{
		// The first is the slowest: the others must wait for it all the same.
		step("first", "sleep 0.3; echo first >> /workspace/order"),
		step("second", "echo second >> /workspace/order"),
		step("third", "echo third >> /workspace/order"),
	}
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].Env = append(pod.Spec.InitContainers[i].Env, corev1.EnvVar{Name: tagEnv, Value: ns})
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	e.create(t, pod)

	failing := newPod(ns, "init-fails", sh("main", "echo must not run"))
	failing.Spec.InitContainers = []corev1.Container{sh("bad", "exit 2")}
	e.create(t, failing)

	got := e.waitPod(t, ns, pod.Name, "finished", finished)
	if got.Status.Phase != corev1.PodSucceeded {
		t.Errorf("phase = %s, want Succeeded", got.Status.Phase)
	}
	if m := terminated(t, got, "main").Message; m != "first\nsecond\nthird\n" {
		t.Errorf("order = %q, want first, second, third", m)
	}
	for _, name := range []string{"first", "second", "third"} {
		if term := terminated(t, got, name); term.ExitCode != 0 || term.Reason != "Completed" {
			t.Errorf("init container %s: exit %d %s", name, term.ExitCode, term.Reason)
		}
	}
	first, second := terminated(t, got, "first"), terminated(t, got, "second")
	if second.StartedAt.Before(&first.FinishedAt) {
		t.Errorf("second started at %v, before first finished at %v", second.StartedAt, first.FinishedAt)
	}

	got = e.waitPod(t, ns, failing.Name, "finished", finished)
	if got.Status.Phase != corev1.PodFailed {
		t.Errorf("pod with a failing init container: phase = %s, want Failed", got.Status.Phase)
	}
	if term := terminated(t, got, "bad"); term.ExitCode != 2 {
		t.Errorf("bad init container: exit %d, want 2", term.ExitCode)
	}
	if s := containerStatus(t, got, "main"); s.State.Waiting == nil || s.ContainerID != "" {
		t.Errorf("main container after a failed init container: %+v, want waiting, never started", s)
	}
	if c := condition(got, corev1.PodInitialized); c != corev1.ConditionFalse {
		t.Errorf("Initialized = %q, want False", c)
	}
	noProcessLeft(t, ns)
}

// testDeletionGrace deletes a pod whose containers are a process that
// ignores SIGTERM and one that exits on it, and checks the kubelet's way:
// SIGTERM to both, SIGKILL for the stubborn one after the grace period,
// the final status written, then the object removed.
func testDeletionGrace(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	workspace := []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}}
	stubborn := sh("stubborn", `trap 'echo TERM >> /workspace/stubborn-signals' TERM; touch /workspace/stubborn-ready; while :; do sleep 0.05; done`)
	stubborn.VolumeMounts = workspace
	cooperative := sh("cooperative", `trap 'exit 143' TERM; touch /workspace/cooperative-ready; sleep 3600 & wait`)
	cooperative.VolumeMounts = workspace
	pod := newPod(ns, "graceful", stubborn, cooperative)
	pod.Spec.TerminationGracePeriodSeconds = ptr(int64(2))
	pod.Spec.Volumes = []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	e.create(t, pod)
	got := e.waitPod(t, ns, pod.Name, "running", running)
	ws := e.runner.VolumePath(got, "workspace")
	waitFile(t, filepath.Join(ws, "stubborn-ready"))
	waitFile(t, filepath.Join(ws, "cooperative-ready"))

	ctx := t.Context()
	pods := e.cs.CoreV1().Pods(ns)
	wt, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: got.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Stop()
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// graceEnd is the deletion timestamp the deletion set; last is the
	// last state before removal. The runner's final delete (grace 0) moves
	// the timestamp to its own time, so last's says nothing of the grace.
	var graceEnd *metav1.Time
	var last *corev1.Pod
	timeout := time.After(90 * time.Second)
events:
	for {
		select {
		case ev, ok := <-wt.ResultChan():
			if !ok {
				t.Fatal("watch ended before the pod was removed")
			}
			p, _ := ev.Object.(*corev1.Pod)
			if ev.Type == watch.Deleted {
				break events
			}
			if p == nil {
				continue
			}
			if graceEnd == nil && p.DeletionTimestamp != nil {
				graceEnd = p.DeletionTimestamp
			}
			last = p
		case <-timeout:
			t.Fatal("pod not removed within 90s of its deletion")
		}
	}
	if last == nil || graceEnd == nil {
		t.Fatalf("no status written after the deletion: %+v", last)
	}
	s := terminated(t, last, "stubborn")
	if s.ExitCode != 137 {
		t.Errorf("stubborn: exit %d, want 137 (SIGKILL)", s.ExitCode)
	}
	// The API server sets the deletion timestamp to the deletion time plus
	// the grace period: SIGKILL may not come before it. (Both are whole
	// seconds, rounded down alike.)
	if s.FinishedAt.Before(graceEnd) {
		t.Errorf("stubborn killed at %v, before the grace period ended at %v", s.FinishedAt, graceEnd)
	}
	if c := terminated(t, last, "cooperative"); c.ExitCode != 143 {
		t.Errorf("cooperative: exit %d, want 143", c.ExitCode)
	}
	signals, err := os.ReadFile(filepath.Join(ws, "stubborn-signals"))
	if err != nil || !strings.HasPrefix(string(signals), "TERM") {
		t.Errorf("stubborn got no SIGTERM before SIGKILL: %q, %v", signals, err)
	}
	if last.Status.Phase != corev1.PodFailed {
		t.Errorf("final phase = %s, want Failed", last.Status.Phase)
	}
	noProcessLeft(t, ns)
}

func testActiveDeadline(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	pod := newPod(ns, "deadline", sh("sleeper", "sleep 3600"))
	pod.Spec.ActiveDeadlineSeconds = ptr(int64(2))
	e.create(t, pod)
	got := e.waitPod(t, ns, pod.Name, "finished", finished)
	if got.Status.Phase != corev1.PodFailed || got.Status.Reason != "DeadlineExceeded" {
		t.Errorf("phase %s reason %q, want Failed DeadlineExceeded", got.Status.Phase, got.Status.Reason)
	}
	if term := terminated(t, got, "sleeper"); term.ExitCode != 143 {
		t.Errorf("sleeper: exit %d, want 143 (SIGTERM)", term.ExitCode)
	}
	// The object stays: only deletion removes it.
	if _, err := e.cs.CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("pod past its deadline: %v", err)
	}
	noProcessLeft(t, ns)
}

func testRunAsUser(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	ids := `echo "$(id -u) $(id -g)" > /dev/termination-log; echo shared > /workspace/$(id -u)`
	first := sh("first", ids)
	first.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(1000))}
	second := sh("second", ids)
	second.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr(int64(2000))}
	nonRoot := sh("nonroot", ids)
	nonRoot.SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr(true)}
	for _, c := range []*corev1.Container{&first, &second, &nonRoot} {
		c.VolumeMounts = []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}}
	}
	pod := newPod(ns, "users", first, second, nonRoot)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsGroup: ptr(int64(3000))}
	pod.Spec.Volumes = []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	e.create(t, pod)
	got := e.waitPod(t, ns, pod.Name, "finished", finished)
	if got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("phase = %s, want Succeeded: %+v", got.Status.Phase, got.Status.ContainerStatuses)
	}
	want := map[string]string{"first": "1000 1000\n", "second": "2000 3000\n", "nonroot": "65532 3000\n"}
	if os.Geteuid() != 0 {
		// Not root: the runner cannot switch users and runs all as itself.
		self := fmt.Sprintf("%d %d\n", os.Geteuid(), os.Getegid())
		want = map[string]string{"first": self, "second": self, "nonroot": self}
	}
	for name, ids := range want {
		if m := terminated(t, got, name).Message; m != ids {
			t.Errorf("%s ran as %q, want %q", name, m, ids)
		}
	}
	noProcessLeft(t, ns)
}

func testLogs(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	pod := newPod(ns, "talkative",
		sh("talker", `printf 'one\ntwo\nthree\n'`),
		sh("grumbler", `echo oops >&2; printf 'no newline' >&2`),
	)
	follower := newPod(ns, "follower", sh("counter", `for i in 1 2 3; do echo $i; sleep 0.3; done`))
	e.create(t, pod)
	e.create(t, follower)
	ctx := t.Context()

	e.waitPod(t, ns, follower.Name, "running", running)
	out, err := e.cp.Kubectl(ctx, "logs", "-n", ns, "--follow", follower.Name)
	if err != nil {
		t.Fatal(err)
	}
	if out != "1\n2\n3\n" {
		t.Errorf("kubectl logs --follow = %q, want the three lines", out)
	}

	e.waitPod(t, ns, pod.Name, "finished", finished)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", "talker"}, "one\ntwo\nthree\n"},
		{[]string{"-c", "talker", "--tail=1"}, "three\n"},
		{[]string{"-c", "talker", "--limit-bytes=5"}, "one\nt"},
		{[]string{"-c", "grumbler"}, "oops\nno newline"},
	} {
		out, err := e.cp.Kubectl(ctx, append([]string{"logs", "-n", ns, pod.Name}, tc.args...)...)
		if err != nil {
			t.Errorf("kubectl logs %v: %v", tc.args, err)
			continue
		}
		if out != tc.want {
			t.Errorf("kubectl logs %v = %q, want %q", tc.args, out, tc.want)
		}
	}
	out, err = e.cp.Kubectl(ctx, "logs", "-n", ns, pod.Name, "-c", "talker", "--timestamps")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for line := range strings.Lines(out) {
		ts, text, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Errorf("kubectl logs --timestamps: line %q has no timestamp: %v", line, err)
		}
		texts = append(texts, text)
	}
	if diff := cmp.Diff([]string{"one", "two", "three"}, texts); diff != "" {
		t.Errorf("kubectl logs --timestamps (-want +got):\n%s", diff)
	}
	if _, err := e.cp.Kubectl(ctx, "logs", "-n", ns, pod.Name, "-c", "talker", "--previous"); err == nil {
		t.Error("kubectl logs --previous of a container that never restarted succeeded")
	}
	noProcessLeft(t, ns)
}

func testRestart(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	flaky := sh("flaky", `n=$(cat /workspace/n 2>/dev/null || echo 0); echo "attempt $n"; echo $((n+1)) > /workspace/n; [ "$n" -ge 1 ]`)
	flaky.VolumeMounts = []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}}
	pod := newPod(ns, "flaky", flaky)
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	pod.Spec.Volumes = []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	e.create(t, pod)
	got := e.waitPod(t, ns, pod.Name, "finished", finished)
	if got.Status.Phase != corev1.PodSucceeded {
		t.Errorf("phase = %s, want Succeeded after one restart", got.Status.Phase)
	}
	s := containerStatus(t, got, "flaky")
	if s.RestartCount != 1 {
		t.Errorf("restartCount = %d, want 1", s.RestartCount)
	}
	if s.LastTerminationState.Terminated == nil || s.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("lastState = %+v, want terminated with exit code 1", s.LastTerminationState)
	}
	always := newPod(ns, "always", sh("main", "echo run"))
	always.Spec.RestartPolicy = corev1.RestartPolicyAlways
	e.create(t, always)
	ctx := t.Context()
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, "attempt 1\n"}, {[]string{"--previous"}, "attempt 0\n"}} {
		out, err := e.cp.Kubectl(ctx, append([]string{"logs", "-n", ns, pod.Name}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if out != tc.want {
			t.Errorf("kubectl logs %v = %q, want %q", tc.args, out, tc.want)
		}
	}

	// restartPolicy Always restarts a container that succeeded, too, and
	// the pod runs until it is deleted.
	got = e.waitPod(t, ns, always.Name, "restarted twice", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	if got.Status.Phase != corev1.PodRunning {
		t.Errorf("restartPolicy Always: phase %s, want Running", got.Status.Phase)
	}
	if err := e.cs.CoreV1().Pods(ns).Delete(ctx, always.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, ns, always.Name)
	noProcessLeft(t, ns)
}

// waitGone waits until the pod object is removed.
func waitGone(t *testing.T, e *podRunnerEnv, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := e.cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still there 60s after its deletion: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testPVC(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	e.create(t, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})
	withClaim := func(name, script string) *corev1.Pod {
		c := sh("main", script)
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		p := newPod(ns, name, c)
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		return p
	}
	e.create(t, withClaim("write", "echo kept > /data/file"))
	e.waitPod(t, ns, "write", "finished", finished)
	e.create(t, withClaim("read", "cat /data/file > /dev/termination-log"))
	got := e.waitPod(t, ns, "read", "finished", finished)
	if m := terminated(t, got, "main").Message; m != "kept\n" {
		t.Errorf("second pod read %q from the claim, want %q", m, "kept\n")
	}
	if b, err := os.ReadFile(filepath.Join(e.runner.VolumePath(got, "data"), "file")); err != nil || string(b) != "kept\n" {
		t.Errorf("the claim's directory holds %q, %v", b, err)
	}
	noProcessLeft(t, ns)
}

// testStartErrors covers containers that cannot start: a command that does
// not exist (StartError), and a missing ConfigMap (waiting, retried until
// it appears).
func testStartErrors(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	missing := newPod(ns, "missing-command", corev1.Container{Name: "main", Image: "x", Command: []string{"no-such-command-aerie"}})
	e.create(t, missing)
	got := e.waitPod(t, ns, missing.Name, "finished", finished)
	if term := terminated(t, got, "main"); term.ExitCode != 128 || term.Reason != "StartError" || !strings.Contains(term.Message, "no-such-command-aerie") {
		t.Errorf("missing command: %+v, want exit 128 StartError naming the command", term)
	}

	c := sh("main", `printf '%s' "$LATE" > /dev/termination-log; exit 1`)
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	c.Env = []corev1.EnvVar{{Name: "LATE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "late"}, Key: "value"}}}}
	fallback := sh("fallback", `echo last words; exit 4`)
	fallback.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	late := newPod(ns, "late-config", c, fallback)
	e.create(t, late)
	e.waitPod(t, ns, late.Name, "waiting for its ConfigMap", func(p *corev1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "main" && s.State.Waiting != nil && s.State.Waiting.Reason == "CreateContainerConfigError" {
				return strings.Contains(s.State.Waiting.Message, `configmap "late" not found`)
			}
		}
		return false
	})
	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}, Data: map[string]string{"value": "arrived"}})
	got = e.waitPod(t, ns, late.Name, "finished", finished)
	if m := terminated(t, got, "main").Message; m != "arrived" {
		t.Errorf("late ConfigMap: message %q, want %q", m, "arrived")
	}
	if m := terminated(t, got, "fallback").Message; m != "last words\n" {
		t.Errorf("FallbackToLogsOnError: message %q, want the log's end", m)
	}

	// A pod deleted before it ever ran is removed all the same.
	blocked := newPod(ns, "blocked", sh("main", "true"))
	blocked.Spec.Volumes = []corev1.Volume{{Name: "nothing", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "never"}}}}}
	e.create(t, blocked)
	e.waitPod(t, ns, blocked.Name, "bound", func(p *corev1.Pod) bool { return p.Status.StartTime != nil })
	if err := e.cs.CoreV1().Pods(ns).Delete(t.Context(), blocked.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, ns, blocked.Name)
	noProcessLeft(t, ns)
}

// BenchmarkPodRunnerLifecycle measures one pod through the runner: created
// unscheduled, bound, run (sh -c true) to Succeeded, deleted and removed.
func BenchmarkPodRunnerLifecycle(b *testing.B) {
	cp := StartControlPlane(b)
	StartPodRunner(b, cp, PodRunnerOptions{Reaper: testReaper, Logger: slog.New(slog.DiscardHandler)})
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		b.Fatal(err)
	}
	ns := cp.Namespace(b)
	pods := cs.CoreV1().Pods(ns)
	ctx := b.Context()
	wt, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer wt.Stop()
	await := func(name string, done func(watch.EventType, *corev1.Pod) bool) {
		for {
			select {
			case ev, ok := <-wt.ResultChan():
				if !ok {
					b.Fatal("watch ended")
				}
				if p, _ := ev.Object.(*corev1.Pod); p != nil && p.Name == name && done(ev.Type, p) {
					return
				}
			case <-time.After(time.Minute):
				b.Fatalf("pod %s: nothing within a minute", name)
			}
		}
	}
	for i := 0; b.Loop(); i++ {
		name := "p-" + strconv.Itoa(i)
		if _, err := pods.Create(ctx, newPod(ns, name, sh("main", "true")), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		await(name, func(_ watch.EventType, p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		await(name, func(t watch.EventType, _ *corev1.Pod) bool { return t == watch.Deleted })
	}
}

// testProjected reads a projected volume of a Secret, a ConfigMap and the
// downward API, made readable to another user by fsGroup.
func testProjected(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"token": []byte("s3cret\n")}})
	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "layer"}, Data: map[string]string{"greeting": "hi\n"}})
	c := sh("main", `cd /run/aerie && cat token greeting labels > /dev/termination-log && echo >> /dev/termination-log && stat -c '%a %g' token >> /dev/termination-log`)
	c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr(int64(1000))}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "run", MountPath: "/run/aerie"}}
	pod := newPod(ns, "projected", c)
	pod.Labels = map[string]string{"app": "demo"}
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr(int64(2000))}
	pod.Spec.Volumes = []corev1.Volume{{Name: "run", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr(int32(0o400)),
		Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "layer"}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
		},
	}}}}
	e.create(t, pod)
	got := e.waitPod(t, ns, pod.Name, "finished", finished)
	want := "s3cret\nhi\napp=\"demo\"\n440 2000\n"
	if os.Geteuid() != 0 {
		want = fmt.Sprintf("s3cret\nhi\napp=\"demo\"\n400 %d\n", os.Getegid()) // no fsGroup without root
	}
	if m := terminated(t, got, "main").Message; m != want {
		t.Errorf("projected volume read as %q, want %q", m, want)
	}
	noProcessLeft(t, ns)
}

// testRunnerRestart stops a runner with a pod running and a pod finished,
// and starts another for the same node: the finished pod stays as it was,
// the running one has lost its containers, as after a node restart.
func testRunnerRestart(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	opts := PodRunnerOptions{NodeName: "aerie-local-restarted", SchedulerName: "restarted", Dir: t.TempDir(), Reaper: testReaper}
	run := func() (stop func()) {
		r, err := NewPodRunner(e.cp.Config, opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		select {
		case <-r.Ready():
		case err := <-done:
			t.Fatalf("run: %v", err)
		}
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}
	stop := run()
	done := newPod(ns, "done", sh("main", "true"))
	long := newPod(ns, "long", sh("main", "sleep 3600"))
	for _, p := range []*corev1.Pod{done, long} {
		p.Spec.SchedulerName = "restarted"
		e.create(t, p)
	}
	e.waitPod(t, ns, done.Name, "finished", finished)
	e.waitPod(t, ns, long.Name, "running", running)
	stop()
	noProcessLeft(t, ns)
	node, err := e.cs.CoreV1().Nodes().Get(t.Context(), opts.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := nodeReady(node); c != corev1.ConditionUnknown {
		t.Errorf("node of a stopped runner: Ready = %q, want Unknown", c)
	}

	stop = run()
	defer stop()
	got := e.waitPod(t, ns, long.Name, "finished", finished)
	if term := terminated(t, got, "main"); got.Status.Phase != corev1.PodFailed || term.Reason != "ContainerStatusUnknown" {
		t.Errorf("pod running when its runner stopped: phase %s, container %+v; want Failed, ContainerStatusUnknown", got.Status.Phase, term)
	}
	got, err = e.cs.CoreV1().Pods(ns).Get(t.Context(), done.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if term := terminated(t, got, "main"); got.Status.Phase != corev1.PodSucceeded || term.Reason != "Completed" {
		t.Errorf("pod finished before the restart: phase %s, container %+v; want it unchanged", got.Status.Phase, term)
	}
	// The new runner still removes the pods it inherited.
	if err := e.cs.CoreV1().Pods(ns).Delete(t.Context(), done.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, ns, done.Name)
}

// testSidecars runs pods with a sidecar (an init container with
// restartPolicy Always) and checks the kubelet's way: the sidecar starts
// before the containers that follow it, is restarted when it exits, keeps
// running while the containers run, is stopped after they have exited,
// and the pod's phase follows the containers alone; on deletion the
// sidecar gets its SIGTERM after the containers have exited.
func testSidecars(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	workspace := []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}}
	always := corev1.ContainerRestartPolicyAlways
	withVolume := func(c corev1.Container) corev1.Container {
		c.VolumeMounts = workspace
		c.Env = append(c.Env, corev1.EnvVar{Name: tagEnv, Value: ns})
		return c
	}
	sidecarPod := func(name, sidecarScript, mainScript string) *corev1.Pod {
		side := withVolume(sh("side", sidecarScript))
		side.RestartPolicy = &always
		pod := newPod(ns, name, withVolume(sh("main", mainScript)))
		pod.Spec.InitContainers = []corev1.Container{
			withVolume(sh("setup", "echo setup >> /workspace/order")),
			side,
			withVolume(sh("after", "echo after >> /workspace/order")),
		}
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(3))
		pod.Spec.Volumes = []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		return pod
	}

	t.Run("Completes", func(t *testing.T) {
		// The sidecar fails at its first start, and is restarted all the
		// same, though the pod's restartPolicy is Never.
		pod := sidecarPod("sidecar-completes", `
if [ ! -e /workspace/crashed ]; then touch /workspace/crashed; exit 1; fi
trap 'echo TERM >> /workspace/side-signals; exit 0' TERM
echo side >> /workspace/order
while :; do sleep 0.05; done`, `
while [ ! -e /workspace/release ]; do sleep 0.02; done
echo main >> /workspace/order
# The sidecar still runs when the container ends.
[ ! -e /workspace/side-signals ] || exit 9
cat /workspace/order > /dev/termination-log`)
		e.create(t, pod)
		got := e.waitPod(t, ns, pod.Name, "running with its sidecar", func(p *corev1.Pod) bool {
			if !running(p) {
				return false
			}
			for _, s := range p.Status.InitContainerStatuses {
				if s.Name == "side" {
					return s.State.Running != nil && s.RestartCount == 1
				}
			}
			return false
		})
		if s := containerStatus(t, got, "side"); s.Started == nil || !*s.Started || !s.Ready {
			t.Errorf("running sidecar: started %v, ready %v; want both", s.Started, s.Ready)
		}
		if c := condition(got, corev1.PodInitialized); c != corev1.ConditionTrue {
			t.Errorf("Initialized = %q with the sidecar running, want True", c)
		}
		if c := condition(got, corev1.PodReady); c != corev1.ConditionTrue {
			t.Errorf("Ready = %q, want True", c)
		}
		ws := e.runner.VolumePath(got, "workspace")
		waitFile(t, filepath.Join(ws, "order"))
		if err := os.WriteFile(filepath.Join(ws, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}

		got = e.waitPod(t, ns, pod.Name, "finished", finished)
		if got.Status.Phase != corev1.PodSucceeded {
			t.Errorf("phase = %s, want Succeeded: the containers exited 0", got.Status.Phase)
		}
		main := terminated(t, got, "main")
		if main.ExitCode != 0 {
			t.Errorf("main: exit %d, want 0 (9: the sidecar was stopped before it)", main.ExitCode)
		}
		// The sidecar's first start ran before "after": but its first start
		// exited at once, and the second may have written after "after".
		lines := strings.Fields(main.Message)
		if len(lines) != 4 || lines[0] != "setup" || lines[3] != "main" || !slices.Contains(lines, "after") || !slices.Contains(lines, "side") {
			t.Errorf("order = %q, want setup, side and after (in either order), main", lines)
		}
		side := terminated(t, got, "side")
		if side.ExitCode != 0 {
			t.Errorf("sidecar: exit %d, want 0 (its TERM trap)", side.ExitCode)
		}
		if side.FinishedAt.Before(&main.FinishedAt) {
			t.Errorf("sidecar stopped at %v, before main finished at %v", side.FinishedAt, main.FinishedAt)
		}
		if s := containerStatus(t, got, "side"); s.RestartCount != 1 || s.LastTerminationState.Terminated == nil || s.LastTerminationState.Terminated.ExitCode != 1 {
			t.Errorf("sidecar: restarts %d, last state %+v; want 1 restart after exit 1", s.RestartCount, s.LastTerminationState)
		}
		if signals, err := os.ReadFile(filepath.Join(ws, "side-signals")); err != nil || string(signals) != "TERM\n" {
			t.Errorf("sidecar's signals = %q, %v; want one TERM", signals, err)
		}
		noProcessLeft(t, ns)
	})

	t.Run("Deleted", func(t *testing.T) {
		// The container takes a second to exit on SIGTERM: the sidecar
		// must get its SIGTERM only after that.
		pod := sidecarPod("sidecar-deleted", `
trap 'echo side >> /workspace/stopped; exit 0' TERM
touch /workspace/side-up
while :; do sleep 0.05; done`, `
trap 'sleep 1; [ -e /workspace/stopped ] && echo side-first >> /workspace/stopped; echo main >> /workspace/stopped; exit 143' TERM
touch /workspace/main-up
while :; do sleep 0.05; done`)
		e.create(t, pod)
		got := e.waitPod(t, ns, pod.Name, "running", running)
		ws := e.runner.VolumePath(got, "workspace")
		waitFile(t, filepath.Join(ws, "side-up"))
		waitFile(t, filepath.Join(ws, "main-up"))
		if err := e.cs.CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, e, ns, pod.Name)
		stopped, err := os.ReadFile(filepath.Join(ws, "stopped"))
		if err != nil || string(stopped) != "main\nside\n" {
			t.Errorf("order of the stops = %q, %v; want main, then side", stopped, err)
		}
		noProcessLeft(t, ns)
	})
}

// testMountOverTmp mounts a volume at /tmp, where the runner's Dir and so
// every volume's source lie, beside volumes mounted deeper: each must
// still be the pod's volume.
func testMountOverTmp(t *testing.T, e *podRunnerEnv) {
	ns := e.cp.Namespace(t)
	// "aerie" is a Commands entry: its copy lies below the runner's Dir too.
	c := sh("main", `echo tmp > /tmp/mark && echo data > /run/pod-data/mark && cat /run/pod-data/mark /tmp/mark > /dev/termination-log`)
	c.Command[0] = "aerie"
	c.VolumeMounts = []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "data", MountPath: "/run/pod-data"}}
	pod := newPod(ns, "over-tmp", c)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	e.create(t, pod)
	got := e.waitPod(t, ns, pod.Name, "finished", finished)
	if got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("phase = %s, want Succeeded; main: %+v", got.Status.Phase, containerStatus(t, got, "main").State)
	}
	if m := terminated(t, got, "main").Message; m != "data\ntmp\n" {
		t.Errorf("termination message = %q, want data, tmp", m)
	}
	for vol, want := range map[string]string{"tmp": "tmp\n", "data": "data\n"} {
		if b, err := os.ReadFile(filepath.Join(e.runner.VolumePath(got, vol), "mark")); err != nil || string(b) != want {
			t.Errorf("volume %s holds %q, %v; want %q", vol, b, err, want)
		}
	}
	noProcessLeft(t, ns)
}
