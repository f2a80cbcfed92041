// Command aerie is aerie's command-line interface: the local runner, setup
// and, as they arrive, the runner and executor entry points used in pods.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/harden"
	"github.com/aerie-run/aerie/runner/session"
)

// Set at build time with
//
//	-ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD)"
//
// They are package variables only because the linker can set nothing else;
// main copies them into the app and nothing else reads them.
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	// Before anything holds a secret: tools run as this user must not read
	// this process's environment or memory.
	if err := harden.Process(); err != nil {
		fmt.Fprintf(os.Stderr, "aerie: %v\n", err)
		os.Exit(1)
	}
	// SIGINT and SIGTERM cancel the context instead of killing the process,
	// so commands can clean up (aerie run tears down its processes and
	// drains its journal) and exit with the status the signal calls for.
	// The cause says which signal it was: 130 for SIGINT, 143 for SIGTERM.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cancel(&session.SignalError{Signal: sig.(syscall.Signal)})
		// A second signal means now: stop waiting for the cleanup.
		sig = <-sigs
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
	stop := func() { signal.Stop(sigs); cancel(nil) }
	a := &app{
		env:              config.OSEnv(),
		isTerminal:       func() bool { return term.IsTerminal(int(os.Stdin.Fd())) },
		stdoutIsTerminal: func() bool { return term.IsTerminal(int(os.Stdout.Fd())) },
		checkDB:          checkDatabase,
		version:          version,
		commit:           commit,
		exec:             execProcess,
	}
	err := run(ctx, a, os.Args[1:])
	stop()
	if err != nil && err.Error() != "" {
		fmt.Fprintf(os.Stderr, "aerie: %v\n", err)
	}
	os.Exit(exitCode(err))
}
