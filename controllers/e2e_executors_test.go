package controllers

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/mtls"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// whereMCPServer is a stdio MCP server in sh, which answers its one tool,
// where, with the host name it runs with: the name of its pod.
const whereMCPServer = `while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
  *'"method":"initialize"'*)
    printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"where","version":"1"}}}\n' "$id" ;;
  *'"method":"tools/list"'*)
    printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"where","description":"Names the pod the server runs in.","inputSchema":{"type":"object"}}]}}\n' "$id" ;;
  *'"method":"tools/call"'*)
    printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"server in %s"}]}}\n' "$id" "$(uname -n)" ;;
  *'"id":'*)
    [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  esac
done`

// withTools gives a session an executor pod named tools, and the layer of
// the stdio MCP server where, which runs on it.
func (e *e2e) withTools(t *testing.T, name string) func(*aeriev1alpha1.AgentSession) {
	t.Helper()
	server, err := json.Marshal(map[string]any{
		"id": "where", "type": "stdio", "command": "sh", "args": []string{"-c", whereMCPServer},
		"executors": []string{"tools"},
	})
	if err != nil {
		t.Fatal(err)
	}
	layer := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name + "-mcp"},
		Data:       map[string]string{"mcp_servers__where.yaml": string(server)},
	}
	if err := e.cp.Client.Create(t.Context(), layer); err != nil {
		t.Fatal(err)
	}
	return func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Executors = []aeriev1alpha1.ExecutorSpec{{Name: "tools", Image: e.image}}
		s.Spec.Extensions = []aeriev1alpha1.ExtensionLayer{{Name: "where", ConfigMap: &aeriev1alpha1.ConfigMapLayer{Name: layer.Name}}}
	}
}

// testExecutorsRoute runs a session with the workspace container and an
// executor pod: bash and a file tool run where each call says, the stdio
// MCP server on the executor pod; the executor pod ends with the session.
func testExecutorsRoute(t *testing.T, e *e2e) {
	model := testenv.StartModelServer(t,
		testenv.ToolTurn(
			testenv.Call("ws", "bash", map[string]any{"command": "echo workspace > where.txt; echo $HOSTNAME"}),
			testenv.Call("tools", "bash", map[string]any{"command": "echo tools > where.txt; echo $HOSTNAME", "executor": "tools"}),
		),
		testenv.ToolTurn(
			testenv.Call("write", "write_file", map[string]any{"path": "notes.txt", "content": "from the model\n", "executor": "tools"}),
			testenv.Call("mcp", "mcp__where__where__tools", map[string]any{}),
		),
		testenv.ToolTurn(
			testenv.Call("ws-read", "bash", map[string]any{"command": "cat where.txt; ls"}),
			testenv.Call("tools-read", "bash", map[string]any{"command": "cat where.txt notes.txt", "executor": "tools"}),
		),
		answer("Done on both."))
	e.session(t, "routed", model, e.withTools(t, "routed"))
	runner := e.pod(t, "routed")
	tools := e.executorPodOf(t, "routed", 1, "tools")
	s := e.waitFinished(t, "routed")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}
	results := allToolResults(t, model)
	for id, want := range map[string]string{
		"ws":         runner.Name,
		"tools":      tools.Name,
		"mcp":        "server in " + tools.Name,
		"ws-read":    "workspace",
		"tools-read": "tools\nfrom the model",
	} {
		if !strings.Contains(results[id], want) {
			t.Errorf("result of %s = %q, want it to contain %q", id, results[id], want)
		}
	}
	if strings.Contains(results["ws-read"], "notes.txt") {
		t.Errorf("the file written on tools is in the workspace container's workspace: %q", results["ws-read"])
	}
	e.waitExecutorPodsGone(t, "routed")
}

// testExecutorsCancel cancels a session while a tool runs on its executor
// pod: the executor tears the tool's process group down.
func testExecutorsCancel(t *testing.T, e *e2e) {
	model := testenv.StartModelServer(t,
		testenv.ToolTurn(testenv.Call("sleep", "bash", map[string]any{"command": "sleep 300 & wait", "executor": "tools"})))
	e.session(t, "cancel-tools", model, e.withTools(t, "cancel-tools"))
	tools := e.executorPodOf(t, "cancel-tools", 1, "tools")
	var sleeps []int
	testenv.Poll(time.Minute, func() bool {
		sleeps = podCommands(tools.Name, "sleep")
		return len(sleeps) > 0
	})
	if len(sleeps) == 0 {
		t.Fatalf("the tool's sleep does not run in the executor pod %s", tools.Name)
	}
	e.checkRefusesStrangers(t, tools)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":true}}`))
	s := &aeriev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cancel-tools"}}
	if err := e.cp.Client.Patch(t.Context(), s, patch); err != nil {
		t.Fatal(err)
	}
	if s = e.waitFinished(t, "cancel-tools"); s.Status.Phase != aeriev1alpha1.PhaseCancelled {
		t.Errorf("phase %s, want Cancelled", s.Status.Phase)
	}
	testenv.Poll(30*time.Second, func() bool { return len(podCommands(tools.Name, "")) == 0 })
	if left := podCommands(tools.Name, ""); len(left) > 0 {
		t.Errorf("processes of the executor pod %s still run after the cancel: %v", tools.Name, left)
	}
	e.waitExecutorPodsGone(t, "cancel-tools")
}

