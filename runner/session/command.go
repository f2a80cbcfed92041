package session

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/pluginroot"
	"github.com/aerie-run/aerie/runner/plugins"
)

// inlineTimeout bounds one !`cmd` of a plugin command.
const inlineTimeout = 60 * time.Second

// expandCommand makes a prompt that calls a plugin's command
// (/<plugin>:<command> ARGUMENTS) the command's prompt, its !`cmd` lines
// run through the executor, and narrows the run's tools to the command's
// allowed-tools. Any other prompt stays as it is.
func (eq *equipment) expandCommand(ctx context.Context) error {
	plugs := eq.ext.Plugins
	name, args, ok := plugins.Invocation(eq.opts.Prompt)
	if plugs == nil || !ok {
		return nil
	}
	c, ok := plugs.Command(name)
	if !ok {
		return nil
	}
	prompt, err := c.Expand(ctx, args, plugins.Expander{Run: eq.runInline, Read: eq.readReferenced})
	if err != nil {
		return &ConfigError{Err: err}
	}
	eq.prompt = prompt
	eq.turnTools = c.AllowedTools
	return nil
}

// runInline runs a command line of the plugin at root in the working
// directory, as the plugin's hooks run: through the executor, with the
// allow-listed environment and the plugin root's variables.
func (eq *equipment) runInline(ctx context.Context, root, line string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, inlineTimeout)
	defer cancel()
	set := pluginroot.Environ(root, pluginroot.Claude)
	p, err := eq.opts.Executor.Start(ctx, executor.Command{
		Script: line, Shell: "bash", Dir: eq.load.Dir, CombinedOutput: true,
		Env: executor.Environ(os.Environ(), nil, set),
	})
	if err != nil {
		return "", err
	}
	defer func() { _, _ = eq.opts.Executor.Teardown(context.WithoutCancel(ctx), p.ID()) }()
	// Twice the cap, so that the cut reports a length past it.
	out, _ := io.ReadAll(io.LimitReader(p.Stdout(), 2*plugins.MaxInline))
	_ = p.Stdout().Close()
	exit, err := p.Wait(ctx)
	if err != nil {
		return "", fmt.Errorf("wait: %w", err)
	}
	s := string(out)
	if exit.Code != 0 {
		s = strings.TrimRight(s, "\n") + fmt.Sprintf("\n[exit status %d]", exit.Code)
	}
	return s, nil
}

// readReferenced reads a file a command's prompt references, relative to
// the working directory, through an os.Root of the workspace: a path or a
// link out of it is refused.
func (eq *equipment) readReferenced(name string) ([]byte, error) {
	ws := eq.load.workspace()
	r, err := os.OpenRoot(ws)
	if err != nil {
		return nil, err
	}
	defer r.Close() //nolint:errcheck // read-only
	var rel string
	if filepath.IsAbs(name) {
		if rel, err = filepath.Rel(ws, name); err != nil {
			return nil, err
		}
	} else {
		dir, err := filepath.Rel(ws, eq.load.Dir)
		if err != nil {
			return nil, err
		}
		rel = filepath.Join(dir, name)
	}
	f, err := r.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	return io.ReadAll(io.LimitReader(f, 2*plugins.MaxInline))
}
