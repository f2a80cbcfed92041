package faults

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
)

// TestKillSQLite kills `aerie run` with SIGKILL at random points of
// sessions journaling to SQLite and resumes each to completion.
func TestKillSQLite(t *testing.T) {
	t.Parallel()
	killLoop(t, newEnv(t, ""), 3*scale(), 6)
}

// TestKillPostgres is TestKillSQLite with PostgreSQL.
func TestKillPostgres(t *testing.T) {
	t.Parallel()
	killLoop(t, newEnv(t, testenv.StartPostgres(t).NewDatabase(t)), 2*scale(), 6)
}

// killLoop runs sessions one after the other, each killed up to kills
// times at moments drawn over about two steps from its run's first model
// request — the model's streamed answer, the tool's command, the journal's
// batches and barriers in between — then resumed to its end; the
// invariants are checked after every kill and at the end.
func killLoop(t *testing.T, e *env, sessions, kills int) {
	rng := rand.New(rand.NewPCG(22, uint64(sessions)))
	for i := range sessions {
		s := e.session(t, fmt.Sprintf("kill%d", i))
		if s.killUntilDone(rng, kills) {
			s.checkEnd()
		}
	}
}

// killUntilDone runs the session killed up to kills times, then resumes it
// to its end; it reports whether the session completed.
func (s *sess) killUntilDone(rng *rand.Rand, kills int) bool {
	s.t.Helper()
	completed := false
	for k := 0; k < kills && !completed; k++ {
		completed = s.killed(time.Duration(rng.Int64N(int64(700 * time.Millisecond))))
		if s.stored() {
			s.checkStored()
		}
	}
	if !completed {
		if out := s.run(2 * time.Minute); out.code != 0 {
			violation(s.t, "session %s: the last resume exited %d; stderr:\n%s", s.label, out.code, tail(out.stderr))
			return false
		}
	}
	return true
}
