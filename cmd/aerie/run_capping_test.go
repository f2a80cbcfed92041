package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunToolResultLimits checks that [tool_results] reaches the results
// the model reads: max_lines caps a result by lines, and max_bytes = 0 with
// max_lines = 0 does not cap at all, whatever head_bytes and tail_bytes
// say.
func TestRunToolResultLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, config, command string
		want                  func(string) error
	}{
		{
			name:    "max_lines",
			config:  "[tool_results]\nmax_lines = 4\n",
			command: "seq 1 10",
			want: func(got string) error {
				if !strings.HasPrefix(got, "1\n2\n") || !strings.HasSuffix(got, "9\n10\n") || !strings.Contains(got, "bytes dropped") ||
					strings.Contains(got, "\n5\n") {
					return fmt.Errorf("not lines 1, 2, a marker, 9 and 10")
				}
				return nil
			},
		},
		{
			name:    "no limits",
			config:  "[tool_results]\nmax_bytes = 0\nmax_lines = 0\n",
			command: "head -c 100000 /dev/zero | tr '\\0' x",
			want: func(got string) error {
				if got != strings.Repeat("x", 100000) {
					return fmt.Errorf("capped: %d bytes", len(got))
				}
				return nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, toolTurn(call("c", "bash", map[string]any{"command": tt.command})), answer("done"))
			if err := os.WriteFile(filepath.Join(e.home, "config.toml"), []byte(tt.config), 0o644); err != nil {
				t.Fatal(err)
			}
			if out := e.run("run", "print it"); out.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
			}
			got := toolResults(t, e.model.Requests()[1])["c"].text
			if err := tt.want(got); err != nil {
				shown := got
				if len(shown) > 200 {
					shown = shown[:100] + " ... " + shown[len(shown)-100:]
				}
				t.Errorf("the model read %q: %v", shown, err)
			}
		})
	}
}
