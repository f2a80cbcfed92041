package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/session"
)

func newExtensionsCmd(a *app) *cobra.Command {
	var (
		asJSON    bool
		workspace string
	)
	cmd := &cobra.Command{
		Use:   "extensions",
		Short: "Report the extension layers and every artifact found in them",
		Long: `Extensions lists the layers a session started here would use — the project
.aerie/ (and .osprey/) directories from the current directory up to the
workspace root, $AERIE_HOME, and the artifacts built into aerie — and every
artifact found in them: custom tools, SYSTEM.md, APPEND_SYSTEM.md, AGENTS.md
and CLAUDE.md, tool-descriptions.toml, toolsets.toml, trust.toml, hooks
(hooks.toml and hooks/*.yaml), skills, plugins and MCP server declarations.
Each has its layer, path, status (active, inactive, shadowed, skipped), the
copies it shadows, its trust and provenance, its digest, and a reason when it
is not active.

The workspace root is the Git repository containing the current directory,
or the current directory itself outside one; --workspace sets it.

A project's custom tool, hook file or MCP server runs only when
$AERIE_HOME/trust.toml pins it. For an inactive one the report shows the pin
that would trust it as it is now; review the manifest and what it runs, then
append the pin to trust.toml:

  [[pin]]
  path = ".aerie/tools/word_count.toml"
  sha256 = "…"

--json prints {"workspace", "work_dir", "layers": [LAYER], "artifacts":
[ARTIFACT]}; the field names are stable.

Exit status: 0 when the report was printed; 1 when the working directory is
outside the workspace, or when an artifact in a layer you control
($AERIE_HOME, AERIE_SYSTEM_PROMPT_FILE, AERIE_TOOL_DESCRIPTIONS_FILE) was
skipped (the report is printed first). Skipped project files do not fail it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wd, err := a.workDir()
			if err != nil {
				return fmt.Errorf("extensions: working directory: %w", err)
			}
			ws := workspace
			if ws == "" {
				if ws, err = layer.FindWorkspace(wd); err != nil {
					return fmt.Errorf("extensions: %w", err)
				}
			} else if ws, err = filepath.Abs(ws); err != nil {
				return fmt.Errorf("extensions: --workspace: %w", err)
			}
			// The same loader as a run's, from the same sources, so that
			// the report shows exactly what a session started here loads.
			var pc config.Plugins
			if loaded, err := a.loadConfig(cmd, wd, ws); err != nil {
				warn(cmd, "%v; reporting every plugin as enabled", err)
			} else {
				pc = loaded.Config.Plugins
			}
			src, err := a.extensionSource(wd, ws, pc)
			if err != nil {
				return fmt.Errorf("extensions: %w", err)
			}
			// Each layer with the digest of what it holds, as a session
			// records it; one that cannot be digested is shown without.
			src.Layers, _, _ = layer.WithDigests(ws, src.Layers)
			x, err := session.LoadExtensions(src)
			if err != nil {
				return err
			}
			report := x.Report()
			if asJSON {
				err = cli.WriteJSON(cmd.OutOrStdout(), report)
			} else {
				err = printExtensions(cmd.OutOrStdout(), report, config.Home(a.env))
			}
			if err != nil {
				return err
			}
			if len(x.Errs) > 0 {
				return fmt.Errorf("extensions: %w", errors.Join(x.Errs...))
			}
			if problems := report.Problems(); len(problems) > 0 {
				return fmt.Errorf("extensions: %d artifact(s) in layers you control were skipped:\n  %s",
					len(problems), joinLines(problems))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().StringVar(&workspace, "workspace", "",
		"the workspace root `DIR` (default: the Git repository, or the current directory)")
	return cmd
}

func joinLines(errs []error) string {
	lines := make([]string, len(errs))
	for i, err := range errs {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n  ")
}

// printExtensions writes the report for people: the layers, then one line
// per artifact with indented details.
func printExtensions(out io.Writer, r layer.Report, home string) error {
	w := cli.NewWriter(out)
	fmt.Fprintf(w, "Workspace: %s\nWorking directory: %s\n\nLayers, nearest first:\n", r.Workspace, r.WorkDir)
	tw := cli.NewTable(w)
	for _, l := range r.Layers {
		dir := l.Dir
		if dir == "" {
			dir = "(built into aerie)"
		}
		if l.Digest != "" {
			dir += "\t" + l.Digest
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", l.Name, l.Kind, dir)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Artifacts) == 0 {
		fmt.Fprintln(w, "\nNo artifacts.")
		return w.Err()
	}
	fmt.Fprintln(w, "\nArtifacts:")
	for _, a := range r.Artifacts {
		status := string(a.Status)
		if a.Trust != "" {
			status += ", " + string(a.Trust)
		}
		name := a.Name
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(w, "  %s %s: %s\n", a.Type, name, status)
		from := a.Layer
		if from == "" {
			from = layer.EnvironmentLayer
		}
		fmt.Fprintf(w, "      %s (%s)\n", a.Path, from)
		if a.Reason != "" {
			fmt.Fprintf(w, "      %s\n", a.Reason)
		}
		for _, c := range a.Shadowed {
			fmt.Fprintf(w, "      shadows %s (%s)\n", c.Path, c.Layer)
		}
		if p := a.Provenance; p != nil && p.State != layer.ProvenanceLegacy {
			fmt.Fprintf(w, "      provenance: %s", p.State)
			if p.OperationID != "" {
				fmt.Fprintf(w, ", operation %s", p.OperationID)
			}
			if p.ActivationBoundary != "" {
				fmt.Fprintf(w, ", active from %s", p.ActivationBoundary)
			}
			if p.DigestMismatch {
				fmt.Fprint(w, ", edited since it was written")
			}
			if p.Reason != "" {
				fmt.Fprintf(w, " (%s)", p.Reason)
			}
			fmt.Fprintln(w)
		}
		if a.Pin != nil {
			fmt.Fprintf(w, "      to trust it after reviewing it, append to %s:\n", filepath.Join(home, layer.TrustFile))
			for line := range strings.Lines(a.Pin.TOML()) {
				fmt.Fprintf(w, "        %s", line)
			}
		}
	}
	return w.Err()
}
