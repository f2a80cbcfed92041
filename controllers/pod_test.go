package controllers

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const testUID = "6f1c2b3a-4d5e-4a52-9d0e-0b7e2c1a3f7d"

func testConfig() Config {
	return DefaultConfig("aerie-system", "ghcr.io/aerie-run/aerie:test")
}

func minimalSession() *aeriev1alpha1.AgentSession {
	return &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-tests", Namespace: "team-a", UID: testUID, Generation: 1},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Fix the tests.",
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5",
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
			},
		},
	}
}

func fullSession() *aeriev1alpha1.AgentSession {
	s := minimalSession()
	s.Spec.Model.MaxOutputTokens = ptr.To(int64(16384))
	s.Spec.Workspace = &aeriev1alpha1.WorkspaceSpec{
		Git: &aeriev1alpha1.GitWorkspace{URL: "https://github.com/example/service.git", Ref: "main", Depth: 50, SecretRef: &corev1.LocalObjectReference{Name: "git-credentials"},
			Push: &aeriev1alpha1.GitPush{CommitMessage: "Fix the tests", SecretRef: &corev1.LocalObjectReference{Name: "git-push-credentials"}}},
		WorkingDir: "services/billing",
	}
	s.Spec.Budget = &aeriev1alpha1.Budget{MaxDuration: &metav1.Duration{Duration: 30 * time.Minute}, MaxTurns: ptr.To(int32(60)), MaxTokens: ptr.To(int64(4000000))}
	s.Spec.Runner = &aeriev1alpha1.RunnerSpec{
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
		},
		Env:                []corev1.EnvVar{{Name: "GOFLAGS", Value: "-mod=mod"}},
		ServiceAccountName: "agents",
		RuntimeClassName:   ptr.To("gvisor"),
		NodeSelector:       map[string]string{"pool": "agents"},
		Tolerations:        []corev1.Toleration{{Key: "agents", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}
	s.Spec.Toolset = "review"
	s.Spec.HookApproval = aeriev1alpha1.HookApprovalAllow
	s.Spec.Secrets = []aeriev1alpha1.SecretEnv{
		{Name: "SENTRY_AUTH_TOKEN", SecretKeyRef: aeriev1alpha1.KeyReference{Name: "sentry", Key: "token"}},
		{Name: "GITHUB_TOKEN", SecretKeyRef: aeriev1alpha1.KeyReference{Name: "github-mcp", Key: "token"}},
	}
	return s
}

func fullAttempt(t testing.TB) attempt {
	t.Helper()
	spec, err := configMapLayer("team-go-tooling", runconfig.LayerSpec, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "team-go-tooling", Namespace: "team-a", Annotations: map[string]string{runconfig.ExecutablesAnnotation: `["tools/bin/lint.sh"]`}},
		Data:       map[string]string{"tools__lint.toml": "name = 'lint'", "tools__bin__lint.sh": "#!/bin/sh\n"},
	})
	if err != nil {
		t.Fatal(err)
	}
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-defaults", Namespace: "aerie-system", Labels: map[string]string{runconfig.LayerLabel: ""}},
		Data:       map[string]string{"SYSTEM.md": "Be careful."},
	}
	files, err := runconfig.LayerFiles(src.Data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	platform, err := configMapLayer(src.Name, runconfig.LayerPlatform, desiredMirror(src, "team-a", runconfig.LayerPlatform, runconfig.LayerDigest(files)))
	if err != nil {
		t.Fatal(err)
	}
	pvc := volumeLayer(aeriev1alpha1.ExtensionLayer{PersistentVolumeClaim: &aeriev1alpha1.PVCLayer{ClaimName: "shared-skills", SubPath: "go"}})
	img := volumeLayer(aeriev1alpha1.ExtensionLayer{Name: "skills", Image: &aeriev1alpha1.ImageLayer{Reference: "registry.example.com/skills@sha256:" + strings.Repeat("0a", 32), PullPolicy: corev1.PullIfNotPresent}})
	return attempt{
		Number: 2, SessionID: testUID, Prompt: "Fix the tests.",
		Layers:    []resolvedLayer{spec, pvc, img, platform},
		TrustPins: []runconfig.TrustPins{{Source: "configmap/pins/trust.toml", TOML: "[[pin]]\n"}},
		Remaining: 25 * time.Minute,
	}
}

func TestDesiredPodGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		session *aeriev1alpha1.AgentSession
		attempt func(t testing.TB) attempt
	}{
		{"minimal", minimalSession(), func(testing.TB) attempt { return attempt{Number: 1, SessionID: testUID, Prompt: "Fix the tests."} }},
		{"full", fullSession(), fullAttempt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := tt.attempt(t)
			pod := desiredPod(testConfig(), tt.session, a)
			cm, err := desiredConfigMap(tt.session, a)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for _, obj := range []any{pod, cm} {
				b, err := yaml.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				got = append(append(got, "---\n"...), b...)
			}
			golden := filepath.Join("testdata", "pod-"+tt.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("pod and ConfigMap differ from %s (-want +got); if the change is meant, run go test ./controllers -run TestDesiredPodGolden -update:\n%s", golden, diff)
			}
		})
	}
}

// TestDesiredPodProperties checks what the golden files could hide in
// their length: the secrets go only where they belong.
func TestDesiredPodProperties(t *testing.T) {
	t.Parallel()
	s := fullSession()
	pod := desiredPod(testConfig(), s, fullAttempt(t))
	secretsOf := func(c corev1.Container) []string {
		var out []string
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				out = append(out, "envFrom:"+e.SecretRef.Name)
			}
		}
		return out
	}
	containers := map[string]corev1.Container{}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		containers[c.Name] = c
	}
	// spec.secrets: in the agent container alone, by reference to their
	// keys; the runner is told their names, sorted, and never a value.
	if diff := cmp.Diff([]string{runconfig.DatabaseURLEnv, "ANTHROPIC_API_KEY", "SENTRY_AUTH_TOKEN", "GITHUB_TOKEN"}, secretsOf(containers[ContainerAgent])); diff != "" {
		t.Errorf("agent container secrets (-want +got):\n%s", diff)
	}
	for _, e := range containers[ContainerAgent].Env {
		if e.Name == "GITHUB_TOKEN" && (e.Value != "" || e.ValueFrom.SecretKeyRef.Name != "github-mcp" || e.ValueFrom.SecretKeyRef.Key != "token") {
			t.Errorf("GITHUB_TOKEN = %+v, want secretKeyRef github-mcp/token", e)
		}
	}
	if diff := cmp.Diff([]string{"GITHUB_TOKEN", "SENTRY_AUTH_TOKEN"}, runnerConfig(s, fullAttempt(t)).Secrets); diff != "" {
		t.Errorf("runner config secrets (-want +got):\n%s", diff)
	}
	if got := secretsOf(containers[ContainerWorkspace]); len(got) != 0 {
		t.Errorf("workspace container gets secrets %v", got)
	}
	if diff := cmp.Diff([]string{"GIT_USERNAME", "GIT_PASSWORD"}, secretsOf(containers[ContainerGitClone])); diff != "" {
		t.Errorf("git-clone container secrets (-want +got):\n%s", diff)
	}
	// The push credentials: only in git-push, which holds no model key and
	// reads the workspace read-only; the tools never see the delivery volume.
	push := containers[ContainerGitPush]
	if diff := cmp.Diff([]string{runconfig.PushUsernameEnv, runconfig.PushPasswordEnv}, secretsOf(push)); diff != "" {
		t.Errorf("git-push container secrets (-want +got):\n%s", diff)
	}
	for _, e := range push.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Name != "git-push-credentials" {
			t.Errorf("git-push reads %s from Secret %s", e.Name, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	for _, m := range push.VolumeMounts {
		if m.Name == volumeWorkspace && !m.ReadOnly {
			t.Error("git-push mounts the workspace read-write")
		}
	}
	if push.RestartPolicy == nil || *push.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("git-push is not a native sidecar")
	}
	for _, m := range containers[ContainerWorkspace].VolumeMounts {
		if m.Name == volumeConfig || m.Name == volumeGitSecret || m.Name == volumeDelivery {
			t.Errorf("workspace container mounts %s", m.Name)
		}
	}
	if u, w := *containers[ContainerAgent].SecurityContext.RunAsUser, *containers[ContainerWorkspace].SecurityContext.RunAsUser; u == w {
		t.Errorf("agent and workspace run as the same user %d", u)
	}
	// Layers: the same read-only mounts, in order, in both containers.
	layerMounts := func(c corev1.Container) []corev1.VolumeMount {
		var out []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(m.MountPath, runconfig.LayersDir) {
				out = append(out, m)
			}
		}
		return out
	}
	want := []corev1.VolumeMount{
		{Name: "layer-0", MountPath: "/etc/aerie/layers/0", ReadOnly: true},
		{Name: "layer-1", MountPath: "/etc/aerie/layers/1", ReadOnly: true, SubPath: "go"},
		{Name: "layer-2", MountPath: "/etc/aerie/layers/2", ReadOnly: true},
		{Name: "layer-3", MountPath: "/etc/aerie/layers/3", ReadOnly: true},
	}
	for _, c := range []string{ContainerAgent, ContainerWorkspace} {
		if diff := cmp.Diff(want, layerMounts(containers[c])); diff != "" {
			t.Errorf("%s layer mounts (-want +got):\n%s", c, diff)
		}
	}
	// The workspace: read-write for the tools, read-only for the agent,
	// at the same path and sub-path, so that a path names one file in both.
	pvc := fullSession()
	pvc.Spec.Workspace = &aeriev1alpha1.WorkspaceSpec{PersistentVolumeClaim: &aeriev1alpha1.PVCWorkspace{ClaimName: "repos", SubPath: "service"}}
	for name, p := range map[string]*corev1.Pod{"git": pod, "pvc": desiredPod(testConfig(), pvc, fullAttempt(t))} {
		mounts := map[string]corev1.VolumeMount{}
		for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if m.Name == volumeWorkspace {
					mounts[c.Name] = m
				}
			}
		}
		ws, agent := mounts[ContainerWorkspace], mounts[ContainerAgent]
		if ws.ReadOnly || !agent.ReadOnly || agent.MountPath != runconfig.DefaultWorkspace || ws.MountPath != agent.MountPath || ws.SubPath != agent.SubPath {
			t.Errorf("%s: workspace mounts: workspace container %+v, agent %+v", name, ws, agent)
		}
	}
	if got := *pod.Spec.ActiveDeadlineSeconds; got != int64((25*time.Minute+DefaultTerminationGrace+deadlineSlack)/time.Second) {
		t.Errorf("activeDeadlineSeconds = %d", got)
	}
}

