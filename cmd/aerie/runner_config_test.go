package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// droppedNote is the note a capped tool result carries between its head
// and its tail.
var droppedNote = regexp.MustCompile(`\[\.\.\. \d+ bytes dropped[^\]]*\]`)

// TestRunnerLayerConfig runs a pod whose namespace layer caps tool results
// in its config.toml: the model gets the capped output, the cap of the
// nearer layer beating the platform layer's, and the spec's defaults still
// cap where no layer sets anything.
func TestRunnerLayerConfig(t *testing.T) {
	t.Parallel()
	big := `printf 'x%.0s' $(seq 1 5000); echo; echo the-end`
	layers := func(t *testing.T, ns, platform string) []runconfig.Layer {
		dirs := map[string]string{}
		for name, doc := range map[string]string{"ns": ns, "platform": platform} {
			dir := t.TempDir()
			if doc != "" {
				testenv.WriteTree(t, dir, map[string]string{"config.toml": doc})
			}
			dirs[name] = dir
		}
		return []runconfig.Layer{
			{Name: "team-defaults", Kind: runconfig.LayerNamespace, Dir: dirs["ns"], Source: "configmap/team-defaults"},
			{Name: "base", Kind: runconfig.LayerPlatform, Dir: dirs["platform"], Source: "configmap/base"},
		}
	}

	t.Run("a namespace layer caps tool results", func(t *testing.T) {
		t.Parallel()
		p := newPod(t, "", toolTurn(call("c1", "bash", map[string]any{"command": big})), answer("Done."))
		cfg := p.config(func(c *runconfig.Config) {
			c.Layers = layers(t,
				"[tool_results]\nmax_bytes = 300\nhead_bytes = 100\ntail_bytes = 100\n",
				"[tool_results]\nmax_bytes = 100000\nhead_bytes = 40000\ntail_bytes = 40000\n")
		})
		res := p.run(t.Context(), cfg)
		if res.code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
		}
		reqs := p.model.Requests()
		got := toolResults(t, reqs[1])["c1"].text
		// What the model sees is the kept head and tail and, on a line of
		// its own between them (a line break either side), the note that
		// says what was dropped and where the whole is.
		kept := droppedNote.ReplaceAllString(got, "")
		if len(kept) > 100+100+4 || kept == got || !strings.HasSuffix(strings.TrimSpace(got), "the-end") {
			t.Errorf("tool result keeps %d bytes besides its note, want the namespace layer's 100 + 100:\n%s",
				len(kept), got)
		}
	})

	t.Run("without config the spec's defaults cap", func(t *testing.T) {
		t.Parallel()
		huge := `printf 'x%.0s' $(seq 1 40000); echo; echo the-end`
		p := newPod(t, "", toolTurn(call("c1", "bash", map[string]any{"command": huge})), answer("Done."))
		res := p.run(t.Context(), p.config(func(c *runconfig.Config) { c.Layers = layers(t, "", "") }))
		if res.code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
		}
		got := toolResults(t, p.model.Requests()[1])["c1"].text
		if len(got) > 32768 || !strings.Contains(got, "bytes dropped") {
			t.Errorf("tool result is %d bytes, want it capped at the default 32768", len(got))
		}
	})

	t.Run("a namespace layer turns compression on", func(t *testing.T) {
		t.Parallel()
		for _, on := range []bool{true, false} {
			p := newPod(t, "", answer("Done."))
			ns := ""
			if on {
				ns = "[tool_results]\ncompress_context = true\n"
			}
			res := p.run(t.Context(), p.config(func(c *runconfig.Config) { c.Layers = layers(t, ns, "") }))
			if res.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
			}
			if got := offersRetrieve(t, p.model.Requests()[0]); got != on {
				t.Errorf("compress_context %v in the namespace layer: retrieve offered is %v", on, got)
			}
		}
	})

	t.Run("a platform layer names the compaction model", func(t *testing.T) {
		t.Parallel()
		const window = 32_000
		p := newPod(t, "", longBuild()...)
		p.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
		res := p.run(t.Context(), p.config(func(c *runconfig.Config) {
			c.Layers = layers(t, "", "[compaction]\nmodel = \"claude-haiku-4-5\"\n")
			c.Model.ContextWindow = window
			// Compaction needs a minute of the budget left.
			c.Budget = runconfig.Budget{MaxDuration: runconfig.Duration(10 * time.Minute), MaxTurns: 2 * compactionSteps}
		}))
		if res.code != 0 {
			t.Fatalf("exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
		}
		summaries := 0
		for i, req := range p.model.Requests() {
			var body struct{ Model string }
			if err := req.Decode(&body); err != nil {
				t.Fatal(err)
			}
			want := "claude-sonnet-4-5"
			if strings.Contains(string(req.Body), "You summarize the first part of a conversation") {
				want = "claude-haiku-4-5"
				summaries++
			}
			if body.Model != want {
				t.Errorf("request %d asks %s, want %s", i+1, body.Model, want)
			}
		}
		if summaries == 0 {
			t.Error("no summary request: the conversation was never compacted")
		}
	})

	t.Run("an invalid layer config stops the attempt", func(t *testing.T) {
		t.Parallel()
		p := newPod(t, "")
		res := p.run(t.Context(), p.config(func(c *runconfig.Config) {
			c.Layers = layers(t, "[tool_results]\nmax_bytes = \"big\"\n", "")
		}))
		if res.code != runconfig.ExitConfig || res.report.Outcome != runconfig.OutcomeFailed {
			t.Fatalf("exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
		}
		for _, want := range []string{"namespace layer team-defaults (configmap/team-defaults)", "config.toml:2:1: tool_results.max_bytes: want an integer, got a string"} {
			if !strings.Contains(res.report.Reason, want) {
				t.Errorf("reason %q does not contain %q", res.report.Reason, want)
			}
		}
		if n := len(p.model.Requests()); n != 0 {
			t.Errorf("%d model requests, want none", n)
		}
	})
}
