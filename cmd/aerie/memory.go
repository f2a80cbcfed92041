package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/memory"
)

// localMemory is the built-in memory of runs in workspace: USER.md and the
// workspace's MEMORY.md under $AERIE_HOME/memory.
func localMemory(home, workspace string) (*memory.Memory, memory.Files) {
	files := memory.Files{Dir: filepath.Join(home, memory.DirName), Project: memory.ProjectKey(workspace)}
	return memory.New(files, memory.Limits{}), files
}

func newMemoryCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Show or edit the built-in memory: the project's MEMORY.md and the user's USER.md",
		Long: `The memory tool saves what the model learnt for later sessions: about the project
(MEMORY.md, one per workspace) and about the user (USER.md), under $AERIE_HOME/memory.
A session's system prompt carries the memory as it was when the session started.`,
	}
	var workspace string
	cmd.PersistentFlags().StringVar(&workspace, "workspace", "",
		"the workspace whose project memory is meant (default: the enclosing git repository, or the current directory)")
	cmd.AddCommand(newMemoryShowCmd(a, &workspace), newMemoryEditCmd(a, &workspace))
	return cmd
}

// memoryPlace is the memory of the workspace the flags name.
func (a *app) memoryPlace(workspaceFlag string) (*memory.Memory, memory.Files, error) {
	dir, err := a.workDir()
	if err != nil {
		return nil, memory.Files{}, fmt.Errorf("find the current directory: %w", err)
	}
	ws, err := workspaceRoot(dir, workspaceFlag)
	if err != nil {
		return nil, memory.Files{}, configErr(err)
	}
	m, files := localMemory(config.Home(a.env), ws)
	return m, files, nil
}

// memoryDoc is one memory document as aerie memory show --json writes it.
type memoryDoc struct {
	Target  memory.Target `json:"target"`
	Path    string        `json:"path"`
	Entries []string      `json:"entries"`
	Error   string        `json:"error,omitempty"`
	Cap     int           `json:"cap"`
}

func newMemoryShowCmd(a *app, workspace *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the project's and the user's memory entries",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, files, err := a.memoryPlace(*workspace)
			if err != nil {
				return err
			}
			caps := map[memory.Target]int{memory.Project: m.Limits().Project, memory.User: m.Limits().User}
			docs := make([]memoryDoc, 0, len(memory.Targets))
			for _, t := range memory.Targets {
				d := memoryDoc{Target: t, Path: files.Path(t), Entries: []string{}, Cap: caps[t]}
				entries, err := m.Entries(cmd.Context(), t)
				if err != nil {
					d.Error = err.Error()
				} else if entries != nil {
					d.Entries = entries
				}
				docs = append(docs, d)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(docs)
			}
			var b strings.Builder
			for i, d := range docs {
				if i > 0 {
					b.WriteString("\n")
				}
				fmt.Fprintf(&b, "%s memory (%s), %d entries:\n", d.Target, d.Path, len(d.Entries))
				if d.Error != "" {
					fmt.Fprintf(&b, "  malformed: %s\n", d.Error)
				}
				for _, e := range d.Entries {
					b.WriteString("- " + strings.ReplaceAll(e, "\n", "\n  ") + "\n")
				}
			}
			_, err = fmt.Fprint(out, b.String())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "write the documents as JSON")
	return cmd
}

func newMemoryEditCmd(a *app, workspace *string) *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "edit",
		Short: "Edit a memory document in $EDITOR; it is saved only if it is still a valid list within its cap",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := memory.ParseTarget(target)
			if err != nil {
				return configErr(fmt.Errorf("--target: %w", err))
			}
			editor := a.getenv("VISUAL")
			if editor == "" {
				editor = a.getenv("EDITOR")
			}
			if editor == "" {
				return configErr(errors.New("set $EDITOR (or $VISUAL) to the editor to run"))
			}
			m, files, err := a.memoryPlace(*workspace)
			if err != nil {
				return err
			}
			old, err := files.Read(cmd.Context(), t)
			if err != nil {
				return err
			}
			tmp, err := os.CreateTemp("", "aerie-memory-*-"+t.FileName())
			if err != nil {
				return err
			}
			keep := false
			defer func() {
				if !keep {
					_ = os.Remove(tmp.Name())
				}
			}()
			if _, err := tmp.Write(old); err != nil {
				return err
			}
			if err := tmp.Close(); err != nil {
				return err
			}
			ed := exec.CommandContext(cmd.Context(), "/bin/sh", "-c", editor+` "$1"`, "editor", tmp.Name())
			ed.Stdin, ed.Stdout, ed.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := ed.Run(); err != nil {
				return fmt.Errorf("editor %q: %w; %s is unchanged", editor, err, files.Path(t))
			}
			doc, err := os.ReadFile(tmp.Name())
			if err != nil {
				return err
			}
			if err := m.Write(cmd.Context(), t, doc); err != nil {
				keep = true
				return configErr(fmt.Errorf("%s is unchanged, the edit kept in %s: %w", files.Path(t), tmp.Name(), err))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "saved %s\n", files.Path(t))
			return err
		},
	}
	cmd.Flags().StringVar(&target, "target", string(memory.Project), "the document to edit: project or user")
	return cmd
}
