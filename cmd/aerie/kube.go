package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
)

// kubeBinary is aerie's client for clusters. Its commands live in a binary
// of their own so that aerie, which runs sessions, does not link client-go:
// every package a Go program links is initialised at each start, and the
// Kubernetes client and API machinery cost aerie run about 7 ms and 5 MiB
// of its resident set before it does anything (and every runner pod runs
// aerie twice).
const kubeBinary = "kubectl-aerie"

// callerVersionEnv tells kubectl-aerie the version of the aerie that ran
// it, so that it can warn when the two differ.
const callerVersionEnv = "AERIE_CALLER_VERSION"

// kubeCommands are the commands aerie hands to kubectl-aerie.
var kubeCommands = []struct{ name, short string }{
	{"submit", "Create an AgentSession in a cluster and, with --wait, exit with its outcome"},
	{"get", "Show AgentSessions: their phase, outcome, usage and session id"},
	{"cancel", "Cancel an AgentSession: its runner tears its processes down and records the cancel"},
	{"logs", "Print the events of an AgentSession's runner pod (JSON Lines)"},
	{"layer", "Pack a directory of extensions into a layer ConfigMap, and unpack one"},
}

// newKubeCmds returns the commands that run kubectl-aerie. They parse no
// flags of their own: the arguments, --help included, go to kubectl-aerie
// as they are, and kubectl-aerie replaces this process, so its output, exit
// status and signal handling are the command's.
func newKubeCmds(a *app) []*cobra.Command {
	cmds := make([]*cobra.Command, 0, len(kubeCommands))
	for _, kc := range kubeCommands {
		cmds = append(cmds, &cobra.Command{
			Use:   kc.name,
			Short: kc.short,
			Long: kc.short + ".\n\nThis command is kubectl-aerie's (" + kubeBinary + " " + kc.name + "), " +
				"which aerie runs from its own\ndirectory or from PATH; `aerie " + kc.name + " --help` shows its flags.",
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				path, err := findKubeBinary()
				if err != nil {
					return err
				}
				run := a.exec
				if run == nil {
					run = execProcess
				}
				env := append(os.Environ(), callerVersionEnv+"="+a.version)
				return run(path, append([]string{commandName, kc.name}, args...), env)
			},
		})
	}
	return cmds
}

// findKubeBinary finds kubectl-aerie beside the running aerie, then on
// PATH.
func findKubeBinary() (string, error) {
	p, err := cli.FindCompanion(kubeBinary)
	if errors.Is(err, cli.ErrNoCompanion) {
		return "", fmt.Errorf("this command needs %s, aerie's client for clusters, beside aerie or on PATH: "+
			"build both with `make build`, or install it with "+
			"`go install github.com/aerie-run/aerie/cmd/%s@VERSION` (the version of your aerie)", kubeBinary, kubeBinary)
	}
	return p, err
}

// execProcess replaces this process with the program at path.
func execProcess(path string, argv, env []string) error {
	if err := syscall.Exec(path, argv, env); err != nil {
		return fmt.Errorf("run %s: %w", path, err)
	}
	return nil // not reached: exec does not return on success
}
