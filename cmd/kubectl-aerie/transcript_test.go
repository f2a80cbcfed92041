package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aeriev1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/transcript"
)

// The workspace diff storeAsRunner stores.
const (
	testDiffStat  = " x.go | 1 +\n 1 file changed, 1 insertion(+)\n"
	testDiffPatch = "diff --git a/x.go b/x.go\nnew file mode 100644\n--- /dev/null\n+++ b/x.go\n@@ -0,0 +1 @@\n+package x\n"
)

// storeAsRunner stores a session as a runner pod does: under the
// namespace, with the AgentSession's uid as its id.
func storeAsRunner(t *testing.T, path, namespace string, id uuid.UUID) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if _, err := st.Create(t.Context(), namespace, store.NewSession{
		ID: id, Kind: store.SessionHeadless, Dir: "/workspace", Label: "fix-tests",
		Settings: transcript.Settings{Provider: "scripted", Model: "demo"},
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var entries []transcript.Entry
	for i, p := range []transcript.Payload{
		transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "make the tests pass"}}},
		transcript.AssistantMessage{Content: []transcript.Block{
			{Type: transcript.BlockToolUse, ID: "c1", Name: "bash", Input: json.RawMessage(`{"command":"go test ./..."}`)},
		}},
		transcript.ToolCall{CallID: "c1", Name: "bash", Input: json.RawMessage(`{"command":"go test ./..."}`)},
		transcript.ToolResult{CallID: "c1", Content: []transcript.Block{{Type: transcript.BlockText, Text: "ok  example.com/x"}}},
		transcript.ToolCompletion{CallID: "c1", Status: transcript.ToolOK},
		transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "The tests pass."}}},
		transcript.Usage{InputTokens: 300, OutputTokens: 20, Requests: 2},
		transcript.Checkpoint{Turn: 2, Outcome: transcript.OutcomeCompleted},
		transcript.WorkspaceDiff{Base: "4b825dc642cb6eb9a060e54bf8d69288fbee4904", Stat: testDiffStat, Patch: testDiffPatch,
			Bytes: int64(len(testDiffPatch)), Cap: 1 << 20},
	} {
		entries = append(entries, transcript.Entry{Seq: int64(i + 1), Payload: p, CreatedAt: now})
	}
	if err := st.Append(t.Context(), namespace, id, entries); err != nil {
		t.Fatal(err)
	}
}

// storeShortened adds to the session a listing the model saw compressed,
// its original kept in the store as a runner pod keeps it, and returns the
// original.
func storeShortened(t *testing.T, path, namespace string, id uuid.UUID) string {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	var original strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&original, "file_%04d.txt (0 bytes)\n", i)
	}
	view := "file_0000.txt (0 bytes)\n[... 999 more files]\n" +
		"[directory listing output compressed from 24000 to 40 bytes; the original (sha256:00) in full: retrieve(handle=c2)]"
	entries := []transcript.Entry{
		{Seq: 9, Payload: transcript.ToolCall{CallID: "c2", Name: "list_directory", Input: json.RawMessage(`{"path":"many"}`)}},
		{Seq: 10, Payload: transcript.ToolResult{CallID: "c2", Content: []transcript.Block{{Type: transcript.BlockText, Text: view}}}},
		{Seq: 11, Payload: transcript.ToolCompletion{CallID: "c2", Status: transcript.ToolOK}},
	}
	if err := st.Append(t.Context(), namespace, id, entries); err != nil {
		t.Fatal(err)
	}
	if err := st.PutToolOutput(t.Context(), namespace, id, "c2", []byte(original.String())); err != nil {
		t.Fatal(err)
	}
	return original.String()
}

