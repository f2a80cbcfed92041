package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/pricing"
)

// TestLoadPrices: the project file's [prices."model"] tables replace the
// global file's model by model and add to them; a bad one names the file,
// the line and the key, quoted where the model name has a dot.
func TestLoadPrices(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, map[string]string{
		"home/config.toml": "[prices.\"gpt-4.1\"]\ninput = 1\noutput = 2\n[prices.mine]\ninput = 0.5\noutput = 1\n",
		"ws/.aerie/config.toml": "[prices.\"GPT-4.1\"]\ninput = 3\noutput = 4\ncache_read = 0.25\n" +
			"[prices.\"anthropic/claude-sonnet-4-5\"]\ninput = 2\noutput = 9\n",
	})
	got, err := Load(Options{Home: filepath.Join(dir, "home"), WorkDir: filepath.Join(dir, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	want := pricing.Table{
		"gpt-4.1":                     {Input: 3, Output: 4, CacheRead: 0.25, CacheWrite: 3},
		"mine":                        {Input: 0.5, Output: 1, CacheRead: 0.5, CacheWrite: 0.5},
		"anthropic/claude-sonnet-4-5": {Input: 2, Output: 9, CacheRead: 2, CacheWrite: 2},
	}
	if diff := cmp.Diff(want, got.Config.Prices); diff != "" {
		t.Errorf("Prices (-want +got):\n%s", diff)
	}

	testenv.WriteTree(t, dir, map[string]string{"ws/.aerie/config.toml": "# prices\n[prices.\"gpt-4.1\"]\ninput = 1\n"})
	_, err = Load(Options{Home: filepath.Join(dir, "home"), WorkDir: filepath.Join(dir, "ws")})
	if err == nil || !strings.Contains(err.Error(), `config.toml:2:2: prices."gpt-4.1".output: missing`) {
		t.Errorf("Load error = %v, want the key placed", err)
	}
}
