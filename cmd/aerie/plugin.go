package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/plugins"
)

func newPluginCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Install, list, enable, disable, update, uninstall and pack plugins, and manage marketplaces",
		Long: `A plugin is a directory that bundles skills, hooks and MCP servers. Plugins
live in the plugins/ directory of every extension layer; aerie plugin install
puts them in $AERIE_HOME/plugins/<name> with an .aerie-install.yaml that
records where they came from.

Install, enable, disable, update and uninstall change only $AERIE_HOME/plugins.
They do not need the configuration to load beforehand, so a plugin that keeps
it from loading can be disabled, updated or uninstalled. After the change they
load the plugins of every layer, and undo the change if that fails.

Every subcommand takes --json for scripts. A plugin in their JSON (PLUGIN)
has the fields of an entry of plugin list --json.

Exit status: 0 on success, 1 on any failure.`,
	}
	cmd.AddCommand(newPluginInstallCmd(a), newPluginListCmd(a), newPluginEnableCmd(a, true), newPluginEnableCmd(a, false),
		newPluginUninstallCmd(a), newPluginUpdateCmd(a), newPluginMarketCmd(a), newPluginPackCmd(a))
	return cmd
}

// pluginLayers discovers the layers of the current directory, as aerie run
// would see them.
func pluginLayers(a *app) ([]layer.Layer, string, error) {
	wd, err := a.workDir()
	if err != nil {
		return nil, "", fmt.Errorf("working directory: %w", err)
	}
	ws, err := layer.FindWorkspace(wd)
	if err != nil {
		return nil, "", err
	}
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: wd, Workspace: ws, Home: config.Home(a.env)})
	if err != nil {
		return nil, "", err
	}
	return layers, wd, nil
}

// loadPlugins loads the plugins of every layer.
func loadPlugins(a *app) (*plugins.Set, error) {
	layers, wd, err := pluginLayers(a)
	if err != nil {
		return nil, err
	}
	return plugins.Load(layers, plugins.Options{WorkDir: wd})
}

func pluginManager(a *app) (*plugins.Manager, error) {
	home := config.Home(a.env)
	if home == "" {
		return nil, errors.New("no home directory: set AERIE_HOME")
	}
	return &plugins.Manager{
		Dir:       filepath.Join(home, plugins.Dir),
		MarketDir: filepath.Join(home, plugins.MarketsDir),
		Check: func() error {
			_, err := loadPlugins(a)
			return err
		},
	}, nil
}

// pluginEntry returns the entry of the plugin installed in m.Dir as plugin
// list --json shows it, or, when the plugins do not load, one with its name
// and directory only.
func pluginEntry(a *app, m *plugins.Manager, name string) plugins.Entry {
	dir := filepath.Join(m.Dir, name)
	if set, _ := loadPlugins(a); set != nil {
		for _, e := range set.Entries {
			if e.Name == name && filepath.Clean(e.Dir) == dir {
				return e
			}
		}
	}
	return plugins.Entry{Name: name, Dir: dir}
}

