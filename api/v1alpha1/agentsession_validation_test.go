package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// The API is validated by a real kube-apiserver: every rule below lives in the CRD's
// OpenAPI schema and CEL expressions, so these tests are what a user's `kubectl apply` sees.
func TestAgentSessionAPI(t *testing.T) {
	cp := testenv.StartControlPlane(t)

	t.Run("samples are accepted", func(t *testing.T) { testSamplesAccepted(t, cp) })
	t.Run("invalid specs are rejected", func(t *testing.T) { testInvalidSpecs(t, cp) })
	t.Run("defaults are applied", func(t *testing.T) { testDefaults(t, cp) })
	t.Run("spec is immutable except cancel", func(t *testing.T) { testImmutability(t, cp) })
	t.Run("approvals are append-only", func(t *testing.T) { testApprovalsAppendOnly(t, cp) })
	t.Run("kubectl printer columns and short name", func(t *testing.T) { testKubectl(t, cp) })
}

func validSession(ns, name string) *v1.AgentSession {
	return &v1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.AgentSessionSpec{
			Prompt: "Fix the failing tests.",
			Model: v1.ModelSpec{
				Provider:        v1.ProviderAnthropic,
				Name:            "claude-sonnet-4-5",
				APIKeySecretRef: &v1.KeyReference{Name: "model-credentials", Key: "api-key"},
			},
		},
	}
}

