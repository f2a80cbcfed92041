package controllers

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// testSecretsAgentOnly gives a session a spec.secrets entry: while the
// runner pod runs, the variable is in the environment of the agent
// container's process and in no process of the workspace container, a
// tool's environment lacks it, and once the session ended its value is in
// no Event, status, runner configuration, container log or model request.
func testSecretsAgentOnly(t *testing.T, e *e2e) {
	ns := e.namespace(t)
	e = e.in(ns)
	const name, variable = "secrets-agent-only", "GITHUB_TOKEN"
	value := "ghp-e2e-" + uuid.NewString()
	if err := e.cp.Client.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "github-mcp", Namespace: ns},
		StringData: map[string]string{"token": value},
	}); err != nil {
		t.Fatal(err)
	}
	e.startController(t, ns, e.cp.Namespace(t))

	// The first request comes from the agent's process, which waits for
	// the answer: the pod's processes are looked at then.
	var (
		mu   sync.Mutex
		seen []string
	)
	model := testenv.StartModelServer(t,
		testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			mu.Lock()
			seen = processesWithEnv(t, variable+"="+value)
			mu.Unlock()
			return bashTurn("env", "env > env.txt; echo ran")
		}},
		testenv.Turn{Text: "Done.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	e.session(t, name, model, func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Secrets = []aeriev1alpha1.SecretEnv{
			{Name: variable, SecretKeyRef: aeriev1alpha1.KeyReference{Name: "github-mcp", Key: "token"}},
		}
	})
	pod := e.pod(t, name)
	s := e.waitFinished(t, name)
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}

	mu.Lock()
	var agent bool
	for _, cmdline := range seen {
		agent = agent || strings.Contains(cmdline, " runner --config ")
		if strings.Contains(cmdline, " executor ") {
			t.Errorf("a workspace container's process has %s: %s", variable, cmdline)
		}
	}
	if !agent {
		t.Errorf("no agent process with %s; the processes with it: %q", variable, seen)
	}
	mu.Unlock()
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, ev := range c.Env {
			if ev.Name == variable && c.Name != ContainerAgent {
				t.Errorf("container %s has %s", c.Name, variable)
			}
		}
	}
	env, err := os.ReadFile(filepath.Join(e.runner.VolumePath(pod, volumeWorkspace), "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env, []byte(variable)) || bytes.Contains(env, []byte(value)) {
		t.Errorf("the tool's environment has %s:\n%s", variable, env)
	}
	if rc := runnerConfigOf(t, e, name, 1); len(rc.Secrets) != 1 || rc.Secrets[0] != variable {
		t.Errorf("runner config secrets %v, want [%s]", rc.Secrets, variable)
	}

	// Where people and other programs look: the value is in none of it.
	status, err := json.Marshal(s.Status)
	if err != nil {
		t.Fatal(err)
	}
	places := map[string][]byte{"the session's status": status}
	for _, args := range [][]string{
		{"get", "events", "-o", "yaml"},
		{"get", "configmap", childName(name, 1), "-o", "yaml"},
		{"logs", pod.Name, "-c", ContainerAgent},
		{"logs", pod.Name, "-c", ContainerWorkspace},
	} {
		out, err := e.cp.Kubectl(t.Context(), append(args, "-n", ns)...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		places["kubectl "+strings.Join(args, " ")] = []byte(out)
	}
	if !bytes.Contains(places["kubectl get events -o yaml"], []byte(name)) {
		t.Errorf("no event names the session; the check for the value in them meant nothing:\n%s", places["kubectl get events -o yaml"])
	}
	for i, req := range model.Requests() {
		places["model request "+strconv.Itoa(i+1)] = req.Body
	}
	for where, b := range places {
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds the value of %s", where, variable)
		}
	}
}

// processesWithEnv are the command lines (arguments joined by spaces) of
// the processes whose environment has the entry kv, as /proc shows them.
// Processes that end while they are read are passed over.
func processesWithEnv(t *testing.T, kv string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, dir := range dirs {
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !bytes.Contains(append(append([]byte{0}, env...), 0), append(append([]byte{0}, kv...), 0)) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		out = append(out, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
	}
	return out
}
