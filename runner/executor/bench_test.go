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
		runForeground(ctx, b, l, Command{Argv: []string{"true"}, CombinedOutput: true})
	}
}

// runForeground runs cmd as the bash tool runs a foreground command:
// start, read the output to its end, wait for exit 0, tear the group down
// (not found: settled already, as most are).
func runForeground(ctx context.Context, b *testing.B, l *Local, cmd Command) {
	b.Helper()
	p, err := l.Start(ctx, cmd)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadAll(p.Stdout()); err != nil {
		b.Fatal(err)
	}
	if exit, err := p.Wait(ctx); err != nil || exit.Code != 0 {
		b.Fatalf("Wait = %+v, %v", exit, err)
	}
	if _, err := l.Teardown(ctx, p.ID()); err != nil && !errors.Is(err, ErrNotFound) {
		b.Fatal(err)
	}
}
