package faults

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
)

// TestPostgresOutage runs sessions journaling to PostgreSQL through a
// proxy that drops every connection and stalls all traffic for up to a few
// seconds (longer under FAULTS_SCALE, within the journal's retry time) at
// random moments, with real server restarts in between: each session must
// complete, by itself, with nothing lost.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	pg := testenv.StartPostgres(t)
	dsn := pg.NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, u.Host)
	u.Host = px.Addr()
	e := newEnv(t, u.String())
	maxStall := time.Duration(min(3*scale(), 20)) * time.Second
	rng := rand.New(rand.NewPCG(22, 2))
	for i := range 2 * scale() {
		s := e.session(t, fmt.Sprintf("outage%d", i))
		done := make(chan outcome, 1)
		go func() { done <- s.run(3 * time.Minute) }()
		asked := s.requests()
		for start := time.Now(); s.requests() == asked && time.Since(start) < 30*time.Second; {
			time.Sleep(5 * time.Millisecond)
		}
		var out outcome
	faults:
		for n := 0; ; n++ {
			select {
			case out = <-done:
				break faults
			case <-time.After(time.Duration(rng.Int64N(int64(400 * time.Millisecond)))):
			}
			switch {
			case n%5 == 4 && i == 0:
				pg.Restart(t)
			case rng.IntN(2) == 0:
				px.Drop()
			default:
				px.stallFor(time.Duration(rng.Int64N(int64(maxStall))))
			}
			counts.faults.Add(1)
		}
		if out.code != 0 {
			violation(t, "session %s exited %d through the outages; stderr:\n%s", s.label, out.code, tail(out.stderr))
			continue
		}
		s.checkEnd()
	}
}

// TestPostgresLongOutage makes PostgreSQL unreachable in the middle of a
// session, for 8 s in the bounded run and 60 s under FAULTS_SCALE, in two
// ways: every connection dropped and new ones refused, and every
// connection stalled (accepted, nothing forwarded either way). The journal
// retries within its window (journal.DefaultRetryFor, longer than the
// outage), the agent waits at its next barrier meanwhile instead of running
// calls it could not record, and the session completes by itself once the
// database is back, with nothing lost and nothing twice.
func TestPostgresLongOutage(t *testing.T) {
	t.Parallel()
	outage := 8 * time.Second
	if scale() > 1 {
		outage = time.Minute
	}
	pg := testenv.StartPostgres(t)
	for _, tc := range []struct {
		name       string
		start, end func(*proxy)
	}{
		{name: "refused", start: (*proxy).Cut, end: (*proxy).Restore},
		{name: "stalled", start: (*proxy).Stall, end: (*proxy).Flow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(pg.NewDatabase(t))
			if err != nil {
				t.Fatal(err)
			}
			px := startProxy(t, u.Host)
			u.Host = px.Addr()
			s := newEnv(t, u.String()).session(t, "long"+tc.name)
			done := make(chan outcome, 1)
			go func() { done <- s.run(3*time.Minute + outage) }()
			// The session is stored by the time its second request comes.
			for start := time.Now(); s.requests() < 2 && time.Since(start) < time.Minute; {
				time.Sleep(5 * time.Millisecond)
			}
			s.checkStored()
			tc.start(px)
			counts.faults.Add(1)
			before := s.stepsRun()
			time.Sleep(outage)
			during := s.stepsRun() - before
			tc.end(px)
			out := <-done
			t.Logf("%s for %v: %d commands started meanwhile; exit %d after %v", tc.name, outage, during, out.code, out.took.Round(time.Second))
			if during > 1 {
				// One call may have been recorded just before the outage;
				// any other ran unrecorded.
				violation(t, "session %s: %d commands ran while the database was unreachable, want at most 1", s.label, during)
			}
			if out.code != 0 {
				violation(t, "session %s exited %d after a %v outage; stderr:\n%s", s.label, out.code, outage, tail(out.stderr))
				return
			}
			if before+during >= steps {
				t.Errorf("session %s: all its steps ran before the database came back: the outage missed it", s.label)
			}
			s.checkEnd()
		})
	}
}

// stepsRun counts the commands of the session's steps that have run.
func (s *sess) stepsRun() int {
	b, _ := os.ReadFile(filepath.Join(s.ws, "steps.log"))
	return strings.Count(string(b), "\n")
}
