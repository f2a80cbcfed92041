package sqlite

import "testing"

func TestDSNEscapesPath(t *testing.T) {
	t.Parallel()
	got := dsn("/tmp/a?b#c%d/sessions.db", true)
	want := "file:/tmp/a%3fb%23c%25d/sessions.db?"
	if len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("dsn = %q, want it to start with %q", got, want)
	}
}
