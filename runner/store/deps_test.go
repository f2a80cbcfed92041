package store_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDriversStayInBackends: the database drivers are linked by the
// backends (store/postgres, store/sqlite) and what opens them, never by the
// store's types, the transcript, or the parts of the runner that only speak
// them: the agent loop, the journal, the event writers and the kubectl
// plugin.
func TestDriversStayInBackends(t *testing.T) {
	const module = "github.com/aerie-run/aerie/"
	pkgs := []string{"runner/store", "runner/transcript", "runner/agent", "runner/journal", "runner/events", "cmd/kubectl-aerie"}
	for _, pkg := range pkgs {
		out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/jackc/pgx") || strings.HasPrefix(dep, "modernc.org/sqlite") {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}
