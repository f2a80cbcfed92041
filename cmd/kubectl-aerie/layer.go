package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/runconfig"
)

func newLayerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "layer",
		Short: "Pack a directory of extensions into a layer ConfigMap, and unpack one",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newLayerPackCmd(), newLayerUnpackCmd())
	return cmd
}

func newLayerPackCmd() *cobra.Command {
	var (
		name, namespace string
		layerValue      string
	)
	cmd := &cobra.Command{
		Use:   "pack DIR --name NAME",
		Short: "Print a ConfigMap manifest that carries DIR as an extension layer",
		Long: `Pack prints a ConfigMap that carries the directory tree DIR — skills,
tools/*.toml with their scripts, hooks, SYSTEM.md, ... — as an aerie extension
layer, executable bits included. Apply it in a session's namespace to make it
a namespace layer for every session there, or in the controller's namespace
to make it a platform layer; or name it in an AgentSession's spec.extensions.

Each file is a key: "/" is spelt "__" (skills__review__SKILL.md); a path the
rule cannot spell is listed in the aerie.run/paths annotation, and executable
files in aerie.run/executables. Files that are not valid UTF-8 go in
binaryData. Symbolic links and special files are refused, and so is a tree
that does not fit in a ConfigMap (about 1 MiB), naming the largest files.

  aerie layer pack ./platform-layer --name team-tools -n agents | kubectl apply -f -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return errors.New("--name is required: the ConfigMap's name")
			}
			cm, err := packLayer(args[0], name, namespace, layerValue)
			if err != nil {
				return err
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
	cmd.Flags().StringVar(&layerValue, "label", "true",
		"the value of the aerie.run/layer label; empty leaves the label off (for a layer named only in spec.extensions)")
	return cmd
}

// packLayer builds the layer ConfigMap of the tree at dir.
func packLayer(dir, name, namespace, label string) (*corev1.ConfigMap, error) {
	packed, err := runconfig.PackLayer(runconfig.PackTree{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: packed.Annotations},
		Data:       packed.Data,
		BinaryData: packed.BinaryData,
	}
	if label != "" {
		cm.Labels = map[string]string{runconfig.LayerLabel: label}
	}
	return cm, nil
}

func newLayerUnpackCmd() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "unpack FILE --to DIR",
		Short: "Write the tree a layer ConfigMap manifest carries into DIR (- reads standard input)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to is required: the directory to write the tree into")
			}
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 4<<20))
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(data, &cm); err != nil {
				return fmt.Errorf("%s: %w (want a ConfigMap manifest)", args[0], err)
			}
			if cm.Kind != "ConfigMap" {
				return fmt.Errorf("%s: a %q, want a ConfigMap", args[0], cm.Kind)
			}
			files, err := runconfig.LayerFiles(cm.Data, cm.BinaryData, cm.Annotations)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if err := os.MkdirAll(to, 0o755); err != nil {
				return err
			}
			root, err := os.OpenRoot(to)
			if err != nil {
				return err
			}
			defer root.Close()
			out := cli.NewWriter(cmd.OutOrStdout())
			for _, f := range files {
				if err := root.MkdirAll(path.Dir(f.Path), 0o755); err != nil {
					return err
				}
				mode := fs.FileMode(0o644)
				if f.Executable {
					mode = 0o755
				}
				if err := root.WriteFile(f.Path, f.Data, mode); err != nil {
					return err
				}
				if err := root.Chmod(f.Path, mode); err != nil {
					return err
				}
				fmt.Fprintf(out, "%s %s\n", mode, f.Path)
			}
			return out.Err()
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the `directory` to write into (created if missing)")
	return cmd
}
