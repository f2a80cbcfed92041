package mtls

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestWriteSeeds writes FuzzParse's seed corpus when MTLS_WRITE_SEEDS=1:
//
//	MTLS_WRITE_SEEDS=1 go test -run TestWriteSeeds ./runner/executor/mtls/
func TestWriteSeeds(t *testing.T) {
	if os.Getenv("MTLS_WRITE_SEEDS") != "1" {
		t.Skip("writes the seed corpus only when MTLS_WRITE_SEEDS=1")
	}
	runner, execs := newTestSet(t, "tools")
	other, _ := newTestSet(t)
	r, tl, o := blocks(t, runner.Marshal()), blocks(t, execs["tools"].Marshal()), blocks(t, other.Marshal())
	seeds := map[string][]byte{
		"runner":          runner.Marshal(),
		"executor":        execs["tools"].Marshal(),
		"truncated":       runner.Marshal()[:300],
		"two-blocks":      encode(r[0], r[1]),
		"swapped-key":     encode(r[0], tl[1], r[2]),
		"foreign-ca":      encode(r[0], r[1], o[2]),
		"authority-first": encode(r[2], r[1], r[2]),
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
