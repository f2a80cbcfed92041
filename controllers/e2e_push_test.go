package controllers

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestEndToEndGitPush delivers the work of sessions with
// spec.workspace.git.push to the test git server: a pushed branch (the
// workspace's repository, which the tools fill with hooks and a pushurl
// of their own, is never used), nothing to push, a push the server's hook
// rejects and one with wrong credentials, each PushFailed with git's
// message.
func TestEndToEndGitPush(t *testing.T) {
	e := startE2E(t)
	if m := e.runner.Mounts(); m != testenv.MountNamespace {
		t.Skipf("the pod runner maps paths (%s): the workspace container cannot see /workspace; run as root for mount namespaces", m)
	}
	git := testenv.StartGitServer(t, "aerie-bot", "push-token-7a41")
	for name, password := range map[string]string{"git-credentials": "push-token-7a41", "wrong-credentials": "not-the-token"} {
		if err := e.cp.Client.Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			StringData: map[string]string{"username": "aerie-bot", "password": password},
		}); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"main.go": "package main\n\nfunc main() {}\n"}
	edit := `printf 'package main\n\nfunc main() { println("fixed") }\n' > main.go`
	// What a tool could plant to run code with the credentials, or send
	// them elsewhere: hooks that refuse the push, a credential helper
	// that answers wrong ones, a pushurl to another repository. Any of
	// them used would fail or divert the push.
	plant := edit + ` && printf '#!/bin/sh\nexit 1\n' > .git/hooks/pre-push && chmod +x .git/hooks/pre-push` +
		` && cp .git/hooks/pre-push .git/hooks/reference-transaction` +
		` && git config credential.helper '!f() { echo username=x; echo password=stolen; }; f'` +
		` && git config remote.origin.pushurl ` + git.URL("loot")
	session := func(t *testing.T, name, repo, command string, push *aeriev1alpha1.GitPush) *aeriev1alpha1.AgentSession {
		t.Helper()
		model := testenv.StartModelServer(t, bashTurn("b1", command),
			testenv.Turn{Text: "Done.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
		s := &aeriev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec: aeriev1alpha1.AgentSessionSpec{
				Prompt: "Make main print fixed.",
				Model: aeriev1alpha1.ModelSpec{
					Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: model.URL(),
					APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
				},
				Workspace: &aeriev1alpha1.WorkspaceSpec{Git: &aeriev1alpha1.GitWorkspace{
					URL: git.URL(repo), SecretRef: &corev1.LocalObjectReference{Name: "git-credentials"}, Push: push,
				}},
			},
		}
		if err := e.cp.Client.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		return e.waitFinished(t, name)
	}
	pushed := func(t *testing.T, s *aeriev1alpha1.AgentSession) *metav1.Condition {
		t.Helper()
		c := meta.FindStatusCondition(s.Status.Conditions, aeriev1alpha1.ConditionPushed)
		if c == nil || s.Status.Result == nil {
			b, _ := json.MarshalIndent(s.Status, "", "  ")
			t.Fatalf("no Pushed condition or result; status:\n%s", b)
		}
		return c
	}

	t.Run("pushed", func(t *testing.T) {
		head := git.CreateRepo(t, "app", files)
		git.CreateRepo(t, "loot", files)
		s := session(t, "push-ok", "app", plant, &aeriev1alpha1.GitPush{
			Author: &aeriev1alpha1.GitAuthor{Name: "Fix Bot", Email: "fix-bot@example.com"},
		})
		c := pushed(t, s)
		r := s.Status.Result
		if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || c.Status != metav1.ConditionTrue || c.Reason != aeriev1alpha1.ReasonPushed ||
			r.Branch != "aerie/push-ok" || r.Commit == "" {
			t.Fatalf("phase %s, condition %+v, result %+v", s.Status.Phase, c, r)
		}
		if got, ok := git.Ref(t, "app", "refs/heads/aerie/push-ok"); !ok || got != r.Commit {
			t.Fatalf("the server's aerie/push-ok is %q (exists %v), want %s", got, ok, r.Commit)
		}
		if parent := git.Git(t, "app", "rev-parse", r.Commit+"^"); parent != head {
			t.Errorf("parent %s, want the cloned %s", parent, head)
		}
		if got := git.Git(t, "app", "show", r.Commit+":main.go"); !strings.Contains(got, `println("fixed")`) {
			t.Errorf("main.go of the commit:\n%s", got)
		}
		if got := git.Git(t, "app", "log", "-1", "--format=%an <%ae>|%s", r.Commit); got != "Fix Bot <fix-bot@example.com>|aerie: work of session "+e.ns+"/push-ok" {
			t.Errorf("author and subject %q", got)
		}
		if _, ok := git.Ref(t, "loot", "refs/heads/aerie/push-ok"); ok {
			t.Error("the push followed the workspace's pushurl")
		}
		// kubectl aerie get NAME reports it.
		get := exec.Command(filepath.Join(filepath.Dir(e.bin), "kubectl-aerie"),
			"get", "push-ok", "--kubeconfig", e.cp.Kubeconfig, "-n", e.ns)
		get.Env = append(os.Environ(), "HOME="+t.TempDir())
		if out, err := get.CombinedOutput(); err != nil || !strings.Contains(string(out), "pushed commit "+r.Commit+" to branch aerie/push-ok") {
			t.Errorf("kubectl-aerie get push-ok: %v\n%s", err, out)
		}
		noSecret(t, e, s, "push-token-7a41")
	})
	t.Run("nothing to push", func(t *testing.T) {
		git.CreateRepo(t, "same", files)
		s := session(t, "push-nothing", "same", "cat main.go", &aeriev1alpha1.GitPush{Branch: "review/nothing"})
		c := pushed(t, s)
		if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || c.Reason != aeriev1alpha1.ReasonNothingToPush || s.Status.Result.Commit != "" {
			t.Fatalf("phase %s, condition %+v, result %+v", s.Status.Phase, c, s.Status.Result)
		}
		if _, ok := git.Ref(t, "same", "refs/heads/review/nothing"); ok {
			t.Error("a branch was pushed with nothing to push")
		}
	})
	t.Run("rejected", func(t *testing.T) {
		git.CreateRepo(t, "frozen", files)
		git.RejectPushes(t, "frozen", "pushes to frozen are refused")
		s := session(t, "push-rejected", "frozen", edit, &aeriev1alpha1.GitPush{})
		c := pushed(t, s)
		if s.Status.Phase != aeriev1alpha1.PhaseFailed || s.Status.Result.Outcome != aeriev1alpha1.OutcomePushFailed ||
			c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "pushes to frozen are refused") ||
			!strings.Contains(s.Status.Result.Message, "aerie/push-rejected") {
			t.Fatalf("phase %s, condition %+v, result %+v", s.Status.Phase, c, s.Status.Result)
		}
	})
	t.Run("wrong credentials", func(t *testing.T) {
		git.CreateRepo(t, "locked", files)
		s := session(t, "push-denied", "locked", edit,
			&aeriev1alpha1.GitPush{SecretRef: &corev1.LocalObjectReference{Name: "wrong-credentials"}})
		c := pushed(t, s)
		if s.Status.Result.Outcome != aeriev1alpha1.OutcomePushFailed || c.Status != metav1.ConditionFalse || c.Message == "" {
			t.Fatalf("phase %s, condition %+v, result %+v", s.Status.Phase, c, s.Status.Result)
		}
		if strings.Contains(c.Message, "not-the-token") {
			t.Errorf("the message holds the password: %s", c.Message)
		}
		if _, ok := git.Ref(t, "locked", "refs/heads/aerie/push-denied"); ok {
			t.Error("pushed with wrong credentials")
		}
	})
}

// noSecret checks that no journal entry of s holds secret.
func noSecret(t *testing.T, e *e2e, s *aeriev1alpha1.AgentSession, secret string) {
	t.Helper()
	st, err := dburl.Open(t.Context(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	es, err := st.Entries(t.Context(), e.ns, uuid.MustParse(s.Status.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range es {
		b, _ := transcript.EncodePayload(en.Payload)
		if strings.Contains(string(b), secret) {
			t.Errorf("entry %d holds the push credentials", en.Seq)
		}
	}
}
