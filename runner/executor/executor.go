// Package executor runs the commands and file operations of the agent's
// tools — bash, custom tools, hooks, stdio MCP servers, the file tools —
// in a workspace, each command in a process group of its own that is torn
// down on cancel, timeout or shutdown.
//
// Executor is the canonical interface; Local implements it in-process. In
// a pod, Remote carries the same calls from the agent container to the
// workspace container, which holds no secrets, where Serve answers them
// with a Local (`aerie executor serve`). That is why every request is
// plain data (no *os.File, no func values) and every stream is an
// io.Reader or io.Writer that a connection can carry. The protocol they
// speak over a unix socket — frames, streams, flow control, cancellation,
// connection loss — is described at the top of protocol.go.
//
// Consumers should declare the narrower interfaces they use, such as a
// file tool's Files.
package executor

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"iter"
	"syscall"
	"time"

	"github.com/aerie-run/aerie/runner/process"
)

// Executor runs commands and file operations for the agent's tools.
type Executor interface {
	Commands
	Files
}

// Commands starts commands and manages their process groups.
type Commands interface {
	// Start starts cmd in a new process group. The group lives no longer
	// than ctx: when ctx is done the whole group is torn down (SIGTERM,
	// grace, SIGKILL, escaped descendants included), even after the
	// command itself has exited and left processes behind. Pass a
	// long-lived context for background processes.
	Start(ctx context.Context, cmd Command) (Process, error)
	// Signal sends sig to the group id, after verifying its identity.
	Signal(ctx context.Context, id string, sig syscall.Signal) error
	// List returns the groups that are still alive.
	List(ctx context.Context) ([]ProcessInfo, error)
	// Teardown ends the group id and everything it started.
	Teardown(ctx context.Context, id string) (process.Report, error)
	// TeardownAll ends every group, waits for them, and returns a report
	// for each. It is what runs on cancel and shutdown; ctx only shortens
	// the grace period before SIGKILL.
	TeardownAll(ctx context.Context) ([]process.Report, error)
}

// Process is a started command.
//
// Its output must be read (or its readers closed) as it comes: the pipes
// hold a bounded amount, after which the command blocks on writing.
// Stdout and Stderr end (io.EOF) once the command has exited and its
// output is drained — or shortly after the command exits when processes
// it left behind still hold the pipes, so a background child never makes
// a reader wait for it.
type Process interface {
	// ID identifies the process group to Signal, Teardown and List. It is
	// also the identifier of its durable record if the group is preserved,
	// and the value of process.MarkerEnv in its processes' environments.
	ID() string
	// Info describes the process group.
	Info() ProcessInfo
	// Stdin is the command's standard input; nil unless Command.Stdin.
	// Close it to signal end of input.
	Stdin() io.WriteCloser
	// Stdout is the command's standard output (and standard error, with
	// Command.CombinedOutput). Closing it discards the rest.
	Stdout() io.ReadCloser
	// Stderr is the command's standard error; empty with
	// Command.CombinedOutput.
	Stderr() io.ReadCloser
	// Wait waits for the command (the group's leader) to exit, or for ctx
	// to be done, which stops the waiting, not the command. The error is
	// about the waiting: a command that fails is an Exit with a non-zero
	// Code, not an error.
	Wait(ctx context.Context) (Exit, error)
}

// Command says what to run. It is plain data, so that it can be sent to
// an executor in another container.
type Command struct {
	// Argv is the program and its arguments; the program is looked up in
	// the executor's PATH. Exactly one of Argv and Script is set.
	Argv []string `json:"argv,omitempty"`
	// Script is run as Shell -c Script.
	Script string `json:"script,omitempty"`
	// Shell runs Script: "sh" when empty, or "bash", or a path.
	Shell string `json:"shell,omitempty"`
	// Dir is the working directory: relative to the workspace root, or
	// absolute. Empty means the workspace root.
	Dir string `json:"dir,omitempty"`
	// Env is the command's complete environment, KEY=VALUE entries. Empty
	// means Environ(os.Environ(), nil, nil) in the executor: its
	// allow-listed variables, never its secrets. Build it with Environ.
	Env []string `json:"env,omitempty"`
	// Stdin gives the command a pipe on standard input (Process.Stdin).
	// Without it the command reads /dev/null, so nothing waits for input
	// that nobody will send.
	Stdin bool `json:"stdin,omitempty"`
	// CombinedOutput sends standard error to Stdout, interleaved as
	// written.
	CombinedOutput bool `json:"combined_output,omitempty"`
}

