package mtls

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// seeds are FuzzParse's seed corpus, by file name: whether each parses.
var seeds = map[string]bool{
	"runner": true, "executor": true,
	"truncated": false, "two-blocks": false, "swapped-key": false, "foreign-ca": false, "authority-first": false,
}

// TestSeedCorpus: the committed seeds are what they say, valid files and
// damaged ones. MTLS_WRITE_SEEDS=1 writes them afresh first:
//
//	MTLS_WRITE_SEEDS=1 go test -run TestSeedCorpus ./runner/executor/mtls/
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if os.Getenv("MTLS_WRITE_SEEDS") == "1" {
		writeSeeds(t, dir)
	}
	for name, valid := range seeds {
		text, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		quoted, ok := strings.CutPrefix(strings.TrimSpace(string(text)), "go test fuzz v1\n[]byte(")
		if !ok || !strings.HasSuffix(quoted, ")") {
			t.Fatalf("seed %s is not a corpus file of one []byte", name)
		}
		data, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
		if err != nil {
			t.Fatalf("seed %s: %v", name, err)
		}
		if _, err := Parse([]byte(data), name); (err == nil) != valid {
			t.Errorf("seed %s: Parse = %v, want valid %v", name, err, valid)
		}
	}
}

func writeSeeds(t *testing.T, dir string) {
	t.Helper()
	runner, execs := newTestSet(t, "tools")
	other, _ := newTestSet(t)
	r, tl, o := blocks(t, runner.Marshal()), blocks(t, execs["tools"].Marshal()), blocks(t, other.Marshal())
	data := map[string][]byte{
		"runner":          runner.Marshal(),
		"executor":        execs["tools"].Marshal(),
		"truncated":       runner.Marshal()[:300],
		"two-blocks":      encode(r[0], r[1]),
		"swapped-key":     encode(r[0], tl[1], r[2]),
		"foreign-ca":      encode(r[0], r[1], o[2]),
		"authority-first": encode(r[2], r[1], r[2]),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name := range seeds {
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data[name])))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