func testSamplesAccepted(t *testing.T, cp *testenv.ControlPlane) {
	ns := cp.Namespace(t)
	dir := filepath.Join(testenv.RepoRoot(t), "config", "samples")
	paths, err := filepath.Glob(filepath.Join(dir, "aerie_v1alpha1_agentsession_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 3 {
		t.Fatalf("want at least 3 samples in %s, found %d", dir, len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var s v1.AgentSession
			if err := yaml.UnmarshalStrict(data, &s); err != nil {
				t.Fatalf("decode sample: %v", err)
			}
			s.Namespace = ns
			if err := cp.Client.Create(ctx(t), &s); err != nil {
				t.Fatalf("sample rejected: %v", err)
			}
		})
	}

	// The same samples through kubectl's kustomize, as a user applies them.
	ns2 := cp.Namespace(t)
	if out, err := cp.Kubectl(ctx(t), "apply", "-n", ns2, "-k", dir); err != nil {
		t.Fatalf("kubectl apply -k config/samples: %v\n%s", err, out)
	}
	var list v1.AgentSessionList
	if err := cp.Client.List(ctx(t), &list, client.InNamespace(ns2)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(paths) {
		t.Errorf("kubectl apply -k created %d sessions, want %d", len(list.Items), len(paths))
	}
}

func testInvalidSpecs(t *testing.T, cp *testenv.ControlPlane) {
	ns := cp.Namespace(t)
	tests := []struct {
		name   string
		mutate func(*v1.AgentSession)
		// want are substrings of the API server's message: the field path and the rule.
		want []string
	}{
		{"no prompt", func(s *v1.AgentSession) { s.Spec.Prompt = "" },
			[]string{"spec", "exactly one of prompt or promptFrom must be set"}},
		{"prompt and promptFrom", func(s *v1.AgentSession) {
			s.Spec.PromptFrom = &v1.PromptSource{ConfigMapKeyRef: &v1.KeyReference{Name: "p", Key: "k"}}
		}, []string{"spec", "exactly one of prompt or promptFrom must be set"}},
		{"promptFrom with both refs", func(s *v1.AgentSession) {
			s.Spec.Prompt = ""
			s.Spec.PromptFrom = &v1.PromptSource{
				ConfigMapKeyRef: &v1.KeyReference{Name: "p", Key: "k"},
				SecretKeyRef:    &v1.KeyReference{Name: "p", Key: "k"},
			}
		}, []string{"spec.promptFrom", "exactly one of configMapKeyRef or secretKeyRef"}},
		{"promptFrom key with a slash", func(s *v1.AgentSession) {
			s.Spec.Prompt = ""
			s.Spec.PromptFrom = &v1.PromptSource{ConfigMapKeyRef: &v1.KeyReference{Name: "p", Key: "a/b"}}
		}, []string{"spec.promptFrom.configMapKeyRef.key"}},
		{"resumeFrom and forkFrom", func(s *v1.AgentSession) {
			s.Spec.ResumeFrom = "earlier"
			s.Spec.ForkFrom = &v1.ForkSource{Session: "earlier"}
		}, []string{"spec", "resumeFrom and forkFrom are mutually exclusive"}},
		{"unknown provider", func(s *v1.AgentSession) { s.Spec.Model.Provider = "gemini" },
			[]string{"spec.model.provider", "Unsupported value", "anthropic"}},
		{"empty model name", func(s *v1.AgentSession) { s.Spec.Model.Name = "" },
			[]string{"spec.model.name"}},
		{"unknown hook approval policy", func(s *v1.AgentSession) { s.Spec.HookApproval = "maybe" },
			[]string{"spec.hookApproval", "Unsupported value", "deny", "allow", "ask"}},
		{"approvalTimeout out of range", func(s *v1.AgentSession) {
			s.Spec.ApprovalTimeout = &metav1.Duration{Duration: 1000 * time.Hour}
		}, []string{"spec.approvalTimeout", "approvalTimeout must be between 1s and 720h"}},
		{"openai-compatible without baseURL", func(s *v1.AgentSession) { s.Spec.Model.Provider = v1.ProviderOpenAICompatible },
			[]string{"spec.model", "baseURL is required for provider openai-compatible"}},
		{"anthropic without API key", func(s *v1.AgentSession) { s.Spec.Model.APIKeySecretRef = nil },
			[]string{"spec.model", "apiKeySecretRef is required for providers anthropic and openai"}},
		{"scripted with API key", func(s *v1.AgentSession) { s.Spec.Model.Provider = v1.ProviderScripted },
			[]string{"spec.model", "the scripted provider takes no apiKeySecretRef"}},
		{"baseURL not http", func(s *v1.AgentSession) { s.Spec.Model.BaseURL = "ftp://models.example.com" },
			[]string{"spec.model.baseURL", "baseURL must be an http or https URL"}},
		{"baseURL with credentials", func(s *v1.AgentSession) { s.Spec.Model.BaseURL = "http://user:pass@models.example.com/v1" },
			[]string{"spec.model.baseURL", "baseURL must not carry credentials"}},
		{"baseURL with a user", func(s *v1.AgentSession) { s.Spec.Model.BaseURL = "https://token@models.example.com" },
			[]string{"spec.model.baseURL", "baseURL must not carry credentials"}},
		{"context window too small", func(s *v1.AgentSession) { s.Spec.Model.ContextWindow = ptr.To[int64](100) },
			[]string{"spec.model.contextWindow", "1024"}},
		{"toolset with a space", func(s *v1.AgentSession) { s.Spec.Toolset = "read only" },
			[]string{"spec.toolset"}},
		{"layer with two sources", func(s *v1.AgentSession) {
			s.Spec.Extensions = []v1.ExtensionLayer{{
				ConfigMap:             &v1.ConfigMapLayer{Name: "a"},
				PersistentVolumeClaim: &v1.PVCLayer{ClaimName: "b"},
			}}
		}, []string{"spec.extensions[0]", "exactly one of configMap, persistentVolumeClaim or image must be set"}},
		{"layer without a source", func(s *v1.AgentSession) { s.Spec.Extensions = []v1.ExtensionLayer{{Name: "empty"}} },
			[]string{"spec.extensions[0]", "exactly one of configMap, persistentVolumeClaim or image must be set"}},
		{"layer subPath escapes", func(s *v1.AgentSession) {
			s.Spec.Extensions = []v1.ExtensionLayer{{PersistentVolumeClaim: &v1.PVCLayer{ClaimName: "b", SubPath: "skills/../../etc"}}}
		}, []string{"spec.extensions[0].persistentVolumeClaim.subPath", "without '..' segments"}},
		{"too many layers", func(s *v1.AgentSession) {
			for range 17 {
				s.Spec.Extensions = append(s.Spec.Extensions, v1.ExtensionLayer{ConfigMap: &v1.ConfigMapLayer{Name: "a"}})
			}
		}, []string{"spec.extensions", "Too many"}},
		{"unknown trust source", func(s *v1.AgentSession) { s.Spec.Trust = &v1.TrustSpec{Sources: []v1.TrustSource{"Workspace"}} },
			[]string{"spec.trust.sources[0]", "Unsupported value"}},
		{"two workspace sources", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{
				EmptyDir: &v1.EmptyDirWorkspace{},
				Git:      &v1.GitWorkspace{URL: "https://example.com/repo.git"},
			}
		}, []string{"spec.workspace", "at most one of emptyDir, persistentVolumeClaim or git may be set"}},
		{"absolute workingDir", func(s *v1.AgentSession) { s.Spec.Workspace = &v1.WorkspaceSpec{WorkingDir: "/etc"} },
			[]string{"spec.workspace.workingDir", "workingDir must be a relative path"}},
		{"git URL with credentials", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{Git: &v1.GitWorkspace{URL: "https://user:token@example.com/repo.git"}}
		}, []string{"spec.workspace.git.url", "must not carry credentials"}},
		{"git URL not a URL", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{Git: &v1.GitWorkspace{URL: "file:///etc"}}
		}, []string{"spec.workspace.git.url", "url must be an https, http, ssh or git URL"}},
		{"push credentials over ssh", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{Git: &v1.GitWorkspace{URL: "ssh://git@example.com/repo.git",
				Push: &v1.GitPush{SecretRef: &corev1.LocalObjectReference{Name: "push"}}}}
		}, []string{"spec.workspace.git", "push needs an https (or http) url"}},
		{"push over git://", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{Git: &v1.GitWorkspace{URL: "git://example.com/repo.git", Push: &v1.GitPush{}}}
		}, []string{"spec.workspace.git", "push needs an https (or http) url"}},
		{"push branch with ..", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{Git: &v1.GitWorkspace{URL: "https://example.com/repo.git",
				Push: &v1.GitPush{Branch: "aerie/a..b"}}}
		}, []string{"spec.workspace.git.push.branch", "valid git branch name"}},
		{"memory scope with a space", func(s *v1.AgentSession) {
			s.Spec.Memory = &v1.MemorySpec{Scope: "team app"}
		}, []string{"spec.memory.scope"}},
		{"memory scope and disabled", func(s *v1.AgentSession) {
			s.Spec.Memory = &v1.MemorySpec{Scope: "app", Disabled: true}
		}, []string{"spec.memory", "scope has no use when memory is disabled"}},
		{"push branch ending in .lock", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{Git: &v1.GitWorkspace{URL: "https://example.com/repo.git",
				Push: &v1.GitPush{Branch: "fix.lock"}}}
		}, []string{"spec.workspace.git.push.branch", "valid git branch name"}},
		{"push branch an option", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{Git: &v1.GitWorkspace{URL: "https://example.com/repo.git",
				Push: &v1.GitPush{Branch: "-f"}}}
		}, []string{"spec.workspace.git.push.branch"}},
		{"push author email without @", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{Git: &v1.GitWorkspace{URL: "https://example.com/repo.git",
				Push: &v1.GitPush{Author: &v1.GitAuthor{Name: "Bot", Email: "bot"}}}}
		}, []string{"spec.workspace.git.push.author.email"}},
		{"push author name with <", func(s *v1.AgentSession) {
			s.Spec.Workspace = &v1.WorkspaceSpec{Git: &v1.GitWorkspace{URL: "https://example.com/repo.git",
				Push: &v1.GitPush{Author: &v1.GitAuthor{Name: "Bot <x@y>", Email: "bot@example.com"}}}}
		}, []string{"spec.workspace.git.push.author.name", "must not contain '<'"}},
		{"executor named workspace", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "workspace", Image: "golang:1.26"}}
		}, []string{"spec.executors[0].name", "workspace and local name the runner pod's own executor"}},
		{"executor named local", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "local", Image: "golang:1.26"}}
		}, []string{"spec.executors[0].name", "choose another name"}},
		{"executor name not a DNS label", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "Tools_1", Image: "golang:1.26"}}
		}, []string{"spec.executors[0].name"}},
		{"executor without an image", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "tools"}}
		}, []string{"spec.executors[0].image"}},
		{"two executors with one name", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "tools", Image: "a"}, {Name: "tools", Image: "b"}}
		}, []string{"spec.executors[1]", "Duplicate value"}},
		{"two default executors", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "a", Image: "a", Default: true}, {Name: "b", Image: "b", Default: true}}
		}, []string{"spec.executors", "at most one executor may be the default"}},
		{"executor env from a Secret", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "tools", Image: "a", Env: []corev1.EnvVar{{Name: "T",
				ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}}}
		}, []string{"spec.executors[0].env", "env must not reference Secrets"}},
		{"executor workspace that pushes", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "tools", Image: "a", Workspace: &v1.WorkspaceSpec{
				Git: &v1.GitWorkspace{URL: "https://example.com/repo.git", Push: &v1.GitPush{}}}}}
		}, []string{"spec.executors[0]", "an executor's workspace cannot push"}},
		{"executor workspace with two sources", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "tools", Image: "a", Workspace: &v1.WorkspaceSpec{
				EmptyDir: &v1.EmptyDirWorkspace{}, Git: &v1.GitWorkspace{URL: "https://example.com/repo.git"}}}}
		}, []string{"spec.executors[0].workspace", "at most one of emptyDir"}},
		{"executor workspace with a workingDir", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "tools", Image: "a", Workspace: &v1.WorkspaceSpec{WorkingDir: "src"}}}
		}, []string{"spec.executors[0]", "an executor works in its workspace root"}},
		{"too many executors", func(s *v1.AgentSession) {
			for i := range 9 {
				s.Spec.Executors = append(s.Spec.Executors, v1.ExecutorSpec{Name: "e" + strconv.Itoa(i), Image: "a"})
			}
		}, []string{"spec.executors", "Too many"}},
		{"forkFrom at sequence 0", func(s *v1.AgentSession) {
			s.Spec.ForkFrom = &v1.ForkSource{Session: "earlier", AtSequence: ptr.To[int64](0)}
		}, []string{"spec.forkFrom.atSequence"}},
		{"resumeFrom not a name", func(s *v1.AgentSession) { s.Spec.ResumeFrom = "Not_A_Name" },
			[]string{"spec.resumeFrom"}},
		{"maxDuration too short", func(s *v1.AgentSession) {
			s.Spec.Budget = &v1.Budget{MaxDuration: &metav1.Duration{Duration: time.Second}}
		}, []string{"spec.budget.maxDuration", "maxDuration must be between 10s and 168h"}},
		{"maxTurns zero", func(s *v1.AgentSession) { s.Spec.Budget = &v1.Budget{MaxTurns: ptr.To[int32](0)} },
			[]string{"spec.budget.maxTurns"}},
		{"maxCostUSD five decimals", func(s *v1.AgentSession) { s.Spec.Budget = &v1.Budget{MaxCostUSD: ptr.To("0.00001")} },
			[]string{"spec.budget.maxCostUSD", "at most 4 decimals"}},
		{"maxCostUSD not a number", func(s *v1.AgentSession) { s.Spec.Budget = &v1.Budget{MaxCostUSD: ptr.To("$5")} },
			[]string{"spec.budget.maxCostUSD", "at most 4 decimals"}},
		{"maxCostUSD negative", func(s *v1.AgentSession) { s.Spec.Budget = &v1.Budget{MaxCostUSD: ptr.To("-1")} },
			[]string{"spec.budget.maxCostUSD", "at most 4 decimals"}},
		{"maxCostUSD zero", func(s *v1.AgentSession) { s.Spec.Budget = &v1.Budget{MaxCostUSD: ptr.To("0.0000")} },
			[]string{"spec.budget.maxCostUSD", "maxCostUSD must be more than 0"}},
		{"maxAttempts too large", func(s *v1.AgentSession) { s.Spec.Retry = &v1.RetryPolicy{MaxAttempts: 11} },
			[]string{"spec.retry.maxAttempts"}},
		{"negative TTL", func(s *v1.AgentSession) { s.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1) },
			[]string{"spec.ttlSecondsAfterFinished"}},
		{"secret name not a variable name", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{{Name: "GITHUB-TOKEN", SecretKeyRef: v1.KeyReference{Name: "gh", Key: "token"}}}
		}, []string{"spec.secrets[0].name", "name must be an environment variable name"}},
		{"secret name starting with a digit", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{{Name: "1TOKEN", SecretKeyRef: v1.KeyReference{Name: "gh", Key: "token"}}}
		}, []string{"spec.secrets[0].name", "name must be an environment variable name"}},
		{"secret named as the store's DSN", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{
				{Name: "GITHUB_TOKEN", SecretKeyRef: v1.KeyReference{Name: "gh", Key: "token"}},
				{Name: runconfig.DatabaseURLEnv, SecretKeyRef: v1.KeyReference{Name: "db", Key: "url"}},
			}
		}, []string{"spec.secrets[1].name", "name is reserved"}},
		{"secret named as the model's API key", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{{Name: runconfig.APIKeyEnv(runconfig.ProviderAnthropic), SecretKeyRef: v1.KeyReference{Name: "k", Key: "k"}}}
		}, []string{"spec.secrets[0].name", "name is reserved"}},
		{"secret named as another provider's API key", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{{Name: runconfig.APIKeyEnv(runconfig.ProviderOpenAI), SecretKeyRef: v1.KeyReference{Name: "k", Key: "k"}}}
		}, []string{"spec.secrets[0].name", "name is reserved"}},
		{"secret named HOME", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{{Name: "HOME", SecretKeyRef: v1.KeyReference{Name: "k", Key: "k"}}}
		}, []string{"spec.secrets[0].name", "name is reserved"}},
		{"secret named PATH", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{{Name: "PATH", SecretKeyRef: v1.KeyReference{Name: "k", Key: "k"}}}
		}, []string{"spec.secrets[0].name", "name is reserved"}},
		{"secret named for the loader", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{{Name: "LD_PRELOAD", SecretKeyRef: v1.KeyReference{Name: "k", Key: "k"}}}
		}, []string{"spec.secrets[0].name", "name is reserved"}},
		{"secret named twice", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{
				{Name: "GITHUB_TOKEN", SecretKeyRef: v1.KeyReference{Name: "a", Key: "token"}},
				{Name: "GITHUB_TOKEN", SecretKeyRef: v1.KeyReference{Name: "b", Key: "token"}},
			}
		}, []string{"spec.secrets[1]", "Duplicate value"}},
		{"secret without a key", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{{Name: "GITHUB_TOKEN", SecretKeyRef: v1.KeyReference{Name: "gh"}}}
		}, []string{"spec.secrets[0].secretKeyRef.key"}},
		{"too many secrets", func(s *v1.AgentSession) {
			for i := range 33 {
				s.Spec.Secrets = append(s.Spec.Secrets, v1.SecretEnv{Name: "TOKEN_" + strconv.Itoa(i), SecretKeyRef: v1.KeyReference{Name: "k", Key: "k"}})
			}
		}, []string{"spec.secrets", "Too many"}},
		{"runner env from a Secret", func(s *v1.AgentSession) {
			s.Spec.Runner = &v1.RunnerSpec{Env: []corev1.EnvVar{{
				Name: "TOKEN",
				ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "token",
				}},
			}}}
		}, []string{"spec.runner.env", "env must not reference Secrets"}},
	}
	if len(tests) < 15 {
		t.Fatalf("the API promises at least 15 rejected specs, the table has %d", len(tests))
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := validSession(ns, "invalid-"+strconv.Itoa(i))
			tt.mutate(s)
			err := cp.Client.Create(ctx(t), s)
			if err == nil {
				t.Fatalf("API server accepted an invalid spec")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message does not name %q:\n%v", want, err)
				}
			}
		})
	}
}

