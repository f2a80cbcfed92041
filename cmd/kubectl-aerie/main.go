// Command kubectl-aerie is aerie's client for clusters: it submits
// AgentSessions and waits for their outcome, shows, cancels and follows
// them, and packs directories of extensions into layer ConfigMaps.
//
// It is a binary of its own, apart from aerie, because it links client-go:
// aerie runs sessions — on a laptop, in CI and as every runner pod's two
// processes — and starts faster and smaller without the Kubernetes client
// (a Go program initialises every package it links, used or not). Users do
// not see the split: `aerie submit` (and get, cancel, logs, layer) runs
// kubectl-aerie from aerie's own directory or from PATH, and kubectl finds
// it as a plugin, so `kubectl aerie submit` works too.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/aerie-run/aerie/cmd/internal/cli"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=...",
// as for aerie; --version prints both.
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{
		name:             displayName(os.Args[0]),
		stdoutIsTerminal: func() bool { return term.IsTerminal(int(os.Stdout.Fd())) },
		version:          version,
		commit:           commit,
	}
	if w := versionWarning(version, os.Getenv(callerVersionEnv)); w != "" {
		fmt.Fprintf(os.Stderr, "%s: warning: %s\n", a.name, w)
	}
	cmd := newRootCmd(a)
	cmd.SetArgs(os.Args[1:])
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil && err.Error() != "" {
		fmt.Fprintf(os.Stderr, "%s: %v\n", a.name, err)
	}
	os.Exit(exitCode(err))
}

// callerVersionEnv is set by aerie, when it runs kubectl-aerie for one of
// its commands, to its own version.
const callerVersionEnv = "AERIE_CALLER_VERSION"

// versionWarning says what to do when kubectl-aerie (mine) and the aerie
// that ran it (caller) are different releases, which happens when one was
// upgraded and the other, elsewhere on PATH, was not; "" when they agree,
// when aerie did not run it, or for development builds.
func versionWarning(mine, caller string) string {
	if caller == "" || caller == mine || caller == "dev" || mine == "dev" {
		return ""
	}
	return fmt.Sprintf("kubectl-aerie is %s but aerie is %s; install the same release of both "+
		"(go install github.com/aerie-run/aerie/cmd/kubectl-aerie@%s)", mine, caller, caller)
}

// displayName is the command name the usage shows: "aerie" when aerie ran
// this binary for one of its commands (it passes its own name as argv[0]),
// "kubectl aerie" when kubectl ran it as a plugin or a user ran it
// directly.
func displayName(argv0 string) string {
	if filepath.Base(argv0) == aerieName {
		return aerieName
	}
	return "kubectl aerie"
}

// aerieName is aerie's command name, which aerie passes as argv[0].
const aerieName = "aerie"

// app is what the commands take from the process besides the standard
// streams.
type app struct {
	// name is the command name the usage and errors show.
	name string
	// stdoutIsTerminal reports whether stdout is a terminal: the commands
	// write for a person then, and JSON Lines otherwise. Nil means no.
	stdoutIsTerminal func() bool
	// version and commit describe the build.
	version, commit string
}

// exitCode maps a command's error to the process exit status: 130 when the
// user interrupted it, 1 for any failure without a status of its own.
func exitCode(err error) int {
	var ee *cli.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, context.Canceled):
		return 130
	default:
		return 1
	}
}

func newRootCmd(a *app) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:           a.name,
		Short:         "Submit and follow aerie's AgentSessions in a cluster, and pack extension layers",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !showVersion {
				return cmd.Help()
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "kubectl-aerie %s (commit %s)\n", a.version, a.commit)
			return err
		},
	}
	root.Flags().BoolVarP(&showVersion, "version", "v", false, "version for kubectl-aerie")
	root.AddCommand(
		newSubmitCmd(a),
		newGetCmd(),
		newCancelCmd(),
		newApproveCmd(),
		newLogsCmd(),
		newLayerCmd(),
	)
	return root
}
