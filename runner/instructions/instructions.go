// Package instructions brings the project instructions below the working
// directory into a session's context as the agent reaches them: when a tool
// reads or edits a file deeper than the working directory, the AGENTS.md
// (or CLAUDE.md) files of the directories between are added, each once per
// context, as a reminder after that call's result; a compaction that drops
// the result that carried one brings it back in the replacement. The
// working directory's own instructions, and those above it, are in the
// system prompt, which no compaction touches.
//
// The reminders are messages, never a change of the system prompt: the
// system prompt and the tools stay a stable prefix of every request, as
// caching wants. A Follower decorates the loop's tools (Tools) and gives
// the compaction policy its Restore; the loop knows nothing of it.
package instructions

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/tools"
)

// FileTool is a tool that reads or edits the files its arguments name, as
// the call names them (relative to the workspace root, or absolute); the
// built-in file tools are.
type FileTool interface {
	FilePaths(call json.RawMessage) []string
}

// Tools are the loop's tools, which a Follower decorates; *tools.Registry
// is one.
type Tools interface {
	Definitions() []provider.Tool
	Run(ctx context.Context, id, name string, args json.RawMessage) tools.Result
	Lookup(name string) (tools.Tool, bool)
}

// replacement is the carrier of instructions a compaction brought back:
// the replacement message, which the next compaction always replaces.
const replacement = ""

// Follower follows one conversation's reach into the workspace. It is safe
// for concurrent use.
type Follower struct {
	ws        *layer.Dir
	workspace string
	workRel   string

	mu sync.Mutex
	// added maps each directory whose instructions are in the context to
	// the tool call whose result carries them (replacement: the last
	// compaction's); order has the directories in the order they were
	// first added.
	added map[string]string
	order []string
	// digests maps the digest of each file in the context to its
	// directory: a file reached through two names (a link) enters once.
	digests map[string]string
}

// New returns a Follower for a session working in workDir, inside the
// workspace root workspace. Files are read through an os.Root at the
// workspace, so that a link cannot lead outside it.
func New(workspace, workDir string) (*Follower, error) {
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("project instructions: %w", err)
	}
	wd, err := filepath.Abs(workDir)
	if err != nil {
		return nil, fmt.Errorf("project instructions: %w", err)
	}
	rel, err := filepath.Rel(ws, wd)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return nil, fmt.Errorf("project instructions: working directory %s is outside the workspace %s", wd, ws)
	}
	root, err := layer.OpenDir(ws)
	if err != nil {
		return nil, fmt.Errorf("project instructions: %w", err)
	}
	return &Follower{ws: root, workspace: ws, workRel: rel, added: map[string]string{}, digests: map[string]string{}}, nil
}

// Close releases the workspace.
func (f *Follower) Close() error { return f.ws.Close() }

// Between returns the directories, relative to the workspace root, whose
// instructions a file at file (relative to the workspace root) brings in
// for a session working in workRel: those below workRel down to the
// file's own directory, nearest to workRel first. A file that is not below
// workRel brings in none.
func Between(workRel, file string) []string {
	workRel, file = filepath.Clean(workRel), filepath.Clean(file)
	dir := filepath.Dir(file)
	rel, err := filepath.Rel(workRel, dir)
	if err != nil || rel == "." || !filepath.IsLocal(rel) {
		return nil
	}
	var dirs []string
	cur := workRel
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if cur == "." {
			cur = part
		} else {
			cur = filepath.Join(cur, part)
		}
		dirs = append(dirs, cur)
	}
	return dirs
}

// local returns the path a tool call names relative to the workspace
// root; false when it is outside the workspace.
func (f *Follower) local(p string) (string, bool) {
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(f.workspace, p)
		if err != nil {
			return "", false
		}
		p = rel
	}
	p = filepath.Clean(p)
	return p, filepath.IsLocal(p)
}

