package runconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testID = "0b7e2c1a-3f7d-4a52-9d0e-6f1c2b3a4d5e"

func validConfig() *Config {
	return &Config{
		APIVersion:   APIVersion,
		Kind:         Kind,
		Namespace:    "team-a",
		AgentSession: "fix-tests",
		Session:      Session{ID: testID, Attempt: 1},
		Prompt:       "Fix the failing tests.",
		Model:        Model{Provider: ProviderAnthropic, Name: "claude-sonnet-4-5", MaxOutputTokens: 16384},
		Layers: []Layer{
			{Name: "team-go-tooling", Kind: LayerSpec, Dir: LayerDir(0), Digest: "sha256:" + strings.Repeat("ab", 32)},
			{Name: "platform-defaults", Kind: LayerPlatform, Dir: LayerDir(1)},
		},
		Trust:    Trust{Sources: []string{"Extensions", "Platform"}, Pins: []TrustPins{{Source: "configmap/pins/trust.toml", TOML: "[pins]\n"}}},
		Budget:   Budget{MaxDuration: Duration(30 * time.Minute), MaxTurns: 60, MaxTokens: 4_000_000},
		Executor: Executor{Socket: DefaultSocket, Workspace: DefaultWorkspace, WorkingDir: "services/billing"},
		Executors: []RemoteExecutor{{Name: "tools", Address: "10.0.0.7:7443", Credential: DefaultExecutorCredential,
			Workspace: DefaultWorkspace}},
	}
}

func TestConfigRoundTrip(t *testing.T) {
	t.Parallel()
	want := validConfig()
	b, err := want.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"apiVersion: runner.aerie.run/v1", "maxDuration: 30m0s", "dir: /etc/aerie/layers/1"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("encoded config lacks %q:\n%s", s, b)
		}
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(Marshal()): %v\n%s", err, b)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got.Executor.Dir() != "/workspace/services/billing" {
		t.Errorf("Executor.Dir() = %q", got.Executor.Dir())
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(c *Config)
		field  string
	}{
		{"api version", func(c *Config) { c.APIVersion = "v1" }, "apiVersion"},
		{"kind", func(c *Config) { c.Kind = "ConfigMap" }, "kind"},
		{"namespace", func(c *Config) { c.Namespace = "" }, "namespace"},
		{"agent session", func(c *Config) { c.AgentSession = "" }, "agentSession"},
		{"session id", func(c *Config) { c.Session.ID = "fix-tests" }, "session.id"},
		{"attempt", func(c *Config) { c.Session.Attempt = 0 }, "session.attempt"},
		{"resume and fork", func(c *Config) { c.Session.ResumeFrom = testID; c.Session.ForkFrom = testID }, "session.forkFrom"},
		{"resume other id", func(c *Config) { c.Session.ResumeFrom = "1b7e2c1a-3f7d-4a52-9d0e-6f1c2b3a4d5e" }, "session.resumeFrom"},
		{"fork not uuid", func(c *Config) { c.Session.ForkFrom = "x" }, "session.forkFrom"},
		{"fork sequence alone", func(c *Config) { c.Session.ForkAtSequence = 4 }, "session.forkAtSequence"},
		{"no prompt", func(c *Config) { c.Prompt = " \n" }, "prompt"},
		{"provider", func(c *Config) { c.Model.Provider = "gemini" }, "model.provider"},
		{"model name", func(c *Config) { c.Model.Name = "" }, "model.name"},
		{"base url", func(c *Config) { c.Model.Provider = ProviderOpenAICompatible }, "model.baseURL"},
		{"context window", func(c *Config) { c.Model.ContextWindow = -1 }, "model.contextWindow"},
		{"max output", func(c *Config) { c.Model.MaxOutputTokens = -1 }, "model.maxOutputTokens"},
		{"hook approval", func(c *Config) { c.HookApproval = "maybe" }, "hookApproval"},
		{"approval without call", func(c *Config) { c.Approvals = []Approval{{Allowed: true}} }, "approvals[0].callID"},
		{"layer name", func(c *Config) { c.Layers[0].Name = "" }, "layers[0].name"},
		{"layer kind", func(c *Config) { c.Layers[1].Kind = "project" }, "layers[1].kind"},
		{"layer dir", func(c *Config) { c.Layers[1].Dir = "layers/1" }, "layers[1].dir"},
		{"layer dir twice", func(c *Config) { c.Layers[1].Dir = c.Layers[0].Dir }, "layers[1].dir"},
		{"layer digest", func(c *Config) { c.Layers[0].Digest = "md5:00" }, "layers[0].digest"},
		{"trust source", func(c *Config) { c.Trust.Sources = []string{"Workspace"} }, "trust.sources[0]"},
		{"trust pin source", func(c *Config) { c.Trust.Pins[0].Source = "" }, "trust.pins[0].source"},
		{"max duration", func(c *Config) { c.Budget.MaxDuration = -1 }, "budget.maxDuration"},
		{"max turns", func(c *Config) { c.Budget.MaxTurns = -1 }, "budget.maxTurns"},
		{"max tokens", func(c *Config) { c.Budget.MaxTokens = -1 }, "budget.maxTokens"},
		{"socket", func(c *Config) { c.Executor.Socket = "executor.sock" }, "executor.socket"},
		{"workspace", func(c *Config) { c.Executor.Workspace = "" }, "executor.workspace"},
		{"working dir", func(c *Config) { c.Executor.WorkingDir = "../etc" }, "executor.workingDir"},
		{"executor name", func(c *Config) { c.Executors[0].Name = "Tools" }, "executors[0].name"},
		{"executor named workspace", func(c *Config) { c.Executors[0].Name = "workspace" }, "executors[0].name"},
		{"executor address", func(c *Config) { c.Executors[0].Address = "10.0.0.7" }, "executors[0].address"},
		{"executor credential", func(c *Config) { c.Executors[0].Credential = "runner.pem" }, "executors[0].credential"},
		{"executor workspace", func(c *Config) { c.Executors[0].Workspace = "" }, "executors[0].workspace"},
		{"two default executors", func(c *Config) {
			c.Executors[0].Default = true
			c.Executors = append(c.Executors, RemoteExecutor{Name: "gpu", Address: "10.0.0.8:7443", Default: true,
				Credential: DefaultExecutorCredential, Workspace: DefaultWorkspace})
		}, "executors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig()
			tt.change(c)
			err := c.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v, want a *FieldError", err)
			}
			if fe.Field != tt.field {
				t.Errorf("Validate() names field %q (%v), want %q", fe.Field, err, tt.field)
			}
		})
	}
}

