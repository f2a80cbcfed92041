package controllers

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestEndToEndGitWorkspaceDiff clones a repository from the test git
// server over HTTP with the credentials of spec.workspace.git.secretRef;
// the agent edits a tracked file and creates an untracked one in the
// workspace container; the runner journals the diff against the cloned
// commit, and aerie session diff prints it from the store after the
// runner pod is deleted.
func TestEndToEndGitWorkspaceDiff(t *testing.T) {
	e := startE2E(t)
	if m := e.runner.Mounts(); m != testenv.MountNamespace {
		t.Skipf("the pod runner maps paths (%s): the workspace container cannot see /workspace; run as root for mount namespaces", m)
	}
	git := testenv.StartGitServer(t, "aerie-bot", "clone-token-5c1d")
	head := git.CreateRepo(t, "app", map[string]string{"main.go": "package main\n\nfunc main() {}\n", ".gitignore": "*.log\n"})
	if err := e.cp.Client.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git-credentials", Namespace: e.ns},
		StringData: map[string]string{"username": "aerie-bot", "password": "clone-token-5c1d"},
	}); err != nil {
		t.Fatal(err)
	}
	model := testenv.StartModelServer(t,
		bashTurn("b1", `printf 'package main\n\nfunc main() { println("fixed") }\n' > main.go && echo new > added.txt && echo x > run.log`),
		testenv.Turn{Text: "Fixed.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: "git-diff", Namespace: e.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Make main print fixed.",
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: model.URL(),
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
			},
			Workspace: &aeriev1alpha1.WorkspaceSpec{Git: &aeriev1alpha1.GitWorkspace{
				URL: git.URL("app"), SecretRef: &corev1.LocalObjectReference{Name: "git-credentials"},
			}},
		},
	}
	if err := e.cp.Client.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	s = e.waitFinished(t, "git-diff")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}

	// The pod goes; the diff stays in the store.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.Status.PodName, Namespace: e.ns}}
	if err := e.cp.Client.Delete(t.Context(), pod); err != nil {
		t.Fatalf("delete pod %s: %v", pod.Name, err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		err := e.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: e.ns, Name: pod.Name}, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still there after a minute: %v", pod.Name, err)
		}
	}

	st, err := dburl.Open(t.Context(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	es, err := st.Entries(t.Context(), e.ns, uuid.MustParse(s.Status.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := es[len(es)-1].Payload.(transcript.WorkspaceDiff)
	if !ok {
		t.Fatalf("last entry %T, want the workspace diff", es[len(es)-1].Payload)
	}
	if d.Base != head || d.Error != "" {
		t.Errorf("diff base %s (want the cloned %s), error %q", d.Base, head, d.Error)
	}

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(e.bin, append([]string{"session", "diff", s.Status.SessionID, "--namespace", e.ns}, args...)...)
		cmd.Env = append(os.Environ(), "AERIE_DATABASE_URL="+e.dsn, "HOME="+t.TempDir(), "AERIE_HOME="+t.TempDir())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("aerie session diff %v: %v", args, err)
		}
		return string(out)
	}
	patch := run()
	for _, want := range []string{`+func main() { println("fixed") }`, "diff --git a/added.txt b/added.txt", "+new"} {
		if !strings.Contains(patch, want) {
			t.Errorf("the patch lacks %q:\n%s", want, patch)
		}
	}
	if stat := run("--stat"); !strings.Contains(stat, "2 files changed") || strings.Contains(stat, "run.log") {
		t.Errorf("the stat:\n%s", stat)
	}
	// kubectl aerie get NAME --diff finds the session and has aerie print it.
	get := exec.Command(filepath.Join(filepath.Dir(e.bin), "kubectl-aerie"),
		"get", "git-diff", "--diff", "--stat", "--kubeconfig", e.cp.Kubeconfig, "-n", e.ns)
	get.Env = append(os.Environ(), "AERIE_DATABASE_URL="+e.dsn, "HOME="+t.TempDir())
	if out, err := get.CombinedOutput(); err != nil || !strings.Contains(string(out), "added.txt") {
		t.Errorf("kubectl-aerie get git-diff --diff --stat: %v\n%s", err, out)
	}
	for _, en := range es {
		b, _ := transcript.EncodePayload(en.Payload)
		if strings.Contains(string(b), "clone-token-5c1d") {
			t.Errorf("entry %d holds the clone credentials", en.Seq)
		}
	}
}
