package attempt

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/session"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestMountedLayers: a mounted layer's trust.toml counts only when
// spec.trust.sources names its kind.
func TestMountedLayers(t *testing.T) {
	t.Parallel()
	cfg := &runconfig.Config{
		Layers: []runconfig.Layer{
			{Name: "go", Kind: runconfig.LayerSpec, Dir: "/layers/0", Source: "configmap/go", Digest: "sha256:0"},
			{Name: "team", Kind: runconfig.LayerNamespace, Dir: "/layers/1"},
			{Name: "base", Kind: runconfig.LayerPlatform, Dir: "/layers/2"},
		},
		Trust: runconfig.Trust{Sources: []string{"Extensions", "Platform"}},
	}
	want := []layer.Layer{
		{Name: "go", Kind: layer.Kind(runconfig.LayerSpec), Dir: "/layers/0", Source: "configmap/go", Digest: "sha256:0"},
		{Name: "team", Kind: layer.Kind(runconfig.LayerNamespace), Dir: "/layers/1", IgnorePins: true},
		{Name: "base", Kind: layer.Kind(runconfig.LayerPlatform), Dir: "/layers/2"},
	}
	if diff := cmp.Diff(want, mountedLayers(cfg)); diff != "" {
		t.Errorf("layers (-want +got):\n%s", diff)
	}
}

// TestSessionPins: the pinsFrom documents are parsed in order; a bad one
// is named by its index and source.
func TestSessionPins(t *testing.T) {
	t.Parallel()
	sum := strings.Repeat("a", 64)
	good := runconfig.TrustPins{Source: "configmap/pins/trust.toml", TOML: "[[pin]]\npath = \".aerie/tools/t.toml\"\nsha256 = \"" + sum + "\"\n"}
	pins, err := sessionPins(&runconfig.Config{Trust: runconfig.Trust{Pins: []runconfig.TrustPins{good, good}}})
	if err != nil || len(pins) != 2 || pins[0].Path != ".aerie/tools/t.toml" || pins[0].SHA256 != sum {
		t.Fatalf("pins %+v, %v", pins, err)
	}
	bad := runconfig.TrustPins{Source: "configmap/bad/trust.toml", TOML: "[[pin]]\npath = \"/etc/passwd\"\nsha256 = \"00\"\n"}
	_, err = sessionPins(&runconfig.Config{Trust: runconfig.Trust{Pins: []runconfig.TrustPins{good, bad}}})
	if err == nil || !strings.Contains(err.Error(), "trust.pins[1] (spec.trust.pinsFrom): configmap/bad/trust.toml") {
		t.Errorf("bad pins: %v", err)
	}
}

func TestHasPrompt(t *testing.T) {
	t.Parallel()
	user := func(blocks ...transcript.Block) transcript.Entry {
		return transcript.Entry{Payload: transcript.UserMessage{Content: blocks}}
	}
	text := func(s string) transcript.Block { return transcript.Block{Type: transcript.BlockText, Text: s} }
	entries := []transcript.Entry{
		user(text("Fix the failing tests.")),
		{Payload: transcript.AssistantMessage{Content: []transcript.Block{text("Go on.")}}},
		user(transcript.Block{Type: transcript.BlockThinking, Text: "Later."}, text("Also this.")),
	}
	for _, tt := range []struct {
		prompt string
		want   bool
	}{
		{"", true},
		{"Fix the failing tests.", true},
		{"Also this.", true},
		{"Go on.", false}, // the model's, not the user's
		{"Later.", false}, // not a text block
		{"Fix the failing tests", false},
	} {
		if got := hasPrompt(transcript.Snapshot{Entries: entries}, tt.prompt); got != tt.want {
			t.Errorf("hasPrompt(%q) = %v, want %v", tt.prompt, got, tt.want)
		}
	}
	// After a compaction the task is among the compacted entries, which
	// the replacement stands in for: a later attempt must not give it again.
	compacted := transcript.Snapshot{Compaction: &transcript.Compaction{Replacement: []transcript.Block{text("The summary.")}}, CompactionSeq: 5, Entries: entries[1:]}
	if !hasPrompt(compacted, "Fix the failing tests.") {
		t.Error("hasPrompt of a compacted session = false, want true: the replacement stands in for the task")
	}
}

