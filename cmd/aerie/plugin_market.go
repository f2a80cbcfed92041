package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/plugins"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// marketRef splits NAME@MARKETPLACE; ok is false for anything else (a
// directory, a git URL such as git@host:repo).
func marketRef(arg string) (entry, market string, ok bool) {
	entry, market, ok = strings.Cut(arg, "@")
	if !ok || plugins.CheckName(entry) != nil || plugins.CheckName(market) != nil {
		return "", "", false
	}
	if _, err := os.Stat(arg); err == nil {
		return "", "", false
	}
	return entry, market, true
}

func newPluginMarketCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "marketplace",
		Short: "Add, list, update and remove plugin marketplaces",
		Long: `A marketplace is a catalog of plugins: a directory or git repository with a
Claude Code catalog (.claude-plugin/marketplace.json) or a Codex one
(.agents/plugins/marketplace.json) at its root. aerie plugin install
NAME@MARKETPLACE installs one of its entries.

Added marketplaces are recorded in $AERIE_HOME/marketplaces/<name>.yaml; a git
marketplace is cloned into $AERIE_HOME/marketplaces/<name>, a directory is
read where it is.`,
	}
	cmd.AddCommand(newMarketAddCmd(a), newMarketListCmd(a), newMarketUpdateCmd(a), newMarketRemoveCmd(a))
	return cmd
}