// TestDesiredPodRestricted evaluates runner pods against the Pod Security
// "restricted" profile, as admission would in a namespace that enforces it.
func TestDesiredPodRestricted(t *testing.T) {
	t.Parallel()
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, pod := range map[string]*corev1.Pod{
		"minimal": desiredPod(testConfig(), minimalSession(), attempt{Number: 1, SessionID: testUID, Prompt: "x"}),
		"full":    desiredPod(testConfig(), fullSession(), fullAttempt(t)),
	} {
		lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
		res := policy.AggregateCheckResults(eval.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
		if !res.Allowed {
			t.Errorf("%s pod violates Pod Security restricted: %s: %s", name, res.ForbiddenReason(), res.ForbiddenDetail())
		}
	}
	// The check is not vacuous: a pod without the restrictions fails it.
	bad := desiredPod(testConfig(), minimalSession(), attempt{Number: 1, SessionID: testUID, Prompt: "x"})
	bad.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	if res := policy.AggregateCheckResults(eval.EvaluatePod(lv, &bad.ObjectMeta, &bad.Spec)); res.Allowed {
		t.Error("a pod allowing privilege escalation passes the restricted checks")
	}
}

func TestChildName(t *testing.T) {
	t.Parallel()
	if got := childName("fix-tests", 3); got != "fix-tests-3" {
		t.Errorf("childName = %q", got)
	}
	long := strings.Repeat("a", 250) + "-" + "b"
	n1, n2 := childName(long, 1), childName(long+"c", 1)
	for _, n := range []string{n1, n2, childName(long, 10)} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) != 0 {
			t.Errorf("childName = %q: %v", n, errs)
		}
	}
	if n1 == n2 {
		t.Errorf("two long names share the child name %q", n1)
	}
	if !strings.HasSuffix(childName(long, 10), "-10") {
		t.Errorf("long child name loses the attempt: %q", childName(long, 10))
	}
}