// testExecutorLost deletes the executor pod while a call runs there: the
// model gets an error naming the executor, and the session finishes.
func testExecutorLost(t *testing.T, e *e2e) {
	model := testenv.StartModelServer(t,
		testenv.ToolTurn(testenv.Call("sleep", "bash", map[string]any{"command": "sleep 300", "executor": "tools"})),
		testenv.ToolTurn(testenv.Call("again", "bash", map[string]any{"command": "true", "executor": "tools"})),
		answer("The tools executor is gone; done without it."))
	e.session(t, "lost-tools", model, e.withTools(t, "lost-tools"))
	tools := e.executorPodOf(t, "lost-tools", 1, "tools")
	testenv.Poll(time.Minute, func() bool { return len(podCommands(tools.Name, "sleep")) > 0 })
	if len(podCommands(tools.Name, "sleep")) == 0 {
		t.Fatalf("the tool's sleep does not run in the executor pod %s", tools.Name)
	}
	if err := e.cp.Client.Delete(t.Context(), tools); err != nil {
		t.Fatal(err)
	}
	s := e.waitFinished(t, "lost-tools")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}
	results := allToolResults(t, model)
	for _, id := range []string{"sleep", "again"} {
		if !strings.Contains(results[id], "tools") {
			t.Errorf("result of %s = %q, want an error naming the executor tools", id, results[id])
		}
	}
}

// checkRefusesStrangers connects to a running executor pod as clients
// other than its attempt's runner: one with no certificate, and the runner
// of another set of credentials. The executor refuses both.
func (e *e2e) checkRefusesStrangers(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil || pod.Status.PodIP == "" {
		t.Fatalf("executor pod %s: IP %q, %v", pod.Name, pod.Status.PodIP, err)
	}
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(runconfig.ExecutorPort))
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // a stranger
	if err == nil {
		// TLS 1.3 reports a refused client certificate on the first read.
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		_ = conn.Close()
	}
	if err == nil {
		t.Errorf("a client without a certificate was served by %s", addr)
	}
	other, _, err := mtls.NewSet([]string{"tools"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if r, err := executor.DialTCP(ctx, addr, "tools", other); err == nil {
		_ = r.Close(ctx)
		t.Errorf("the runner of another set of credentials was served by %s", addr)
	}
}

// executorPodOf waits for the executor pod exec of attempt n.
func (e *e2e) executorPodOf(t *testing.T, session string, n int32, exec string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	name := executorPodName(session, n, exec)
	testenv.Poll(time.Minute, func() bool {
		return e.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: e.ns, Name: name}, &p) == nil
	})
	if p.Name == "" {
		t.Fatalf("executor pod %s was not created", name)
	}
	return &p
}

// waitExecutorPodsGone waits until the session has no executor pod left.
func (e *e2e) waitExecutorPodsGone(t *testing.T, session string) {
	t.Helper()
	left := func() []string {
		var pods corev1.PodList
		if err := e.cp.Client.List(t.Context(), &pods, client.InNamespace(e.ns),
			client.MatchingLabels{LabelSession: session, labelComponent: componentExecutor}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return names
	}
	testenv.Poll(time.Minute, func() bool { return len(left()) == 0 })
	if l := left(); len(l) > 0 {
		t.Errorf("executor pods left after the session: %v", l)
	}
}

// allToolResults are the texts of the tool results the model was sent,
// by call id.
func allToolResults(t *testing.T, model *testenv.ModelServer) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range model.Requests() {
		maps.Copy(out, toolResults(t, r))
	}
	return out
}

// podCommands are the live processes of a pod the local pod runner runs
// whose command is comm (every one with comm ""): its containers', whose
// environment names the pod as HOSTNAME, and their descendants, the
// tools included (whose environment does not).
func podCommands(pod, comm string) []int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	marker := []byte("HOSTNAME=" + pod + "\x00")
	children := map[int][]int{}
	var roots []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, alive := procStat(pid)
		if !alive {
			continue
		}
		ppid, _ := strconv.Atoi(st[1])
		children[ppid] = append(children[ppid], pid)
		if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil && bytes.Contains(env, marker) {
			roots = append(roots, pid)
		}
	}
	var out []int
	seen := map[int]bool{}
	for queue := roots; len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		queue = append(queue, children[pid]...)
		if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); comm == "" || strings.TrimSpace(string(c)) == comm {
			out = append(out, pid)
		}
	}
	return out
}