// TestLayerScript: the scripted provider's script comes from the nearest
// layer that has one, YAML before JSON, and the model names a file, not a
// path.
func TestLayerScript(t *testing.T) {
	t.Parallel()
	near, far := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(near, "scripted", "b.json"), filepath.Join(far, "scripted", "a.yaml"), filepath.Join(far, "scripted", "b.yaml")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("turns: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	layers := []runconfig.Layer{{Dir: near}, {Dir: far}}
	for model, want := range map[string]string{"a": filepath.Join(far, "scripted", "a.yaml"), "b": filepath.Join(near, "scripted", "b.json")} {
		if got, err := layerScript(layers, model); err != nil || got != want {
			t.Errorf("layerScript(%q) = %q, %v; want %q", model, got, err, want)
		}
	}
	for _, model := range []string{"", ".", "..", "../a", "x/a"} {
		if _, err := layerScript(layers, model); err == nil || !strings.Contains(err.Error(), "want a plain name") {
			t.Errorf("layerScript(%q): %v", model, err)
		}
	}
	if _, err := layerScript(layers, "c"); err == nil || !strings.Contains(err.Error(), `no script for scripted model "c"`) {
		t.Errorf("layerScript(c): %v", err)
	}
}

func TestBudget(t *testing.T) {
	t.Parallel()
	if b := budget(runconfig.Budget{}); b.MaxDuration != 0 || len(b.Stop) != 0 {
		t.Errorf("no budget: %+v", b)
	}
	b := budget(runconfig.Budget{MaxDuration: runconfig.Duration(time.Minute), MaxTurns: 3, MaxTokens: 1000})
	if b.MaxDuration != time.Minute || len(b.Stop) != 2 {
		t.Errorf("budget %+v, want a minute and two stop conditions", b)
	}
}

// TestOptionsAttempts: the first attempt starts, resumes or forks the
// session as spec says; a later one resumes the session when the lost
// attempt stored it, without asking the task again once it is journaled,
// and otherwise starts it as the first would have.
func TestOptionsAttempts(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	ws := t.TempDir()
	env := Env{Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)}
	cfg := func(ch func(*runconfig.Config)) *runconfig.Config {
		c := &runconfig.Config{
			Namespace: "team-a", AgentSession: "fix-tests", Prompt: "Fix the failing tests.",
			Session:  runconfig.Session{ID: uuid.NewString(), Attempt: 1},
			Model:    runconfig.Model{Provider: runconfig.ProviderAnthropic, Name: "claude-sonnet-4-5", ContextWindow: 4096},
			Executor: runconfig.Executor{Workspace: ws},
		}
		if ch != nil {
			ch(c)
		}
		return c
	}
	type want struct {
		spec   session.Spec
		prompt string
	}
	stored := cfg(func(c *runconfig.Config) { c.Session.Attempt = 2 })
	id := uuid.MustParse(stored.Session.ID)
	if _, err := st.Create(t.Context(), "team-a", store.NewSession{ID: id, Dir: ws, Kind: store.SessionHeadless}); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(t.Context(), "team-a", id, []transcript.Entry{{Seq: 1, Payload: transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "Fix the failing tests."}}}, CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	source := uuid.NewString()
	for name, tt := range map[string]struct {
		cfg  *runconfig.Config
		want want
	}{
		"first": {cfg(nil), want{prompt: "Fix the failing tests."}},
		"resumeFrom": {cfg(func(c *runconfig.Config) { c.Session.ResumeFrom = source }),
			want{spec: session.Spec{Resume: source}, prompt: "Fix the failing tests."}},
		"forkFrom": {cfg(func(c *runconfig.Config) { c.Session.ForkFrom, c.Session.ForkAtSequence = source, 7 }),
			want{spec: session.Spec{ForkFrom: source, ForkAt: 7}, prompt: "Fix the failing tests."}},
		"retry, not stored": {cfg(func(c *runconfig.Config) { c.Session.Attempt, c.Session.ForkFrom = 2, source }),
			want{spec: session.Spec{ForkFrom: source}, prompt: "Fix the failing tests."}},
		"retry, stored":       {stored, want{spec: session.Spec{Resume: stored.Session.ID}}},
		"retry, asked again":  {cfg(func(c *runconfig.Config) { *c = *stored; c.Prompt = "Go on." }), want{spec: session.Spec{Resume: stored.Session.ID}, prompt: "Go on."}},
		"retry, stored, fork": {cfg(func(c *runconfig.Config) { *c = *stored; c.Session.ForkFrom = source }), want{spec: session.Spec{Resume: stored.Session.ID}}},
	} {
		t.Run(name, func(t *testing.T) {
			opts, err := options(t.Context(), st, tt.cfg, ws, env)
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			w.spec.Tenant, w.spec.ID, w.spec.Label = "team-a", uuid.MustParse(tt.cfg.Session.ID), "fix-tests"
			if diff := cmp.Diff(w, want{opts.Session, opts.Prompt}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if opts.Model.Settings != (transcript.Settings{Provider: runconfig.ProviderAnthropic, Model: "claude-sonnet-4-5"}) || opts.Model.ContextWindow != 4096 {
				t.Errorf("model %+v", opts.Model)
			}
			if opts.Extensions.Dir != ws || opts.Extensions.System != session.DefaultSystemPrompt(ws) {
				t.Errorf("extensions %+v", opts.Extensions)
			}
		})
	}

	if _, err := options(t.Context(), st, cfg(func(c *runconfig.Config) { c.Session.ID = "lost" }), ws, env); err == nil || !strings.Contains(err.Error(), "session.id") {
		t.Errorf("bad session id: %v", err)
	}
}

// TestOptionsSecrets: in a pod, a plugin's ${VAR} resolves only for the
// names the session's secrets fill, though the runner's environment
// holds others (the model's key among them).
func TestOptionsSecrets(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ws := t.TempDir()
	vars := map[string]string{"TOKEN": "tok-value", "ANTHROPIC_API_KEY": "sk-ant-value", "HOME": "/root"}
	env := Env{Getenv: func(k string) string { return vars[k] }, Logger: slog.New(slog.DiscardHandler)}
	cfg := &runconfig.Config{
		Namespace: "team-a", Prompt: "p", Session: runconfig.Session{ID: uuid.NewString(), Attempt: 1},
		Model:    runconfig.Model{Provider: runconfig.ProviderAnthropic, Name: "claude-sonnet-4-5"},
		Executor: runconfig.Executor{Workspace: ws}, Secrets: []string{"TOKEN"},
	}
	opts, err := options(t.Context(), st, cfg, ws, env)
	if err != nil {
		t.Fatal(err)
	}
	var got mcp.Resolved
	v := opts.Extensions.MCPVariables
	if out, err := v.Expand("Bearer ${TOKEN}", "", &got); err != nil || out != "Bearer tok-value" {
		t.Errorf("a secret: %q, %v", out, err)
	}
	for _, name := range []string{"ANTHROPIC_API_KEY", "HOME"} {
		if _, err := v.Expand("${"+name+"}", "", &got); err == nil || !strings.Contains(err.Error(), "spec.secrets") {
			t.Errorf("%s resolved in a pod: %v", name, err)
		}
	}
}

// TestModelCredentials: a model API without its key in the environment
// stops the launch, naming the variable and where it comes from.
func TestModelCredentials(t *testing.T) {
	t.Parallel()
	cfg := &runconfig.Config{Model: runconfig.Model{Provider: runconfig.ProviderAnthropic}}
	newModel := modelFactory(cfg, config.Defaults("").Model, Env{Getenv: func(string) string { return "" }})
	_, err := newModel(transcript.Settings{Provider: runconfig.ProviderAnthropic, Model: "claude-sonnet-4-5"})
	if err == nil || !strings.Contains(err.Error(), "spec.model.apiKeySecretRef") {
		t.Errorf("no key: %v", err)
	}
}

// TestModelBounds: the layers' [model] bounds reach the provider of the
// session's model calls.
func TestModelBounds(t *testing.T) {
	t.Parallel()
	cfg := &runconfig.Config{Model: runconfig.Model{Provider: runconfig.ProviderAnthropic}}
	bounds := config.Model{StreamIdleTimeout: 7 * time.Second, MaxAnswerBytes: 4096}
	var got provider.Config
	env := Env{
		Getenv: func(string) string { return "sk-test" },
		NewProvider: func(pc provider.Config) (provider.Provider, error) {
			got = pc
			return nil, errors.New("not made")
		},
	}
	_, _ = modelFactory(cfg, bounds, env)(transcript.Settings{Provider: runconfig.ProviderAnthropic, Model: "claude-sonnet-4-5"})
	if got.StreamIdleTimeout != 7*time.Second || got.MaxAnswerBytes != 4096 {
		t.Errorf("provider config has idle timeout %v and answer cap %d, want 7s and 4096",
			got.StreamIdleTimeout, got.MaxAnswerBytes)
	}
}

// TestReportCounts: the report counts the session's tool calls and
// compactions, all attempts: those stored in what the attempt continues
// from (up to the cut of a fork) and the run's own compactions.
func TestReportCounts(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	id := uuid.New()
	if _, err := st.Create(t.Context(), "team-a", store.NewSession{ID: id, Dir: t.TempDir(), Kind: store.SessionHeadless}); err != nil {
		t.Fatal(err)
	}
	text := func(s string) []transcript.Block { return []transcript.Block{{Type: transcript.BlockText, Text: s}} }
	now := time.Now()
	es := []transcript.Entry{
		{Seq: 1, Payload: transcript.UserMessage{Content: text("Fix the failing tests.")}, CreatedAt: now},
		{Seq: 2, Payload: transcript.ToolCall{CallID: "c1", Name: "bash", Input: []byte(`{"command":"go test"}`)}, CreatedAt: now},
		{Seq: 3, Payload: transcript.Compaction{Replacement: text("Ran the tests."), FirstKept: 3, Provenance: transcript.Provenance{Trigger: "auto"}}, CreatedAt: now},
		{Seq: 4, Payload: transcript.ToolCall{CallID: "c2", Name: "bash", Input: []byte(`{"command":"go vet"}`)}, CreatedAt: now},
		{Seq: 5, Payload: transcript.Compaction{Replacement: text("Ran the tests and vet."), FirstKept: 5, Provenance: transcript.Provenance{Trigger: "manual"}}, CreatedAt: now},
	}
	if err := st.Append(t.Context(), "team-a", id, es); err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]struct {
		spec session.Spec
		want counts
	}{
		"new":          {session.Spec{}, counts{}},
		"resumed":      {session.Spec{Resume: id.String()}, counts{toolCalls: 2, compactions: 2}},
		"fork":         {session.Spec{ForkFrom: id.String()}, counts{toolCalls: 2, compactions: 2}},
		"fork, at cut": {session.Spec{ForkFrom: id.String(), ForkAt: 3}, counts{toolCalls: 1, compactions: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := priorCounts(t.Context(), st, "team-a", tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("priorCounts = %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := priorCounts(t.Context(), st, "team-a", session.Spec{Resume: "lost"}); err == nil {
		t.Error("priorCounts of a bad session id: no error")
	}

	res := session.Report{Session: store.Session{ID: id}, ExitCode: 0}
	res.Result.Outcome = transcript.OutcomeCompleted
	res.Result.Usage = transcript.Usage{InputTokens: 100, OutputTokens: 10, Requests: 3}
	res.Result.Compactions = []transcript.Provenance{{Trigger: "auto", Messages: 12}}
	got := report(res, 4, 2).Usage
	want := runconfig.Usage{InputTokens: 100, OutputTokens: 10, Requests: 3, ToolCalls: 4, Compactions: 3}
	if got != want {
		t.Errorf("report usage = %+v, want %+v", got, want)
	}
}

// TestReportAgentTypes: the report carries the children's usage by agent
// type, at most runconfig.MaxAgentTypes entries, the least used folded.
func TestReportAgentTypes(t *testing.T) {
	t.Parallel()
	res := session.Report{Session: store.Session{ID: uuid.New()}}
	for i := range 10 {
		res.AgentTypes = append(res.AgentTypes, subagent.AgentType{
			Name: fmt.Sprintf("p%d", i), Subagents: 1, Turns: 1,
			Usage: transcript.Usage{InputTokens: int64(100 * (i + 1)), OutputTokens: 1, CacheReadTokens: 2, Requests: 1},
		})
	}
	got := report(res, 0, 0).AgentTypes
	if len(got) != runconfig.MaxAgentTypes {
		t.Fatalf("%d agent types reported, want %d", len(got), runconfig.MaxAgentTypes)
	}
	if got[0] != (runconfig.AgentTypeUsage{Name: "p3", Subagents: 1, Requests: 1, InputTokens: 400, OutputTokens: 1, CacheReadTokens: 2}) {
		t.Errorf("first kept %+v, want p3's", got[0])
	}
	if o := got[7]; o.Name != "_other" || o.Subagents != 3 || o.InputTokens != 600 {
		t.Errorf("folded %+v, want p0..p2 as _other", o)
	}
	b, err := runconfig.EncodeReport(report(res, 0, 0))
	if err != nil || len(b) > runconfig.MaxReportBytes {
		t.Errorf("encoded report: %d bytes, %v", len(b), err)
	}
}