// Reached returns the reminder that follows the result of a call (id) of a
// file tool that reached paths: the instructions of the directories between
// the working directory and each file that are not in the context yet, ""
// when there are none. They are in the context from then on, carried by
// that call's result.
func (f *Follower) Reached(id string, paths []string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var dirs []string
	for _, p := range paths {
		rel, ok := f.local(p)
		if !ok {
			continue
		}
		for _, d := range Between(f.workRel, rel) {
			if _, in := f.added[d]; !in && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	return f.read(dirs, id, false)
}

// Restore returns what a compaction that keeps tail must bring back: the
// instructions whose carrying results the tail does not hold, in the order
// they were first added, "" when there are none. The compaction's
// replacement carries them from then on.
func (f *Follower) Restore(tail []provider.Message) string {
	kept := map[string]bool{}
	for _, m := range tail {
		for _, c := range m.Content {
			if c.Type == provider.ContentToolResult {
				kept[c.ToolCallID] = true
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var gone []string
	for _, d := range f.order {
		if c, in := f.added[d]; in && !kept[c] {
			gone = append(gone, d)
		}
	}
	if len(gone) == 0 {
		return ""
	}
	// They are read again: the agent may have changed them meanwhile.
	for _, d := range gone {
		delete(f.added, d)
	}
	for k, d := range f.digests {
		if slices.Contains(gone, d) {
			delete(f.digests, k)
		}
	}
	return f.read(gone, replacement, true)
}

// read reads the instructions of dirs and records those found as carried
// by carrier; f.mu is held. restored words the reminder for a compaction.
func (f *Follower) read(dirs []string, carrier string, restored bool) string {
	if len(dirs) == 0 {
		return ""
	}
	frags, truncated, arts := extensions.ReadInstructions(f.ws, f.workspace, dirs)
	digest := map[string]string{}
	for _, a := range arts {
		if a.Status == layer.StatusActive {
			digest[a.Path] = a.Digest
		}
	}
	var kept []extensions.Fragment
	for _, fr := range frags {
		rel, err := filepath.Rel(f.workspace, fr.Path)
		if err != nil {
			continue
		}
		dir := filepath.Dir(rel)
		key := digest[fr.Path]
		if key == "" {
			key = fr.Path // cut at the budget: no digest of the whole
		}
		if _, in := f.digests[key]; !in {
			kept = append(kept, fr)
			f.digests[key] = dir
		}
		if _, in := f.added[dir]; !in {
			f.added[dir] = carrier
			if !slices.Contains(f.order, dir) {
				f.order = append(f.order, dir)
			}
		}
	}
	if len(kept) == 0 {
		return ""
	}
	intro := " for the files this tool call reached, from the directories below the working directory."
	if restored {
		intro = " from the directories below the working directory that the conversation had reached" +
			" before it was compacted."
	}
	return reminderStart + intro +
		" Deeper files take precedence over higher ones, and what the user asks directly over all of them.\n\n" +
		extensions.Prompt{Instructions: kept, Truncated: truncated}.InstructionText() + "\n</system-reminder>"
}

// reminderStart opens every reminder.
const reminderStart = "<system-reminder>\nThe project's instructions"

// reminderHeader finds the files a reminder (or the system prompt) holds.
var reminderHeader = regexp.MustCompile(`(?m)^Project instructions from (.+):$`)

// Seed records the instructions a resumed conversation already holds: the
// reminders in its tool results and in a compaction's replacement, so that
// they are not added again.
func (f *Follower) Seed(history []provider.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for carrier, text := range carriers(history) {
		i := strings.Index(text, reminderStart)
		if i < 0 {
			continue
		}
		for _, sm := range reminderHeader.FindAllStringSubmatch(text[i:], -1) {
			dir := filepath.Dir(filepath.FromSlash(sm[1]))
			if _, in := f.added[dir]; !in && dir != "." {
				f.added[dir] = carrier
				if !slices.Contains(f.order, dir) {
					f.order = append(f.order, dir)
				}
			}
		}
	}
}

// carriers are the texts of history that can carry instructions, each
// with what carries it: a tool result's call id, or replacement for a
// user's text (a compaction's replacement among them).
func carriers(history []provider.Message) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, m := range history {
			for _, c := range m.Content {
				carrier := replacement
				switch {
				case c.Type == provider.ContentToolResult:
					carrier = c.ToolCallID
				case c.Type != provider.ContentText || m.Role != provider.RoleUser:
					continue
				}
				if !yield(carrier, c.Text) {
					return
				}
			}
		}
	}
}

// Tools returns t with the reminders after the results of its file tools'
// calls. A call that failed reached nothing.
func (f *Follower) Tools(t Tools) Tools { return &followed{Tools: t, f: f} }

type followed struct {
	Tools
	f *Follower
}

func (w *followed) Run(ctx context.Context, id, name string, args json.RawMessage) tools.Result {
	res := w.Tools.Run(ctx, id, name, args)
	if res.IsError {
		return res
	}
	t, ok := w.Lookup(name)
	if !ok {
		return res
	}
	ft, ok := fileTool(t)
	if !ok {
		return res
	}
	if r := w.f.Reached(id, ft.FilePaths(args)); r != "" {
		res.Content += "\n\n" + r
	}
	return res
}

// fileTool finds the FileTool under t's decorators (hooks, descriptions).
func fileTool(t tools.Tool) (FileTool, bool) {
	for {
		if ft, ok := t.(FileTool); ok {
			return ft, true
		}
		u, ok := t.(interface{ Unwrap() tools.Tool })
		if !ok {
			return nil, false
		}
		t = u.Unwrap()
	}
}