func TestChildLabels(t *testing.T) {
	t.Parallel()
	s := minimalSession()
	s.Name = strings.Repeat("x", 64)
	l := childLabels(s, 2)
	if _, ok := l[LabelSession]; ok {
		t.Errorf("a 64-character name became a label value")
	}
	if l[LabelSessionUID] != testUID || l[LabelAttempt] != "2" {
		t.Errorf("labels = %v", l)
	}
}

func TestMirror(t *testing.T) {
	t.Parallel()
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: "aerie-system",
			Labels:      map[string]string{runconfig.LayerLabel: "", "team": "platform"},
			Annotations: map[string]string{runconfig.ExecutablesAnnotation: `["tools/x.sh"]`, "note": "not copied"}},
		Data: map[string]string{"tools__x.sh": "#!/bin/sh\n"},
	}
	files, err := runconfig.LayerFiles(src.Data, nil, src.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	digest := runconfig.LayerDigest(files)
	m := desiredMirror(src, "team-a", runconfig.LayerPlatform, digest)
	if _, ok := m.Labels[runconfig.LayerLabel]; ok {
		t.Error("a mirror carries the layer label and would count as a namespace layer")
	}
	if !strings.HasPrefix(m.Name, "aerie-platform-defaults-") || m.Namespace != "team-a" || !*m.Immutable {
		t.Errorf("mirror %s/%s immutable=%v", m.Namespace, m.Name, *m.Immutable)
	}
	if diff := cmp.Diff(map[string]string{runconfig.ExecutablesAnnotation: `["tools/x.sh"]`}, m.Annotations); diff != "" {
		t.Errorf("mirror annotations (-want +got):\n%s", diff)
	}
	mf, err := runconfig.LayerFiles(m.Data, m.BinaryData, m.Annotations)
	if err != nil || runconfig.LayerDigest(mf) != digest {
		t.Errorf("the mirror's content differs from its source's: %v", err)
	}
	src.Data["tools__x.sh"] = "#!/bin/sh\necho changed\n"
	files2, _ := runconfig.LayerFiles(src.Data, nil, src.Annotations)
	if desiredMirror(src, "team-a", runconfig.LayerPlatform, runconfig.LayerDigest(files2)).Name == m.Name {
		t.Error("a changed platform layer keeps its mirror's name")
	}
	// A ConfigMap of the session's own namespace: a mirror of its own kind.
	own := desiredMirror(src, "team-a", runconfig.LayerNamespace, digest)
	if !strings.HasPrefix(own.Name, "aerie-layer-defaults-") || own.Labels[LabelLayerMirror] != "defaults" ||
		own.Labels[LabelPlatformLayer] != "" || !*own.Immutable {
		t.Errorf("namespace layer mirror %s, labels %v, immutable=%v", own.Name, own.Labels, *own.Immutable)
	}
}