func testDefaults(t *testing.T, cp *testenv.ControlPlane) {
	ns := cp.Namespace(t)
	s := validSession(ns, "defaults")
	s.Spec.Trust = &v1.TrustSpec{}
	if err := cp.Client.Create(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	var got v1.AgentSession
	if err := cp.Client.Get(ctx(t), client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	want := v1.AgentSessionSpec{
		Prompt: s.Spec.Prompt,
		Model:  s.Spec.Model,
		Trust:  &v1.TrustSpec{Sources: []v1.TrustSource{v1.TrustFromExtensions, v1.TrustFromNamespace, v1.TrustFromPlatform}},
		Budget: &v1.Budget{MaxDuration: &metav1.Duration{Duration: time.Hour}, MaxTurns: ptr.To[int32](100)},
		Retry:  &v1.RetryPolicy{MaxAttempts: 3},

		ApprovalTimeout: &metav1.Duration{Duration: 24 * time.Hour},
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("defaulted spec (-want +got):\n%s", diff)
	}
}

func testImmutability(t *testing.T, cp *testenv.ControlPlane) {
	ns := cp.Namespace(t)
	s := validSession(ns, "immutable")
	if err := cp.Client.Create(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	updates := []struct {
		name   string
		mutate func(*v1.AgentSession)
		want   string // "" = accepted
	}{
		{"change prompt", func(s *v1.AgentSession) { s.Spec.Prompt = "Something else." }, "prompt is immutable"},
		{"change model", func(s *v1.AgentSession) { s.Spec.Model.Name = "claude-opus-4-1" }, "model is immutable"},
		{"add toolset", func(s *v1.AgentSession) { s.Spec.Toolset = "readonly" }, "spec is immutable except for cancel"},
		{"add hook approval", func(s *v1.AgentSession) { s.Spec.HookApproval = "allow" }, "spec is immutable except for cancel"},
		{"change budget", func(s *v1.AgentSession) { s.Spec.Budget.MaxTurns = ptr.To[int32](5) }, "budget is immutable"},
		{"add maxCostUSD", func(s *v1.AgentSession) { s.Spec.Budget.MaxCostUSD = ptr.To("1.5") }, "budget is immutable"},
		{"add secrets", func(s *v1.AgentSession) {
			s.Spec.Secrets = []v1.SecretEnv{{Name: "GITHUB_TOKEN", SecretKeyRef: v1.KeyReference{Name: "gh", Key: "token"}}}
		}, "spec is immutable except for cancel"},
		{"add extensions", func(s *v1.AgentSession) {
			s.Spec.Extensions = []v1.ExtensionLayer{{ConfigMap: &v1.ConfigMapLayer{Name: "x"}}}
		}, "spec is immutable except for cancel"},
		{"add executors", func(s *v1.AgentSession) {
			s.Spec.Executors = []v1.ExecutorSpec{{Name: "tools", Image: "golang:1.26"}}
		}, "spec is immutable except for cancel"},
		{"add memory", func(s *v1.AgentSession) {
			s.Spec.Memory = &v1.MemorySpec{Disabled: true}
		}, "spec is immutable except for cancel"},
		{"change maxDuration", func(s *v1.AgentSession) {
			s.Spec.Budget.MaxDuration = &metav1.Duration{Duration: 2 * time.Hour}
		}, "budget is immutable"},
		// A typed client re-serializes the defaulted "1h" as "1h0m0s": still the same spec.
		{"change labels", func(s *v1.AgentSession) { s.Labels = map[string]string{"team": "a"} }, ""},
		{"set cancel", func(s *v1.AgentSession) { s.Spec.Cancel = true }, ""},
		{"unset cancel", func(s *v1.AgentSession) { s.Spec.Cancel = false }, "cancel cannot be unset once true"},
	}
	// Sequential on purpose: "unset cancel" needs "set cancel" to have happened.
	for _, u := range updates {
		var cur v1.AgentSession
		if err := cp.Client.Get(ctx(t), client.ObjectKeyFromObject(s), &cur); err != nil {
			t.Fatal(err)
		}
		u.mutate(&cur)
		err := cp.Client.Update(ctx(t), &cur)
		switch {
		case u.want == "" && err != nil:
			t.Errorf("%s: rejected: %v", u.name, err)
		case u.want != "" && err == nil:
			t.Errorf("%s: accepted, want rejection %q", u.name, u.want)
		case u.want != "" && !strings.Contains(err.Error(), u.want):
			t.Errorf("%s: message does not say %q:\n%v", u.name, u.want, err)
		}
	}
}

// testApprovalsAppendOnly: hookApproval ask is accepted; decisions can be added to
// spec.approvals, never changed or removed, and approvalTimeout stays as created.
func testApprovalsAppendOnly(t *testing.T, cp *testenv.ControlPlane) {
	ns := cp.Namespace(t)
	s := validSession(ns, "approvals")
	s.Spec.HookApproval = v1.HookApprovalAsk
	s.Spec.ApprovalTimeout = &metav1.Duration{Duration: time.Minute}
	if err := cp.Client.Create(ctx(t), s); err != nil {
		t.Fatalf("hookApproval ask rejected: %v", err)
	}
	first := v1.ApprovalDecision{CallID: "call-1", Decision: v1.DecisionAllow}
	second := v1.ApprovalDecision{CallID: "call-2", Decision: v1.DecisionDeny, Reason: "not on main"}
	updates := []struct {
		name   string
		mutate func(*v1.AgentSession)
		want   string // "" = accepted
	}{
		{"add a decision", func(s *v1.AgentSession) { s.Spec.Approvals = []v1.ApprovalDecision{first} }, ""},
		{"append a decision", func(s *v1.AgentSession) { s.Spec.Approvals = append(s.Spec.Approvals, second) }, ""},
		{"unknown decision", func(s *v1.AgentSession) {
			s.Spec.Approvals = append(s.Spec.Approvals, v1.ApprovalDecision{CallID: "call-3", Decision: "Maybe"})
		}, "Unsupported value"},
		{"change a decision", func(s *v1.AgentSession) { s.Spec.Approvals[0].Decision = v1.DecisionDeny }, "append-only"},
		{"change a reason", func(s *v1.AgentSession) { s.Spec.Approvals[1].Reason = "fine" }, "append-only"},
		{"remove a decision", func(s *v1.AgentSession) { s.Spec.Approvals = s.Spec.Approvals[1:] }, "append-only"},
		{"remove every decision", func(s *v1.AgentSession) { s.Spec.Approvals = nil }, "append-only"},
		{"change approvalTimeout", func(s *v1.AgentSession) {
			s.Spec.ApprovalTimeout = &metav1.Duration{Duration: time.Hour}
		}, "approvalTimeout is immutable"},
		{"change the rest of the spec", func(s *v1.AgentSession) { s.Spec.Prompt = "Other." }, "prompt is immutable"},
	}
	for _, u := range updates {
		var cur v1.AgentSession
		if err := cp.Client.Get(ctx(t), client.ObjectKeyFromObject(s), &cur); err != nil {
			t.Fatal(err)
		}
		u.mutate(&cur)
		err := cp.Client.Update(ctx(t), &cur)
		switch {
		case u.want == "" && err != nil:
			t.Errorf("%s: rejected: %v", u.name, err)
		case u.want != "" && err == nil:
			t.Errorf("%s: accepted, want rejection %q", u.name, u.want)
		case u.want != "" && !strings.Contains(err.Error(), u.want):
			t.Errorf("%s: message does not say %q:\n%v", u.name, u.want, err)
		}
	}
	var got v1.AgentSession
	if err := cp.Client.Get(ctx(t), client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if want := []v1.ApprovalDecision{first, second}; !cmp.Equal(want, got.Spec.Approvals) {
		t.Errorf("approvals after the refused changes: %+v, want %+v", got.Spec.Approvals, want)
	}
}

func testKubectl(t *testing.T, cp *testenv.ControlPlane) {
	ns := cp.Namespace(t)
	s := validSession(ns, "printed")
	s.Spec.Budget = &v1.Budget{MaxCostUSD: ptr.To("2.5")} // a valid cost budget
	if err := cp.Client.Create(ctx(t), s); err != nil {
		t.Fatal(err)
	}
	s.Status = v1.AgentSessionStatus{
		Phase:     v1.PhaseSucceeded,
		SessionID: "3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
		Usage:     &v1.Usage{InputTokens: 1000, OutputTokens: 234, TotalTokens: 1234, Turns: 7, ToolCalls: 12, CostUSD: "0.0123"},
		Result:    &v1.Result{Outcome: v1.OutcomeCompleted},
	}
	if err := cp.Client.Status().Update(ctx(t), s); err != nil {
		t.Fatalf("update status: %v", err)
	}

	out, err := cp.Kubectl(ctx(t), "get", "ags", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get ags: want a header and one row, got:\n%s", out)
	}
	if got, want := strings.Fields(lines[0]), []string{"NAME", "PHASE", "MODEL", "TURNS", "TOKENS", "COST", "AGE"}; !cmp.Equal(got, want) {
		t.Errorf("columns = %v, want %v", got, want)
	}
	if got, want := strings.Fields(lines[1])[:6], []string{"printed", "Succeeded", "claude-sonnet-4-5", "7", "1234", "0.0123"}; !cmp.Equal(got, want) {
		t.Errorf("row = %v, want %v", got, want)
	}

	wide, err := cp.Kubectl(ctx(t), "get", "agentsessions.aerie.run", "printed", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"OUTCOME", "SESSION", "Completed", s.Status.SessionID} {
		if !strings.Contains(wide, want) {
			t.Errorf("kubectl get -o wide lacks %q:\n%s", want, wide)
		}
	}

	// The "aerie" category lists sessions with `kubectl get aerie`.
	cat, err := cp.Kubectl(ctx(t), "get", "aerie", "-n", ns, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(cat) != "agentsession.aerie.run/printed" {
		t.Errorf("kubectl get aerie = %q", cat)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
