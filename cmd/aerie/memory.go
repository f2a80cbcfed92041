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
	"github.com/aerie-run/aerie/runner/runconfig"
)

// localMemory is the built-in memory of runs in workspace: USER.md and the
// workspace's MEMORY.md under $AERIE_HOME/memory.
func localMemory(home, workspace string) (*memory.Memory, memory.Files) {
	files := memory.Files{Dir: filepath.Join(home, memory.DirName), Project: memory.ProjectKey(workspace)}
	return memory.New(files, memory.Limits{}), files
}

// memoryFlags say which memory aerie memory means: a workspace's files,
// or with --namespace a cluster's, in the session store.
type memoryFlags struct {
	workspace, db, namespace, scope string
}

func newMemoryCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Show or edit the built-in memory: the project's MEMORY.md and the user's USER.md",
		Long: `The memory tool saves what the model learnt for later sessions: about the project
(MEMORY.md, one per workspace) and about the user (USER.md), under $AERIE_HOME/memory.
A session's system prompt carries the memory as it was when the session started.

The memory of sessions that run in a cluster is kept in the session store: --namespace
names the AgentSessions' namespace and --scope the project (spec.memory.scope, or the URL
of spec.workspace.git without a trailing .git; none: the namespace's project memory).`,
		Example: `  aerie memory show
  aerie memory show --db postgres://aerie@db/aerie --namespace team-a --scope https://git.example/team/app`,
	}
	f := &memoryFlags{}
	fl := cmd.PersistentFlags()
	fl.StringVar(&f.workspace, "workspace", "",
		"the workspace whose project memory is meant (default: the enclosing git repository, or the current directory)")
	fl.StringVar(&f.db, "db", "", "with --namespace, the session database `URL` (default: $"+
		runconfig.DatabaseURLEnv+", then database_url of the global config)")
	fl.StringVar(&f.namespace, "namespace", "",
		"the memory of a cluster's sessions: the `namespace` it is kept under in the session store")
	fl.StringVar(&f.scope, "scope", "", "with --namespace, the project: spec.memory.scope or the git workspace's URL")
	cmd.AddCommand(newMemoryShowCmd(a, f), newMemoryEditCmd(a, f))
	return cmd
}

// memoryPlace is a memory and where its documents are.
type memoryPlace struct {
	m    *memory.Memory
	docs memory.Documents
	// where names a document for people: a file's path, a stored
	// document's namespace and scope.
	where func(memory.Target) string
	// stored says the documents are the session store's.
	stored bool
	close  func()
}

// memoryPlace is the memory the flags name.
func (a *app) memoryPlace(cmd *cobra.Command, f *memoryFlags) (memoryPlace, error) {
	dir, err := a.workDir()
	if err != nil {
		return memoryPlace{}, fmt.Errorf("find the current directory: %w", err)
	}
	if f.namespace == "" {
		if f.scope != "" || f.db != "" {
			return memoryPlace{}, configErr(errors.New("--scope and --db name a cluster's memory: give its --namespace too"))
		}
		ws, err := workspaceRoot(dir, f.workspace)
		if err != nil {
			return memoryPlace{}, configErr(err)
		}
		m, files := localMemory(config.Home(a.env), ws)
		return memoryPlace{m: m, docs: files, where: files.Path, close: func() {}}, nil
	}
	if f.workspace != "" {
		return memoryPlace{}, configErr(errors.New("--workspace names local memory, --namespace a cluster's: give one"))
	}
	url, err := a.exportDatabase(cmd, dir, f.db)
	if err != nil {
		return memoryPlace{}, err
	}
	st, err := openStore(cmd.Context(), url)
	if err != nil {
		return memoryPlace{}, err
	}
	docs := memory.Stored{Store: st, Tenant: f.namespace, Scope: f.scope}
	return memoryPlace{
		m: memory.New(docs, memory.Limits{}), docs: docs, where: docs.Where, stored: true,
		close: func() { closeStore(cmd, st) },
	}, nil
}

// memoryDoc is one memory document as aerie memory show --json writes it.
type memoryDoc struct {
	Target memory.Target `json:"target"`
	// Path is a file's; Where names a document of the session store.
	Path    string   `json:"path,omitempty"`
	Where   string   `json:"where,omitempty"`
	Entries []string `json:"entries"`
	Error   string   `json:"error,omitempty"`
	Cap     int      `json:"cap"`
}

func newMemoryShowCmd(a *app, f *memoryFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the project's and the user's memory entries",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.memoryPlace(cmd, f)
			if err != nil {
				return err
			}
			defer p.close()
			m := p.m
			caps := map[memory.Target]int{memory.Project: m.Limits().Project, memory.User: m.Limits().User}
			docs := make([]memoryDoc, 0, len(memory.Targets))
			for _, t := range memory.Targets {
				d := memoryDoc{Target: t, Entries: []string{}, Cap: caps[t]}
				if p.stored {
					d.Where = p.where(t)
				} else {
					d.Path = p.where(t)
				}
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
				fmt.Fprintf(&b, "%s memory (%s), %d entries:\n", d.Target, p.where(d.Target), len(d.Entries))
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

func newMemoryEditCmd(a *app, f *memoryFlags) *cobra.Command {
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
			p, err := a.memoryPlace(cmd, f)
			if err != nil {
				return err
			}
			defer p.close()
			old, err := p.docs.Read(cmd.Context(), t)
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
				return fmt.Errorf("editor %q: %w; %s is unchanged", editor, err, p.where(t))
			}
			doc, err := os.ReadFile(tmp.Name())
			if err != nil {
				return err
			}
			if err := p.m.Write(cmd.Context(), t, doc); err != nil {
				keep = true
				return configErr(fmt.Errorf("%s is unchanged, the edit kept in %s: %w", p.where(t), tmp.Name(), err))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "saved %s\n", p.where(t))
			return err
		},
	}
	cmd.Flags().StringVar(&target, "target", string(memory.Project), "the document to edit: project or user")
	return cmd
}
