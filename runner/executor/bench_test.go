package executor

import (
	"context"
	"errors"
	"io"
	"testing"
)

// BenchmarkForegroundCommand runs `true` the way the bash tool runs a
// foreground command: start, read the output to its end, wait, tear the
// group down. What it measures beyond the fork and exec is the executor's
// own work after each command: reaping, and finding out that nothing of
// the group is left.
//
//	go test -run '^$' -bench ForegroundCommand -count 10 ./runner/executor/
func BenchmarkForegroundCommand(b *testing.B) {
	l := newLocal(b, Options{})
	ctx := context.Background()
	for b.Loop() {
		p, err := l.Start(ctx, Command{Argv: []string{"true"}, CombinedOutput: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAll(p.Stdout()); err != nil {
			b.Fatal(err)
		}
		if exit, err := p.Wait(ctx); err != nil || exit.Code != 0 {
			b.Fatalf("Wait = %+v, %v", exit, err)
		}
		// Not found: settled already, as most are.
		if _, err := l.Teardown(ctx, p.ID()); err != nil && !errors.Is(err, ErrNotFound) {
			b.Fatal(err)
		}
	}
}