// TestHookApprovalReachesRunner: each policy the API accepts renders a
// runner configuration the runner accepts, with the same policy.
func TestHookApprovalReachesRunner(t *testing.T) {
	t.Parallel()
	for _, v := range []aeriev1alpha1.HookApproval{"", aeriev1alpha1.HookApprovalDeny, aeriev1alpha1.HookApprovalAllow} {
		s := minimalSession()
		s.Spec.HookApproval = v
		cm, err := desiredConfigMap(s, attempt{Number: 1, SessionID: testUID, Prompt: "x"})
		if err != nil {
			t.Fatalf("hookApproval %q: %v", v, err)
		}
		c, err := runconfig.Parse([]byte(cm.Data[runconfig.FileName]))
		if err != nil {
			t.Fatalf("hookApproval %q: the runner refuses its config: %v", v, err)
		}
		if c.HookApproval != string(v) {
			t.Errorf("hookApproval %q reached the runner as %q", v, c.HookApproval)
		}
	}
}

func TestMemoryConfig(t *testing.T) {
	t.Parallel()
	git := func(url string) *aeriev1alpha1.WorkspaceSpec {
		return &aeriev1alpha1.WorkspaceSpec{Git: &aeriev1alpha1.GitWorkspace{URL: url}}
	}
	for _, c := range []struct {
		name      string
		memory    *aeriev1alpha1.MemorySpec
		workspace *aeriev1alpha1.WorkspaceSpec
		want      *runconfig.Memory
	}{
		{"no workspace", nil, nil, &runconfig.Memory{}},
		{"git URL", nil, git("https://git.example/team/app.git/"), &runconfig.Memory{Scope: "https://git.example/team/app"}},
		{"git URL without .git", nil, git("https://git.example/team/app"), &runconfig.Memory{Scope: "https://git.example/team/app"}},
		{"scope over the URL", &aeriev1alpha1.MemorySpec{Scope: "app"}, git("https://git.example/team/app.git"), &runconfig.Memory{Scope: "app"}},
		{"disabled", &aeriev1alpha1.MemorySpec{Disabled: true}, git("https://git.example/team/app.git"), nil},
	} {
		s := &aeriev1alpha1.AgentSession{Spec: aeriev1alpha1.AgentSessionSpec{Memory: c.memory, Workspace: c.workspace}}
		if diff := cmp.Diff(c.want, memoryConfig(s)); diff != "" {
			t.Errorf("%s: memoryConfig (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestGitCloneImage: the clone runs in the session's runner image, pulled
// as the runner image is, unless the controller names a git image.
func TestGitCloneImage(t *testing.T) {
	t.Parallel()
	s := minimalSession()
	s.Spec.Workspace = &aeriev1alpha1.WorkspaceSpec{Git: &aeriev1alpha1.GitWorkspace{URL: "https://git.example.com/a.git"}}
	s.Spec.Runner = &aeriev1alpha1.RunnerSpec{Image: "registry.example.com/team/runner:1"}
	clone := func(cfg Config) corev1.Container {
		for _, c := range desiredPod(cfg, s, attempt{Number: 1}).Spec.InitContainers {
			if c.Name == ContainerGitClone {
				return c
			}
		}
		t.Fatal("no git-clone init container")
		return corev1.Container{}
	}
	cfg := testConfig()
	cfg.ImagePullPolicy = corev1.PullNever
	if c := clone(cfg); c.Image != s.Spec.Runner.Image || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("git-clone image %q (pull %q), want the session's runner image %q (pull Never)",
			c.Image, c.ImagePullPolicy, s.Spec.Runner.Image)
	}
	cfg.GitImage = "registry.example.com/git:2"
	if c := clone(cfg); c.Image != cfg.GitImage || c.ImagePullPolicy != "" {
		t.Errorf("git-clone image %q (pull %q), want --git-image %q with the default pull policy",
			c.Image, c.ImagePullPolicy, cfg.GitImage)
	}
}
