package faults

import (
	"fmt"
	"math/rand/v2"
	"net/url"
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