func TestConfigValidateContinuations(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.Prompt = ""
	c.Session.ResumeFrom = c.Session.ID
	if err := c.Validate(); err != nil {
		t.Errorf("a resumed session without a prompt: %v", err)
	}
	c = validConfig()
	c.Prompt = ""
	c.Session.ForkFrom = "1b7e2c1a-3f7d-4a52-9d0e-6f1c2b3a4d5e"
	c.Session.ForkAtSequence = 12
	if err := c.Validate(); err != nil {
		t.Errorf("a fork without a prompt: %v", err)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, err := validConfig().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := Load(write("good.yaml", string(good))); err != nil {
		t.Fatalf("Load(good): %v", err)
	}
	tests := []struct {
		name, content string
		want          []string
	}{
		{"missing", "", []string{"read runner config", "missing.yaml"}},
		{"empty.yaml", "\n", []string{"empty.yaml", "empty"}},
		{"unknown.yaml", string(good) + "promt: typo\n", []string{"unknown.yaml", `unknown field "promt"`}},
		{"provider.yaml", strings.Replace(string(good), "provider: anthropic", "provider: gemini", 1), []string{"provider.yaml", "model.provider", "gemini"}},
		{"duration.yaml", strings.Replace(string(good), "maxDuration: 30m0s", "maxDuration: soon", 1), []string{"duration.yaml", "soon"}},
		{"notyaml.yaml", "{{{", []string{"notyaml.yaml"}},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, "missing.yaml")
		if tt.name != "missing" {
			p = write(tt.name, tt.content)
		}
		_, err := Load(p)
		if err == nil {
			t.Errorf("Load(%s) succeeded", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Load(%s) = %v, want it to mention %q", tt.name, err, w)
			}
		}
	}
}

func TestAPIKeyEnv(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		ProviderAnthropic: "ANTHROPIC_API_KEY", ProviderOpenAI: "OPENAI_API_KEY",
		ProviderOpenAICompatible: "OPENAI_API_KEY", ProviderScripted: "",
	} {
		if got := APIKeyEnv(p); got != want {
			t.Errorf("APIKeyEnv(%s) = %q, want %q", p, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	good, err := validConfig().Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("apiVersion: runner.aerie.run/v1\nkind: RunnerConfig\n"))
	f.Add([]byte("budget: {maxDuration: 1h}"))
	f.Add([]byte("- a\n- b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		// What parses must encode and parse back to the same.
		b, err := c.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed config: %v", err)
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(Marshal(Parse(x))): %v\n%s", err, b)
		}
		if diff := cmp.Diff(c, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
