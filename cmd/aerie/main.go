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
	// SIGINT and SIGTERM cancel the context instead of killing the process,
	// so commands can clean up and report a cancel as exit status 130.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{
		env:        config.OSEnv(),
		isTerminal: func() bool { return term.IsTerminal(int(os.Stdin.Fd())) },
		checkDB:    checkDatabase,
		version:    version,
		commit:     commit,
	}
	err := run(ctx, a, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "aerie: %v\n", err)
	}
	os.Exit(exitCode(err))
}