// argv returns the command line to execute.
func (c Command) argv() ([]string, error) {
	switch {
	case len(c.Argv) > 0 && c.Script != "":
		return nil, errors.New("command has both argv and a script")
	case len(c.Argv) > 0:
		if c.Argv[0] == "" {
			return nil, errors.New("command has an empty program name")
		}
		return c.Argv, nil
	case c.Script != "":
		shell := c.Shell
		if shell == "" {
			shell = "sh"
		}
		return []string{shell, "-c", c.Script}, nil
	default:
		return nil, errors.New("command has neither argv nor a script")
	}
}

// Exit is how a command ended.
type Exit struct {
	// Code is the exit status, -1 when a signal ended the command.
	Code int `json:"code"`
	// Signal names the signal that ended the command ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`
	// Duration is the time from start to exit.
	Duration time.Duration `json:"duration"`
	// TornDown means the executor was tearing the group down when the
	// command exited (context done, Teardown, TeardownAll): the signal, if
	// any, came from aerie.
	TornDown bool `json:"torn_down,omitempty"`
}

// ProcessInfo describes a process group.
type ProcessInfo struct {
	process.Group
	// Argv is the command line that was run.
	Argv []string `json:"argv"`
	// Dir is the working directory.
	Dir string `json:"dir"`
	// StartedAt is when the command started.
	StartedAt time.Time `json:"started_at"`
	// Exited means the command (the group's leader) has exited; processes
	// it left, in the group or escaped from it, are still alive.
	Exited bool `json:"exited,omitempty"`
}

// Files reads and writes files in the workspace. Names are relative to
// the workspace root, or absolute paths inside it; nothing outside the
// root can be reached, neither through ".." nor through symbolic links.
type Files interface {
	// ReadFile returns the contents of the file name.
	ReadFile(ctx context.Context, name string) ([]byte, error)
	// WriteFile replaces the file name with data atomically: readers see
	// the old contents or the new, never a mix. Missing parent directories
	// are created. An existing file keeps its permissions; a new one gets
	// perm. A symbolic link is written through, to its target.
	WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error
	// Stat describes the file name, following symbolic links.
	Stat(ctx context.Context, name string) (FileInfo, error)
	// ReadDir lists the directory name, sorted by name. Symbolic links are
	// described, not followed.
	ReadDir(ctx context.Context, name string) ([]FileInfo, error)
	// Walk yields the directory name and the tree under it, in lexical
	// order, directories before their contents, without following
	// symbolic links. An entry that cannot be read is yielded with its
	// error and the walk goes on; ctx ending yields ctx's error and stops
	// it. Stop early by breaking out of the loop.
	Walk(ctx context.Context, name string, opts WalkOptions) iter.Seq2[FileInfo, error]
	// Remove removes the file or empty directory name. A symbolic link is
	// removed itself, not its target. The workspace root cannot be
	// removed.
	Remove(ctx context.Context, name string) error
}

// FileInfo describes a file in the workspace.
type FileInfo struct {
	// Name is the path from the workspace root, slash-separated.
	Name    string      `json:"name"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime time.Time   `json:"mod_time"`
}

// IsDir reports whether the file is a directory.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// WalkOptions adjust Walk.
type WalkOptions struct {
	// SkipDirs are directory names (not paths) not descended into, such
	// as ".git" or "node_modules". The directories themselves are yielded.
	SkipDirs []string `json:"skip_dirs,omitempty"`
}

var (
	// ErrNotFound means no process group has the given id.
	ErrNotFound = errors.New("no such process")
	// ErrClosed means the executor has been closed.
	ErrClosed = errors.New("executor closed")
	// ErrOutsideWorkspace means a path leads out of the workspace root,
	// by ".." or an absolute path or through a symbolic link.
	ErrOutsideWorkspace = errors.New("path is outside the workspace")
)
