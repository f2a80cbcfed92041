package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/session"
)

func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Inspect the MCP servers a session started here would use",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newMCPListCmd(a))
	return cmd
}

// mcpListJSON is aerie mcp list --json.
type mcpListJSON struct {
	Servers      []mcp.ServerStatus `json:"servers"`
	Declarations []mcp.File         `json:"declarations"`
}

func newMCPListCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   listCmd,
		Short: "Connect to each MCP server, as a session would, and show its state and tools",
		Long: `List reads the MCP server declarations a session started in the current
directory would use (mcp_servers/*.yaml in the layers, and enabled plugins),
connects to each one as the session would — stdio servers are started in a
process group of their own and ended afterwards — and shows its state, its
tools (as the model calls them) and, for one that failed, why.

Exit status: 0 when every required server connected; 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wd, err := a.workDir()
			if err != nil {
				return err
			}
			ws, err := layer.FindWorkspace(wd)
			if err != nil {
				return err
			}
			// The same loader as a run's: the declarations a session
			// started here would use, plugins.disabled honoured.
			var pc config.Plugins
			if loaded, err := a.loadConfig(cmd, wd, ws); err != nil {
				warn(cmd, "%v; listing every plugin's servers", err)
			} else {
				pc = loaded.Config.Plugins
			}
			src, err := a.extensionSource(wd, ws, pc)
			if err != nil {
				return err
			}
			x, err := session.LoadExtensions(src)
			if err != nil {
				return err
			}
			if err := x.Err(); err != nil {
				warn(cmd, "a session started here would not start: %v", err)
			}
			cfg := x.MCP
			statuses, startErr := connectAll(cmd, ws, wd, cfg)
			if asJSON {
				err = cli.WriteJSON(cmd.OutOrStdout(), mcpListJSON{Servers: statuses, Declarations: cfg.Files})
			} else {
				err = printMCP(cmd.OutOrStdout(), statuses, cfg)
			}
			if err != nil {
				return err
			}
			return startErr
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

// connectAll connects the servers through a local executor and closes
// them again, returning their states. A teardown that fails is a warning:
// the states stand.
func connectAll(cmd *cobra.Command, ws, wd string, cfg mcp.Config) ([]mcp.ServerStatus, error) {
	ctx := cmd.Context()
	if len(cfg.Servers) == 0 {
		return []mcp.ServerStatus{}, nil
	}
	reaper, stop, err := process.Subreap()
	if err == nil {
		defer stop()
	}
	exe, err := executor.NewLocal(ws, executor.Options{Reaper: reaper})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := exe.Close(context.WithoutCancel(ctx)); err != nil {
			warn(cmd, "end the MCP servers' processes: %v", err)
		}
	}()
	m := mcp.New(cfg.Servers, mcp.Options{Commands: exe, Dir: wd, Logger: slog.New(slog.DiscardHandler)})
	startErr := m.Start(ctx)
	statuses := m.Status()
	_ = m.Close()
	return statuses, startErr
}

func printMCP(out io.Writer, statuses []mcp.ServerStatus, cfg mcp.Config) error {
	w := cli.NewWriter(out)
	if len(statuses) == 0 {
		fmt.Fprintln(w, "No MCP servers are declared here.")
	}
	tw := cli.NewTable(w)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATE\tTOOLS")
	for _, s := range statuses {
		state := string(s.State)
		if s.Required {
			state += " (required)"
		}
		tools := strings.Join(s.Tools, ", ")
		if s.Error != "" {
			tools = s.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, s.Type, state, cli.Dash(tools))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range cfg.Files {
		if f.Status == layer.StatusActive {
			continue
		}
		// As aerie extensions writes it: the status, and the trust of a
		// declaration that needs a pin.
		status := string(f.Status)
		if f.Trust != "" {
			status += ", " + string(f.Trust)
		}
		fmt.Fprintf(w, "%s %s: %s %s\n", status, f.Path, f.ID, f.Reason)
	}
	return w.Err()
}
