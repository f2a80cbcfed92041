package controllers

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/executor/mtls"
	"github.com/aerie-run/aerie/runner/runconfig"
)

func executorSession() *aeriev1alpha1.AgentSession {
	s := minimalSession()
	s.Spec.Executors = []aeriev1alpha1.ExecutorSpec{
		{Name: "tools", Image: "golang:1.26", Env: []corev1.EnvVar{{Name: "GOFLAGS", Value: "-mod=mod"}},
			NodeSelector: map[string]string{"pool": "build"}, RuntimeClassName: ptr.To("gvisor"),
			Workspace: &aeriev1alpha1.WorkspaceSpec{
				Git: &aeriev1alpha1.GitWorkspace{URL: "https://git.example.com/tools.git",
					SecretRef: &corev1.LocalObjectReference{Name: "git"}}}},
		{Name: "gpu", Image: "cuda:12", Default: true},
	}
	return s
}

func TestDesiredExecutorPod(t *testing.T) {
	t.Parallel()
	s := executorSession()
	a := attempt{Number: 2, SessionID: testUID, Prompt: "x", Remaining: 10 * time.Minute}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for _, e := range s.Spec.Executors {
		pod := desiredExecutorPod(testConfig(), s, a, e)
		if want := s.Name + "-2-" + e.Name; pod.Name != want {
			t.Errorf("pod name %q, want %q", pod.Name, want)
		}
		if res := policy.AggregateCheckResults(eval.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec)); !res.Allowed {
			t.Errorf("%s: violates Pod Security restricted: %s: %s", e.Name, res.ForbiddenReason(), res.ForbiddenDetail())
		}
		if pod.Labels[labelComponent] != componentExecutor || pod.Labels[LabelExecutor] != e.Name ||
			pod.Labels[LabelSessionUID] != string(s.UID) || pod.Labels[LabelAttempt] != "2" {
			t.Errorf("%s: labels %v", e.Name, pod.Labels)
		}
		if !isExecutorPod(pod) || isExecutorPod(desiredPod(testConfig(), s, a)) {
			t.Error("isExecutorPod does not tell executor pods from runner pods")
		}
		if ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) || pod.Spec.ServiceAccountName != "" {
			t.Errorf("%s: service account token mounted or account set", e.Name)
		}
		if got := ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0); got <= 600 {
			t.Errorf("%s: activeDeadlineSeconds %d, want more than the 600 s left", e.Name, got)
		}
		c := pod.Spec.Containers[0]
		if c.Image != e.Image || !slices.Contains(c.Command, "$(AERIE_POD_IP):7443") || !slices.Contains(c.Command, executorCredentialFile) {
			t.Errorf("%s: container %s %v", e.Name, c.Image, c.Command)
		}
		// Only its own key, and no Secret in any environment.
		var secrets []string
		for _, v := range pod.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == credentialsName(s.Name, 2) {
				for _, it := range v.Secret.Items {
					secrets = append(secrets, it.Key)
				}
			}
		}
		if want := []string{e.Name + ".pem"}; !slices.Equal(secrets, want) {
			t.Errorf("%s: credential keys mounted %v, want %v", e.Name, secrets, want)
		}
		for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
			for _, v := range c.Env {
				if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil && c.Name != ContainerGitClone {
					t.Errorf("%s: container %s has Secret env %s", e.Name, c.Name, v.Name)
				}
			}
		}
	}
	tools := desiredExecutorPod(testConfig(), s, a, s.Spec.Executors[0])
	var inits []string
	for _, c := range tools.Spec.InitContainers {
		inits = append(inits, c.Name)
	}
	if want := []string{ContainerAerieBin, ContainerGitClone}; !slices.Equal(inits, want) {
		t.Errorf("tools init containers %v, want %v", inits, want)
	}
	if tools.Spec.NodeSelector["pool"] != "build" || ptr.Deref(tools.Spec.RuntimeClassName, "") != "gvisor" {
		t.Errorf("tools scheduling %v %v", tools.Spec.NodeSelector, tools.Spec.RuntimeClassName)
	}
}