func newMarketAddCmd(a *app) *cobra.Command {
	var ref, name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add SOURCE",
		Short: "Add a marketplace from a directory, a git URL or a GitHub OWNER/REPO",
		Long: `Add a marketplace from a directory, a git URL or a GitHub OWNER/REPO. --ref
picks a branch or tag to clone (a source with --ref is always cloned); --name
records it under another name than its catalog's.

--json prints {"added": MARKETPLACE}, with the fields of an entry of
marketplace list --json.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := pluginManager(a)
			if err != nil {
				return fmt.Errorf("plugin marketplace add: %w", err)
			}
			rec, mk, err := m.AddMarketplace(cmd.Context(), args[0], ref, name)
			if err != nil {
				return fmt.Errorf("plugin marketplace add: %w", err)
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]marketJSON{"added": marketOf(rec, mk)})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Added marketplace %s (%d plugins) from %s.\n",
				rec.Name, len(mk.Entries), rec.Source)
			return err
		},
	}
	cmd.Flags().StringVar(&ref, "ref", "", "the branch or tag to clone (git sources)")
	cmd.Flags().StringVar(&name, "name", "", "the `name` to record the marketplace under (default: its catalog's)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// marketJSON is a marketplace as the marketplace commands print it.
type marketJSON struct {
	plugins.MarketRecord
	Owner   string       `json:"owner,omitempty"`
	Entries []marketItem `json:"entries,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// marketItem is an entry of a marketplace and whether it installs.
type marketItem struct {
	plugins.MarketEntry
	// Problem says why it cannot be installed.
	Problem string `json:"problem,omitempty"`
}

func marketOf(rec *plugins.MarketRecord, mk *plugins.Marketplace) marketJSON {
	out := marketJSON{MarketRecord: *rec, Entries: []marketItem{}}
	if mk == nil {
		return out
	}
	out.Owner = mk.Owner
	for _, e := range mk.Entries {
		it := marketItem{MarketEntry: e}
		if _, _, err := plugins.Resolve(rec, mk, e.Name); err != nil && e.Name != "" {
			it.Problem = err.Error()
		} else if e.Problem != nil {
			it.Problem = e.Problem.Error()
		}
		out.Entries = append(out.Entries, it)
	}
	return out
}

func newMarketListCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [NAME]",
		Short: "List the marketplaces, or the plugins of one",
		Long: `Without NAME, list one line per marketplace: name, format, number of plugins,
source and commit. With NAME, list its plugins: name, version, source, and
why one cannot be installed (a relative source missing from the marketplace,
an unsupported source kind, a field to fix).

--json prints [MARKETPLACE, ...]; each has its record's fields, owner, and
entries with their resolved source and problem.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := pluginManager(a)
			if err != nil {
				return fmt.Errorf("plugin marketplace list: %w", err)
			}
			names := args
			if len(names) == 0 {
				if names, err = m.MarketNames(); err != nil {
					return fmt.Errorf("plugin marketplace list: %w", err)
				}
			}
			var out []marketJSON
			var errs []error
			for _, n := range names {
				rec, mk, err := m.Marketplace(n)
				if rec == nil {
					return fmt.Errorf("plugin marketplace list: %w", err)
				}
				j := marketOf(rec, mk)
				if err != nil {
					j.Error = err.Error()
					errs = append(errs, err)
				}
				out = append(out, j)
			}
			if asJSON {
				if out == nil {
					out = []marketJSON{}
				}
				err = cli.WriteJSON(cmd.OutOrStdout(), out)
			} else if len(args) == 1 {
				err = printMarketEntries(cmd.OutOrStdout(), out[0])
			} else {
				err = printMarkets(cmd.OutOrStdout(), out)
			}
			return errors.Join(append(errs, err)...)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printMarkets(w io.Writer, ms []marketJSON) error {
	tw := cli.NewTable(w)
	for _, mk := range ms {
		commit := "-"
		if mk.Commit != "" {
			commit = mk.Commit[:min(12, len(mk.Commit))]
		}
		note := ""
		if mk.Error != "" {
			note = "\tbroken: " + mk.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%d plugins\t%s\t%s%s\n", mk.Name, mk.Format, len(mk.Entries), mk.Source, commit, note)
	}
	if len(ms) == 0 {
		fmt.Fprintln(tw, "No marketplaces.")
	}
	return tw.Flush()
}

func printMarketEntries(w io.Writer, mk marketJSON) error {
	tw := cli.NewTable(w)
	for _, e := range mk.Entries {
		version := e.Version
		if version == "" {
			version = "-"
		}
		src := "./" + e.Source.Path
		if e.Source.Kind == plugins.SourceGit {
			src = e.Source.URL
			if e.Source.Path != "" {
				src += " " + e.Source.Path
			}
		}
		note := ""
		if e.Problem != "" {
			note = "\tcannot install: " + e.Problem
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\n", e.Name, version, src, note)
	}
	return tw.Flush()
}

func newMarketUpdateCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "update [NAME]",
		Short: "Fetch marketplaces again",
		Long: `Fetch the named marketplace, or every one, again: a git marketplace is cloned
anew (a catalog that does not parse keeps the previous clone), a directory's
catalog is checked. Installed plugins do not change; aerie plugin update
follows the new catalog.

--json prints {"updated": [MARKETPLACE, ...], "failed": [{"name": NAME,
"error": MESSAGE}, ...]}.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := pluginManager(a)
			if err != nil {
				return fmt.Errorf("plugin marketplace update: %w", err)
			}
			names := args
			if len(names) == 0 {
				if names, err = m.MarketNames(); err != nil {
					return fmt.Errorf("plugin marketplace update: %w", err)
				}
			}
			out := struct {
				Updated []marketJSON    `json:"updated"`
				Failed  []pluginFailure `json:"failed"`
			}{Updated: []marketJSON{}, Failed: []pluginFailure{}}
			var errs []error
			w := cli.NewWriter(cmd.OutOrStdout())
			for _, n := range names {
				rec, err := m.UpdateMarketplace(cmd.Context(), n)
				if err != nil {
					errs = append(errs, err)
					out.Failed = append(out.Failed, pluginFailure{Name: n, Error: err.Error()})
					continue
				}
				_, mk, _ := m.Marketplace(n)
				out.Updated = append(out.Updated, marketOf(rec, mk))
				if !asJSON {
					fmt.Fprintf(w, "Updated marketplace %s.\n", n)
				}
			}
			if asJSON {
				errs = append(errs, cli.WriteJSON(cmd.OutOrStdout(), out))
			}
			errs = append(errs, w.Err())
			if err := errors.Join(errs...); err != nil {
				return fmt.Errorf("plugin marketplace update: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newMarketRemoveCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Forget a marketplace and remove its clone",
		Long: `Forget a marketplace and remove its clone. Plugins installed from it stay
installed; aerie plugin update fails for them until it is added again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := pluginManager(a)
			if err == nil {
				err = m.RemoveMarketplace(args[0])
			}
			if err != nil {
				return fmt.Errorf("plugin marketplace remove: %w", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Removed marketplace %s.\n", args[0])
			return err
		},
	}
	return cmd
}

// layerManifest is a layer ConfigMap manifest as aerie plugin pack prints
// it (kubectl-aerie layer pack prints the same fields).
type layerManifest struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   layerMeta         `json:"metadata"`
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
}

type layerMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func newPluginPackCmd(a *app) *cobra.Command {
	var name, namespace, label string
	cmd := &cobra.Command{
		Use:   "pack NAME... --name CONFIGMAP",
		Short: "Print a layer ConfigMap that carries installed plugins",
		Long: `Pack prints a ConfigMap manifest that carries the named plugins of
$AERIE_HOME/plugins as an extension layer (plugins/<name>/..., install records
included, so that a marketplace entry's manifest and the provenance travel
with them). Apply it in the controller's namespace to make a platform layer,
in a session's namespace for a namespace layer, or name it in spec.extensions.
Each plugin must be installed, enabled and load; the layer must fit in a
ConfigMap (about 1 MiB).

  aerie plugin pack review lint --name team-plugins -n aerie-system | kubectl apply -f -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return errors.New("plugin pack: --name is required: the ConfigMap's name")
			}
			trees, err := packTrees(a, args)
			if err != nil {
				return fmt.Errorf("plugin pack: %w", err)
			}
			packed, err := runconfig.PackLayer(trees...)
			if err != nil {
				return fmt.Errorf("plugin pack: %w", err)
			}
			cm := layerManifest{APIVersion: "v1", Kind: "ConfigMap",
				Metadata: layerMeta{Name: name, Namespace: namespace, Annotations: packed.Annotations},
				Data:     packed.Data, BinaryData: packed.BinaryData}
			if label != "" {
				cm.Metadata.Labels = map[string]string{runconfig.LayerLabel: label}
			}
			b, err := yaml.Marshal(cm)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the ConfigMap's `name`")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the ConfigMap's `namespace`")
	cmd.Flags().StringVar(&label, "label", "true",
		"the value of the aerie.run/layer label; empty leaves the label off (for a layer named only in spec.extensions)")
	return cmd
}

// packTrees checks that every named plugin is installed in $AERIE_HOME,
// enabled and loading, and returns their directories as layer trees.
func packTrees(a *app, names []string) ([]runconfig.PackTree, error) {
	m, err := pluginManager(a)
	if err != nil {
		return nil, err
	}
	home := filepath.Join(m.Dir, "..")
	set, _ := plugins.Load([]layer.Layer{{Name: "home", Dir: home, Kind: layer.KindHome}}, plugins.Options{})
	var trees []runconfig.PackTree
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		var e *plugins.Entry
		for i := range set.Entries {
			if set.Entries[i].Name == n {
				e = &set.Entries[i]
			}
		}
		switch {
		case e == nil:
			return nil, fmt.Errorf("plugin %s is not installed in %s", n, m.Dir)
		case e.Status != layer.StatusActive:
			return nil, fmt.Errorf("plugin %s is %s: %s; only enabled plugins that load are packed", n, e.Status, e.Reason)
		}
		trees = append(trees, runconfig.PackTree{Dir: e.Dir, Prefix: plugins.Dir + "/" + n})
	}
	return trees, nil
}
