package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/spf13/cobra"

	aeriev1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// aerieBinary is the program that reads the session store. kubectl-aerie
// links no database driver (a cluster client has no business with the
// store's drivers, and the layering test keeps it so), so for a transcript
// it resolves the AgentSession to its stored session and runs
// `aerie session export` on it.
const aerieBinary = "aerie"

// transcript writes the Markdown transcript of the AgentSession name from
// the session store at db, with aerie: the session's id is its status's,
// and its tenant is its namespace, as the runner stores it. The database
// URL goes to aerie in $AERIE_DATABASE_URL rather than on its command line,
// where any user of the machine could read a password in it.
func (c *kubeClient) transcript(cmd *cobra.Command, name, db string, originals bool) error {
	args := []string{"export", "", "--format", "markdown"}
	if originals {
		args = append(args, "--originals")
	}
	return c.fromStore(cmd, name, db, "--transcript", args...)
}

// toolOutput writes the byte-exact original of the AgentSession name's tool
// call callID, a result the model saw shortened, with aerie session output.
func (c *kubeClient) toolOutput(cmd *cobra.Command, name, db, callID string) error {
	return c.fromStore(cmd, name, db, "--tool-output", "output", "", callID)
}

// diff writes the workspace diff of the AgentSession name (its patch, or
// with stat its stat) with aerie session diff.
func (c *kubeClient) diff(cmd *cobra.Command, name, db string, stat bool) error {
	args := []string{"diff", ""}
	if stat {
		args = append(args, "--stat")
	}
	return c.fromStore(cmd, name, db, "--diff", args...)
}

// fromStore runs `aerie session ARGS --namespace NS` for the stored
// session of the AgentSession name, its id in place of args[1]. flag names
// the option that asked, for the errors.
func (c *kubeClient) fromStore(cmd *cobra.Command, name, db, flag string, args ...string) error {
	if db == "" {
		return fmt.Errorf("%s reads the session store: give its URL with --db or $%s "+
			"(the database the controller's --database-secret names)", flag, runconfig.DatabaseURLEnv)
	}
	s, err := c.get(cmd.Context(), name)
	if err != nil {
		return fmt.Errorf("get session %s: %w", name, err)
	}
	return runOnStored(cmd, cmd.OutOrStdout(), s, db, flag, args...)
}

// runOnStored runs `aerie session ARGS --namespace NS` for the stored
// session of s, its id in place of args[1], its output to out.
func runOnStored(cmd *cobra.Command, out io.Writer, s *aeriev1.AgentSession, db, flag string, args ...string) error {
	id := s.Status.SessionID
	if id == "" {
		return fmt.Errorf("session %s has no stored session id yet (phase %s): its runner has not started; "+
			"try again once it runs", s.Name, cli.Dash(string(s.Status.Phase)))
	}
	path, err := cli.FindCompanion(aerieBinary)
	if errors.Is(err, cli.ErrNoCompanion) {
		return errors.New(flag + " needs aerie beside kubectl-aerie or on PATH: build both with `make build`, " +
			"or install it with `go install github.com/aerie-run/aerie/cmd/aerie@VERSION` (the version of your kubectl-aerie)")
	}
	if err != nil {
		return err
	}
	args[1] = id
	return runAerie(cmd, out, path, db, append(append([]string{"session"}, args...), "--namespace", s.Namespace)...)
}

// result prints the structured result of the AgentSession name: the one
// in its status, or the store's entry its structuredRef names, read by
// aerie session result.
func (c *kubeClient) result(cmd *cobra.Command, name, db string) error {
	s, err := c.get(cmd.Context(), name)
	if err != nil {
		return fmt.Errorf("get session %s: %w", name, err)
	}
	r := s.Status.Result
	switch {
	case r != nil && r.Structured != nil:
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\n", r.Structured.Raw)
		return err
	case r == nil || r.StructuredRef == nil:
		outcome := "-"
		if r != nil {
			outcome = string(r.Outcome)
		}
		return fmt.Errorf("session %s has no structured result (phase %s, outcome %s): "+
			"it asks for none (spec.result), has not finished, or ended without a valid one",
			s.Name, cli.Dash(string(s.Status.Phase)), outcome)
	case db == "":
		return fmt.Errorf("the result of session %s is only in the session store: give its URL with --db or $%s "+
			"(the database the controller's --database-secret names)", s.Name, runconfig.DatabaseURLEnv)
	}
	path, err := cli.FindCompanion(aerieBinary)
	if errors.Is(err, cli.ErrNoCompanion) {
		return errors.New("--result needs aerie beside kubectl-aerie or on PATH to read the session store: " +
			"build both with `make build`")
	}
	if err != nil {
		return err
	}
	ref := r.StructuredRef
	return runAerie(cmd, cmd.OutOrStdout(), path, db, "session", "result", ref.SessionID,
		"--seq", strconv.FormatInt(ref.Seq, 10), "--namespace", s.Namespace)
}

// runAerie runs aerie with args, its output to out and its errors the
// command's. A failure aerie reported keeps its exit status and is not
// reported again.
func runAerie(cmd *cobra.Command, out io.Writer, path, db string, args ...string) error {
	run := exec.CommandContext(cmd.Context(), path, args...)
	run.Env = append(os.Environ(), runconfig.DatabaseURLEnv+"="+db)
	run.Stdout, run.Stderr = out, cmd.ErrOrStderr()
	err := run.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && cmd.Context().Err() == nil:
		return &cli.ExitError{Code: exit.ExitCode()}
	case err != nil && cmd.Context().Err() != nil:
		return context.Cause(cmd.Context())
	case err != nil:
		return fmt.Errorf("run %s: %w", path, err)
	}
	return nil
}