func TestRunnerPodWithExecutors(t *testing.T) {
	t.Parallel()
	s := executorSession()
	a := attempt{Number: 1, SessionID: testUID, Prompt: "x", Executors: map[string]string{"tools": "10.0.0.7", "gpu": "fd00::9"}}
	pod := desiredPod(testConfig(), s, a)
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		has := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volumeCredential })
		if has != (c.Name == ContainerAgent) {
			t.Errorf("container %s mounts the runner's credential: %t", c.Name, has)
		}
	}
	cm, err := desiredConfigMap(s, a)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runconfig.Parse([]byte(cm.Data[runconfig.FileName]))
	if err != nil {
		t.Fatal(err)
	}
	want := []runconfig.RemoteExecutor{
		{Name: "tools", Address: "10.0.0.7:7443", Credential: runconfig.DefaultExecutorCredential,
			Workspace: runconfig.DefaultWorkspace},
		{Name: "gpu", Address: "[fd00::9]:7443", Default: true, Credential: runconfig.DefaultExecutorCredential,
			Workspace: runconfig.DefaultWorkspace},
	}
	if !slices.Equal(rc.Executors, want) {
		t.Errorf("runner config executors %+v, want %+v", rc.Executors, want)
	}
}

func TestDesiredCredentials(t *testing.T) {
	t.Parallel()
	s := executorSession()
	a := attempt{Number: 1, Remaining: time.Hour}
	one, err := desiredCredentials(s, a)
	if err != nil {
		t.Fatal(err)
	}
	two, err := desiredCredentials(s, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"runner.pem", "tools.pem", "gpu.pem"} {
		c, err := mtls.Parse(one.Data[key], key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if want := strings.TrimSuffix(key, ".pem"); c.Name() != want {
			t.Errorf("%s names %q", key, c.Name())
		}
		if until := time.Until(c.NotAfter()); until < time.Hour || until > 3*time.Hour {
			t.Errorf("%s expires in %s, want the attempt's hour and one more", key, until)
		}
		if bytes.Equal(one.Data[key], two.Data[key]) {
			t.Errorf("%s is the same in two sets", key)
		}
	}
	if len(one.Data) != 3 || !ptr.Deref(one.Immutable, false) {
		t.Errorf("secret has %d keys, immutable %v", len(one.Data), one.Immutable)
	}
}

func TestExecutorPodName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 253)
	for _, name := range []string{executorPodName(long, 10, "tools"), credentialsName(long, 10)} {
		if len(name) > 253 || !strings.HasSuffix(name, "-10-tools") && !strings.HasSuffix(name, "-10-executor-credentials") {
			t.Errorf("name %q (%d)", name, len(name))
		}
	}
	if executorPodName(long, 1, "a") == executorPodName(long[:252]+"b", 1, "a") {
		t.Error("two long session names give one executor pod name")
	}
}

