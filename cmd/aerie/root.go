package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/config"
)

// app is what the commands take from the process besides the standard
// streams (which cobra carries: SetIn, SetOut, SetErr). main fills it from
// the os package; tests fill it with their own environment so they can run
// in parallel without os.Setenv.
type app struct {
	// env resolves $AERIE_HOME and the user's home directory.
	env config.Env
	// isTerminal reports whether stdin is an interactive terminal. Commands
	// prompt only then, so a script never hangs on a question.
	isTerminal func() bool
	// stdoutIsTerminal reports whether stdout is a terminal: aerie run
	// writes for a person then, and JSON Lines otherwise. Nil means no.
	stdoutIsTerminal func() bool
	// checkDB tests a database connection (see dbcheck.go).
	checkDB dbCheckFunc
	// getwd returns the current directory, which scopes the session
	// commands; nil means os.Getwd.
	getwd func() (string, error)
	// version and commit describe the build.
	version, commit string
	// exec replaces the process with another program (the cluster
	// commands run kubectl-aerie); nil means execProcess.
	exec func(path string, argv, env []string) error
}

// commandName is aerie's name, as users type it, as it names itself to
// kubectl-aerie, and as its trajectories name the agent.
const commandName = "aerie"

// listCmd names the subcommand that lists what a command group manages:
// every group (mcp, plugin, process, session) calls it the same.
const listCmd = "list"

// Exit statuses, matching the spec's session commands: 130 when the user
// cancels (declines a confirmation, ends input, presses Ctrl-C), 1 for every
// other failure.
const (
	exitFailure  = 1
	exitCanceled = 130
)

// errCanceled means the user stopped the command; it exits with 130.
var errCanceled = errors.New("canceled")

// exitCode maps a command's error to the process exit status.
func exitCode(err error) int {
	var ee *cli.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, errCanceled), errors.Is(err, context.Canceled):
		return exitCanceled
	default:
		return exitFailure
	}
}

// warn prints a warning on stderr. A warning that cannot be written has
// nowhere else to go, and the command's outcome does not depend on it, so
// the write's error is dropped.
func warn(cmd *cobra.Command, format string, args ...any) {
	_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "warning: "+format+"\n", args...)
}

// run executes the aerie command line in args.
func run(ctx context.Context, a *app, args []string) error {
	cmd := newRootCmd(a)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

func newRootCmd(a *app) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:   commandName,
		Short: "Run AI coding agents, locally or as Kubernetes jobs",
		// Usage is for mistakes in the command line, not for every failure;
		// errors are printed once, by main.
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version is aerie's own flag rather than cobra's Version field:
		// printing "aerie VERSION" through cobra takes SetVersionTemplate,
		// and a text/template that can be executed makes the linker keep
		// every exported method of every type in the binary (a third of
		// its size, and start-up time with it). No command may set a
		// template; TestNoTemplates checks.
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !showVersion {
				return pflag.ErrHelp // the usage, as for a command that does not run
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "aerie %s\n", a.version)
			return err
		},
	}
	root.Flags().BoolVarP(&showVersion, "version", "v", false, "version for aerie")
	root.AddCommand(
		newVersionCmd(a),
		newSetupCmd(a),
		newProcessCmd(func() string { return config.Home(a.env) }),
		newSessionCmd(a),
		newRunCmd(a),
		newApproveCmd(a),
		newConsoleCmd(a),
		newExecutorCmd(),
		newExtensionsCmd(a),
		newMCPCmd(a),
		newRunnerCmd(a),
		newGitPushCmd(a),
		newPluginCmd(a),
		newMemoryCmd(a),
	)
	root.AddCommand(newKubeCmds(a)...)
	return root
}
