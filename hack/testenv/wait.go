package testenv

import (
	"testing"
	"time"
)

// pollInterval is how often Poll checks its condition.
const pollInterval = 10 * time.Millisecond

// Poll checks cond until it holds or timeout passes, and reports whether it
// held. It checks once more at the deadline, so a condition that became true
// during the last sleep counts. Use it where a test cannot end at once — in a
// goroutine, or to report with Errorf what it saw — and Eventually otherwise.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(pollInterval)
	}
	return cond()
}

// Eventually ends the test unless cond holds within timeout; what says what
// was waited for, for the failure's message.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("after %s: %s", timeout, what)
	}
}