// testExecutors follows a session with an executor pod: created with its
// credentials before the runner pod, which gets its address; lost
// mid-attempt without failing the session; replaced, with new credentials,
// on the retry; deleted once the session finished.
func testExecutors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("exec", func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Executors = []aeriev1alpha1.ExecutorSpec{{Name: "tools", Image: "golang:1.26"}}
	})
	tools := e.executorPod("exec", 1, "tools")
	creds1 := e.secret(credentialsName("exec", 1))
	if _, ok := creds1.Data["runner.pem"]; !ok || len(creds1.Data) != 2 {
		t.Errorf("credentials keys %v", slices.Collect(maps.Keys(creds1.Data)))
	}
	s := e.waitStatus("exec", "waiting for the executor", func(st aeriev1alpha1.AgentSessionStatus) bool {
		return st.Phase == aeriev1alpha1.PhasePending && st.StartTime != nil &&
			len(st.Executors) == 1 && st.Executors[0].Phase == "Pending"
	})
	if c := condition(s, aeriev1alpha1.ConditionPodReady); !strings.Contains(c.Message, "executor pods of tools") {
		t.Errorf("PodReady = %+v", c)
	}
	if err := e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: childName("exec", 1)}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("runner pod before the executor has an address: %v", err)
	}

	e.setExecutorPod(tools, "10.1.0.7")
	pod := e.pod("exec", 1)
	if rc := e.runnerConfig("exec", 1); len(rc.Executors) != 1 || rc.Executors[0].Address != "10.1.0.7:7443" {
		t.Errorf("runner config executors %+v", rc.Executors)
	}
	e.setPod(pod, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	e.waitStatus("exec", "running with its executor", func(st aeriev1alpha1.AgentSessionStatus) bool {
		return st.Phase == aeriev1alpha1.PhaseRunning && len(st.Executors) == 1 &&
			st.Executors[0].Phase == "Running" && st.Executors[0].PodName == tools.Name
	})

	// The executor pod lost: its calls fail, the session goes on.
	if err := e.c.Delete(e.ctx(), tools); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("exec", "executor lost", func(st aeriev1alpha1.AgentSessionStatus) bool {
		return st.Phase == aeriev1alpha1.PhaseRunning && len(st.Executors) == 1 && st.Executors[0].Phase == "Lost"
	})

	// The runner pod lost: the retry gets a new executor pod and new
	// credentials.
	e.setPod(pod, corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}},
		func(st *corev1.PodStatus) { st.Reason, st.Message = "Evicted", "The node was low on memory." })
	tools2 := e.executorPod("exec", 2, "tools")
	creds2 := e.secret(credentialsName("exec", 2))
	if bytes.Equal(creds1.Data["runner.pem"], creds2.Data["runner.pem"]) {
		t.Error("the retry reuses the first attempt's credentials")
	}
	e.setExecutorPod(tools2, "10.1.0.8")
	pod2 := e.pod("exec", 2)
	if rc := e.runnerConfig("exec", 2); len(rc.Executors) != 1 || rc.Executors[0].Address != "10.1.0.8:7443" {
		t.Errorf("attempt 2 executors %+v", rc.Executors)
	}
	e.finishPod(pod2, 0, &runconfig.Report{Outcome: runconfig.OutcomeCompleted, SessionID: string(s.UID)})
	e.waitPhase("exec", aeriev1alpha1.PhaseSucceeded)
	e.waitFor("executor pods deleted", func() error {
		for _, p := range e.pods("exec") {
			if isExecutorPod(&p) && p.DeletionTimestamp.IsZero() {
				return fmt.Errorf("executor pod %s is left", p.Name)
			}
		}
		return nil
	})
}

// executorPod waits for the pod of executor exec in attempt n.
func (e *env) executorPod(session string, n int32, exec string) *corev1.Pod {
	e.t.Helper()
	var p corev1.Pod
	name := executorPodName(session, n, exec)
	e.waitFor("executor pod "+name, func() error {
		return e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: name}, &p)
	})
	return &p
}

// secret waits for the Secret name.
func (e *env) secret(name string) *corev1.Secret {
	e.t.Helper()
	var s corev1.Secret
	e.waitFor("secret "+name, func() error {
		return e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: name}, &s)
	})
	return &s
}

// setExecutorPod makes an executor pod running at ip, as the kubelet would.
func (e *env) setExecutorPod(p *corev1.Pod, ip string) {
	e.t.Helper()
	e.waitFor("executor pod status update", func() error {
		var cur corev1.Pod
		if err := e.c.Get(e.ctx(), types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, &cur); err != nil {
			return err
		}
		cur.Status.Phase, cur.Status.PodIP = corev1.PodRunning, ip
		cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerExecutor, Image: cur.Spec.Containers[0].Image,
			Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		return e.c.Status().Update(e.ctx(), &cur)
	})
}