// TestLogsTranscript prints the transcript of an AgentSession from a SQLite
// session store: kubectl-aerie resolves the session to its stored id and
// has the aerie beside it export it, as kubectl-aerie and through aerie.
func TestLogsTranscript(t *testing.T) {
	t.Parallel()
	cp := testenv.StartControlPlane(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../aerie", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ns := cp.Namespace(t)
	s := &aeriev1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-tests", Namespace: ns},
		Spec:       aeriev1.AgentSessionSpec{Prompt: "make the tests pass", Model: aeriev1.ModelSpec{Provider: "scripted", Name: "demo"}},
	}
	if err := cp.Client.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	pending := &aeriev1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: ns},
		Spec:       s.Spec,
	}
	if err := cp.Client.Create(t.Context(), pending); err != nil {
		t.Fatal(err)
	}
	s.Status.Phase = aeriev1.PhaseSucceeded
	s.Status.SessionID = string(s.UID)
	if err := cp.Client.Status().Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "sessions.db")
	storeAsRunner(t, db, ns, uuid.MustParse(string(s.UID)))
	original := storeShortened(t, db, ns, uuid.MustParse(string(s.UID)))

	const systemPath = "/usr/local/bin:/usr/bin:/bin"
	run := func(t *testing.T, env []string, path string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(path, args...)
		cmd.Env = append([]string{"PATH=" + systemPath, "HOME=" + t.TempDir()}, env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s: %v", path, err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}
	kube := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns}
	for _, tt := range []struct {
		name, program string
		env, args     []string
	}{
		{"kubectl-aerie with --db", "kubectl-aerie", nil, []string{"--db", "sqlite://" + db}},
		{"aerie with the environment", "aerie", []string{"AERIE_DATABASE_URL=sqlite://" + db}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"logs", "fix-tests", "--transcript"}, kube...), tt.args...)
			out, stderr, code := run(t, tt.env, filepath.Join(bin, tt.program), args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			for _, want := range []string{
				"# Session " + string(s.UID),
				"## #1 · User\n\nmake the tests pass",
				"**Tool call** `bash` · `c1`",
				"### #4 · Result of `bash` · `c1`\n\n```\nok  example.com/x\n```",
				"The tests pass.",
				"| Input tokens | 300 |",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the transcript lacks %q:\n%s", want, out)
				}
			}
		})
	}

	t.Run("originals", func(t *testing.T) {
		t.Parallel()
		for _, program := range []string{"kubectl-aerie", "aerie"} {
			dbFlag := []string{"--db", "sqlite://" + db}
			out, stderr, code := run(t, nil, filepath.Join(bin, program), append(append([]string{"logs", "fix-tests", "--tool-output", "c2"}, kube...), dbFlag...)...)
			if code != 0 || out != original {
				t.Errorf("%s logs --tool-output: exit %d, %q, want %q\n%s", program, code, out, original, stderr)
			}
			out, stderr, code = run(t, nil, filepath.Join(bin, program), append(append([]string{"logs", "fix-tests", "--transcript", "--originals"}, kube...), dbFlag...)...)
			for _, want := range []string{
				"The original: `aerie session output " + string(s.UID) + " c2 --namespace " + ns + "`",
				"Original of `c2` (" + strconv.Itoa(len(original)) + " bytes):",
				"file_0999.txt",
			} {
				if code != 0 || !strings.Contains(out, want) {
					t.Errorf("%s logs --transcript --originals: exit %d, no %q\n%s", program, code, want, stderr)
				}
			}
		}
	})

	t.Run("get --diff", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"--diff"}, testDiffPatch},
			{[]string{"--diff", "--stat"}, testDiffStat},
		} {
			args := append(append([]string{"get", "fix-tests", "--db", "sqlite://" + db}, kube...), tt.args...)
			out, stderr, code := run(t, nil, filepath.Join(bin, "kubectl-aerie"), args...)
			if code != 0 || out != tt.want {
				t.Errorf("get %v: exit %d, stdout %q, want %q\n%s", tt.args, code, out, tt.want, stderr)
			}
		}
		_, stderr, code := run(t, nil, filepath.Join(bin, "kubectl-aerie"), append([]string{"get", "--stat"}, kube...)...)
		if code != 1 || !strings.Contains(stderr, "goes with --diff") {
			t.Errorf("get --stat without --diff: exit %d\n%s", code, stderr)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		t.Parallel()
		dbFlag := []string{"--db", "sqlite://" + db}
		alone := t.TempDir() // kubectl-aerie without aerie
		testenv.CopyFile(t, filepath.Join(bin, "kubectl-aerie"), filepath.Join(alone, "kubectl-aerie"), 0o755)
		for _, tt := range []struct {
			name, program string
			args          []string
			code          int
			want          []string
		}{
			{"no database", filepath.Join(bin, "kubectl-aerie"), []string{"fix-tests"}, 1, []string{"--db", "$AERIE_DATABASE_URL"}},
			{"no session id yet", filepath.Join(bin, "kubectl-aerie"), append([]string{"pending"}, dbFlag...), 1, []string{"session pending has no stored session id yet"}},
			{"no aerie", filepath.Join(alone, "kubectl-aerie"), append([]string{"fix-tests"}, dbFlag...), 1, []string{"needs aerie", "go install github.com/aerie-run/aerie/cmd/aerie@"}},
			{"originals without the transcript", filepath.Join(bin, "kubectl-aerie"), append([]string{"fix-tests", "--tool-output", "c2", "--originals"}, dbFlag...), 1, []string{"--tool-output prints one original alone"}},
			{"another database", filepath.Join(bin, "kubectl-aerie"), []string{"fix-tests", "--db", "sqlite://" + filepath.Join(t.TempDir(), "none.db")}, 1, []string{"no session database at"}},
		} {
			args := append(append([]string{"logs", "--transcript"}, kube...), tt.args...)
			_, stderr, code := run(t, nil, tt.program, args...)
			if code != tt.code {
				t.Errorf("%s: exit %d, want %d\n%s", tt.name, code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%s: stderr %q lacks %q", tt.name, stderr, w)
				}
			}
		}
	})
}
