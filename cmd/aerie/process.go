package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/process"
)

// newProcessCmd is `aerie process`: the preserved background process
// groups recorded under home()/processes. home is resolved when a
// subcommand runs.
func newProcessCmd(home func() string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "process",
		Short: "List and end background process groups that headless runs left running",
		Long: `A headless run leaves the process groups of background commands running when
it ends (except when its budget expired) and records each under
$AERIE_HOME/processes. These commands list and end them.

Before anything is signalled, the record's process group and the birth
fingerprint of its leader are checked, so a PID that now belongs to another
process is never signalled: such a record is reported as identity_mismatch,
or unverifiable when it cannot be checked, and kept. Termination sends
SIGTERM to the group, then SIGKILL after two seconds, also to processes that
escaped the group. A group that has already exited counts as terminated.

Status names in --json output are stable: running, terminated,
already_exited, identity_mismatch, unverifiable, corrupt, failed, not_found.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newProcessListCmd(home), newProcessTerminateCmd(home), newProcessCleanCmd(home))
	return cmd
}

func newProcessListCmd(home func() string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   listCmd,
		Short: "List recorded process groups, forgetting those that have exited",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			entries, err := process.NewRegistry(home()).List(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), struct {
					Processes []process.Entry `json:"processes"`
				}{entries})
			}
			return printEntries(cmd.OutOrStdout(), entries)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func newProcessTerminateCmd(home func() string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "terminate PROCESS_ID",
		Short: "End one recorded process group",
		Long: `Terminate ends the recorded process group PROCESS_ID and removes its record.
Exit status: 0 when the group was terminated or had already exited, 1
otherwise (identity mismatch, unverifiable, corrupt or unknown record,
processes that survived SIGKILL).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res := process.NewRegistry(home()).Terminate(cmd.Context(), args[0], process.DefaultGrace)
			var err error
			if asJSON {
				err = cli.WriteJSON(cmd.OutOrStdout(), res)
			} else {
				err = printResults(cmd.OutOrStdout(), []process.Result{res})
			}
			if err != nil {
				return err
			}
			if !res.Status.Resolved() {
				return fmt.Errorf("process %s: %s", res.ID, res.Status)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newProcessCleanCmd(home func() string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "End every recorded process group",
		Long: `Clean takes one snapshot of the recorded process groups and terminates each,
going on after records it cannot resolve. Exit status: 0 when every record
was resolved (terminated or already exited), 1 when any remains.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			results, err := process.NewRegistry(home()).Clean(cmd.Context(), process.DefaultGrace)
			if err != nil {
				return err
			}
			unresolved := 0
			for _, r := range results {
				if !r.Status.Resolved() {
					unresolved++
				}
			}
			if asJSON {
				err = cli.WriteJSON(cmd.OutOrStdout(), struct {
					Results    []process.Result `json:"results"`
					Unresolved int              `json:"unresolved"`
				}{results, unresolved})
			} else {
				err = printResults(cmd.OutOrStdout(), results)
			}
			if err != nil {
				return err
			}
			if unresolved > 0 {
				return fmt.Errorf("%d of %d process records unresolved", unresolved, len(results))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

func printEntries(w io.Writer, entries []process.Entry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "No recorded process groups.")
		return err
	}
	tw := cli.NewTable(w)
	fmt.Fprintln(tw, "ID\tSTATUS\tPID\tSTARTED\tOWNER\tDIR\tCOMMAND")
	for _, e := range entries {
		if e.Record == nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t%s\n", e.ID, e.Status, oneLine(e.Reason))
			continue
		}
		r := e.Record
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.ID, e.Status, r.PID,
			r.StartedAt.Local().Format(time.DateTime), r.Owner, r.Dir, oneLine(r.Command))
	}
	return tw.Flush()
}

func printResults(w io.Writer, results []process.Result) error {
	if len(results) == 0 {
		_, err := fmt.Fprintln(w, "No recorded process groups.")
		return err
	}
	for _, r := range results {
		line := r.ID + ": " + string(r.Status)
		if r.Record != nil {
			line += fmt.Sprintf(" (pid %d, %s)", r.Record.PID, oneLine(r.Record.Command))
		}
		if r.Reason != "" {
			line += ": " + strings.Join(strings.Fields(r.Reason), " ")
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// oneLine shortens s to one line of a table.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:77]) + "..."
	}
	return s
}