func newPluginInstallCmd(a *app) *cobra.Command {
	var o plugins.InstallOptions
	var asJSON bool
	var comps string
	cmd := &cobra.Command{
		Use:   "install SOURCE | NAME@MARKETPLACE",
		Short: "Install a plugin from a local directory, a git URL or a marketplace",
		Long: `Install a plugin from a local directory or a git URL into $AERIE_HOME/plugins.
--path points at the plugin inside the source (default: its root); --ref picks
a branch or tag to clone (default: the default branch). A source that is not a
local directory, or any source with --ref, is cloned with git.

NAME@MARKETPLACE installs the entry NAME of a marketplace added with aerie
plugin marketplace add: a directory inside the marketplace, or a git
repository (a directory of it, at the entry's ref and pinned commit). An entry
with strict: false, or a plugin without a manifest of its own, takes its
manifest from the entry. The install record names the marketplace and the
entry, and aerie plugin update resolves the entry again.

--components lists the components of a Claude or Codex plugin to load
(skills, agents, commands, hooks, mcp, or all), recorded in the install record
in place of the configuration's [plugins] components (default: skills).

--json prints {"installed": PLUGIN}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := pluginManager(a)
			if err != nil {
				return fmt.Errorf("plugin install: %w", err)
			}
			o.Source = args[0]
			if cmd.Flags().Changed("components") {
				if o.Components, err = plugins.SplitComponents(comps); err != nil {
					return fmt.Errorf("plugin install: --components: %w", err)
				}
				if len(o.Components) == 0 {
					return errors.New("plugin install: --components names no component; " +
						"list some of skills, agents, commands, hooks, mcp, or all")
				}
			}
			var name string
			if entry, market, ok := marketRef(args[0]); ok {
				if o.Path != "" || o.Ref != "" {
					return errors.New("plugin install: --path and --ref do not apply to NAME@MARKETPLACE; " +
						"the marketplace entry says where the plugin is")
				}
				name, err = m.InstallFrom(cmd.Context(), entry, market, o.Components)
			} else {
				name, err = m.Install(cmd.Context(), o)
			}
			if err != nil {
				return fmt.Errorf("plugin install: %w", err)
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]plugins.Entry{"installed": pluginEntry(a, m, name)})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Installed plugin %s in %s.\n", name, filepath.Join(m.Dir, name))
			return err
		},
	}
	cmd.Flags().StringVar(&o.Path, "path", "", "the plugin's directory inside the source")
	cmd.Flags().StringVar(&o.Ref, "ref", "", "the branch or tag to install (git sources)")
	cmd.Flags().StringVar(&comps, "components", "",
		"the components of a Claude or Codex plugin to load, comma-separated (skills,agents,commands,hooks,mcp or all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newPluginListCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   listCmd,
		Short: "List the plugins of every layer",
		Long: `List one line per plugin: name, version, enabled or disabled, and source (the
install source, or the plugin's directory). Plugins shadowed by a nearer
layer's plugin of the same name and directories without a manifest are not
listed. --json prints every plugin directory found, with its status and reason.
Exit status 1 when a plugin keeps the configuration from loading (the list is
printed first).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, loadErr := loadPlugins(a)
			if set == nil {
				return fmt.Errorf("plugin list: %w", loadErr)
			}
			var err error
			if asJSON {
				entries := set.Entries
				if entries == nil {
					entries = []plugins.Entry{}
				}
				err = cli.WriteJSON(cmd.OutOrStdout(), entries)
			} else {
				err = printPlugins(cmd.OutOrStdout(), set.Entries)
			}
			if loadErr != nil {
				return fmt.Errorf("plugin list: %w", loadErr)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printPlugins(w io.Writer, entries []plugins.Entry) error {
	tw := cli.NewTable(w)
	n := 0
	for _, e := range entries {
		if e.Status == layer.StatusShadowed || e.Manifest == "" {
			continue
		}
		n++
		version := e.Version
		if version == "" {
			version = "-"
		}
		state := "enabled"
		if !e.Enabled {
			state = "disabled"
		}
		source := e.Dir
		if e.Install != nil {
			source = e.Install.Source
		}
		note := ""
		if e.Status == layer.StatusSkipped {
			note = "\tbroken: " + e.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\n", e.Name, version, state, source, note)
	}
	if n == 0 {
		fmt.Fprintln(tw, "No plugins.")
	}
	return tw.Flush()
}

func newPluginEnableCmd(a *app, enable bool) *cobra.Command {
	use, short, key := "enable NAME", "Enable an installed plugin", "enabled"
	if !enable {
		use, short, key = "disable NAME", "Disable an installed plugin", "disabled"
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

--json prints {"` + key + `": PLUGIN}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := pluginManager(a)
			if err == nil {
				err = m.SetEnabled(args[0], enable)
			}
			if err != nil {
				return fmt.Errorf("plugin %s: %w", cmd.Name(), err)
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]plugins.Entry{key: pluginEntry(a, m, args[0])})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Plugin %s %sd.\n", args[0], cmd.Name())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newPluginUninstallCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "uninstall NAME",
		Short: "Remove an installed plugin",
		Long: `Remove an installed plugin.

--json prints {"uninstalled": PLUGIN}, the plugin as it was before.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := pluginManager(a)
			if err != nil {
				return fmt.Errorf("plugin uninstall: %w", err)
			}
			var before plugins.Entry
			if asJSON {
				before = pluginEntry(a, m, args[0])
			}
			if err := m.Uninstall(args[0]); err != nil {
				return fmt.Errorf("plugin uninstall: %w", err)
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]plugins.Entry{"uninstalled": before})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Uninstalled plugin %s.\n", args[0])
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// pluginUpdates is what plugin update --json prints: every field is always
// present.
type pluginUpdates struct {
	Updated []plugins.Entry `json:"updated"`
	Failed  []pluginFailure `json:"failed"`
}

// pluginFailure is a plugin a command could not change, and why.
type pluginFailure struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

func newPluginUpdateCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "update [NAME]",
		Short: "Fetch installed plugins again from their sources",
		Long: `Update the named plugin, or every plugin installed with aerie plugin install.
A plugin installed from a marketplace follows its entry as the marketplace
now has it (run aerie plugin marketplace update first to fetch the catalog).

--json prints {"updated": [PLUGIN, ...], "failed": [{"name": NAME, "error":
MESSAGE}, ...]}, also when some failed (the exit status is then 1).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := pluginManager(a)
			if err != nil {
				return fmt.Errorf("plugin update: %w", err)
			}
			names := args
			if len(names) == 0 {
				if names, err = m.Installed(); err != nil {
					return fmt.Errorf("plugin update: %w", err)
				}
			}
			var errs []error
			w := cli.NewWriter(cmd.OutOrStdout())
			out := pluginUpdates{Updated: []plugins.Entry{}, Failed: []pluginFailure{}}
			for _, n := range names {
				if err := m.Update(cmd.Context(), n); err != nil {
					errs = append(errs, err)
					out.Failed = append(out.Failed, pluginFailure{Name: n, Error: err.Error()})
					continue
				}
				if asJSON {
					out.Updated = append(out.Updated, pluginEntry(a, m, n))
					continue
				}
				fmt.Fprintf(w, "Updated plugin %s.\n", n)
			}
			if err := w.Err(); err != nil {
				errs = append(errs, err)
			}
			if asJSON {
				if err := cli.WriteJSON(cmd.OutOrStdout(), out); err != nil {
					errs = append(errs, err)
				}
			}
			if err := errors.Join(errs...); err != nil {
				return fmt.Errorf("plugin update: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
