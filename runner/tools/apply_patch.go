package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/aerie-run/aerie/runner/executor"
)

// Remover is implemented by file systems that can remove a file. Without
// it, apply_patch removes files with rm through Commands, after checking
// through Files that the path stays inside the workspace.
type Remover interface {
	Remove(ctx context.Context, name string) error
}

// ApplyPatch applies a patch in the Codex apply_patch format.
type ApplyPatch struct {
	files Files
	cmds  Commands
}

// NewApplyPatch returns the apply_patch tool. cmds removes deleted and
// moved files when files is not a Remover; nil cmds then refuses them.
func NewApplyPatch(files Files, cmds Commands) *ApplyPatch {
	return &ApplyPatch{files: files, cmds: cmds}
}

func (*ApplyPatch) Name() string { return "apply_patch" }

func (*ApplyPatch) Description() string {
	return "Apply a patch that adds, deletes, updates and moves files of the workspace. " +
		`All or nothing: every hunk is checked before any file is written. Format:
*** Begin Patch
*** Add File: path/new.txt
+each line of the new file, prefixed with +
*** Delete File: path/old.txt
*** Update File: path/file.go
*** Move to: path/renamed.go   (optional)
@@ func Example() {   (optional: a line before the change that locates it)
 unchanged context line (prefixed with a space)
-removed line
+added line
*** End of File   (optional: the hunk ends at the end of the file)
*** End Patch
Include about three lines of context around each change; hunks of one file go in file order.`
}

func (*ApplyPatch) Schema() json.RawMessage {
	return schema(map[string]any{
		"patch": prop("string", "The whole patch, from *** Begin Patch to *** End Patch."),
	}, "patch")
}

type applyPatchArgs struct {
	Patch string `json:"patch"`
}

// change is a planned write or removal.
type change struct {
	write   bool
	path    string
	content []byte
}

func (t *ApplyPatch) Run(ctx context.Context, call json.RawMessage) Result {
	var a applyPatchArgs
	if r := decode("apply_patch", call, &a); r != nil {
		return *r
	}
	if r := required("apply_patch", "patch", a.Patch); r != nil {
		return *r
	}
	p, err := ParsePatch(a.Patch)
	if err != nil {
		return errorf("apply_patch: invalid patch: %v", err)
	}
	plan, summary, res := t.plan(ctx, p)
	if res != nil {
		return *res
	}
	for i, c := range plan {
		var err error
		if c.write {
			err = t.files.WriteFile(ctx, c.path, c.content, 0o644)
		} else {
			err = t.remove(ctx, c.path)
		}
		if err != nil {
			r := fileError("apply_patch", c.path, err)
			if i > 0 {
				r.Content += fmt.Sprintf(" (the patch was partly applied: %d of %d changes were made)", i, len(plan))
			}
			return r
		}
	}
	return Result{Content: "applied patch:\n" + strings.Join(summary, "\n")}
}

// plan checks every file change and computes the new contents, touching
// nothing.
func (t *ApplyPatch) plan(ctx context.Context, p *Patch) ([]change, []string, *Result) {
	fail := func(format string, args ...any) ([]change, []string, *Result) {
		r := errorf("apply_patch: "+format+"; no file was changed", args...)
		return nil, nil, &r
	}
	var plan []change
	var summary []string
	for _, fp := range p.Files {
		switch fp.Op {
		case PatchAdd:
			if exists, err := t.exists(ctx, fp.Path); err != nil {
				return fail("add %s: %v", fp.Path, explain(err))
			} else if exists {
				return fail("add %s: the file already exists; use *** Update File", fp.Path)
			}
			plan = append(plan, change{write: true, path: fp.Path, content: []byte(fp.Content)})
			summary = append(summary, "A "+fp.Path)
		case PatchDelete:
			if res := t.regular(ctx, fp.Path, "delete"); res != nil {
				return nil, nil, res
			}
			if !t.canRemove() {
				return fail("delete %s: removing files is not available", fp.Path)
			}
			plan = append(plan, change{path: fp.Path})
			summary = append(summary, "D "+fp.Path)
		case PatchUpdate:
			if res := t.regular(ctx, fp.Path, "update"); res != nil {
				return nil, nil, res
			}
			data, err := t.files.ReadFile(ctx, fp.Path)
			if err != nil {
				return fail("update %s: %v", fp.Path, explain(err))
			}
			content, err := applyHunks(string(data), fp.Hunks)
			if err != nil {
				return fail("update %s: %v", fp.Path, err)
			}
			dest := fp.Path
			if fp.MoveTo != "" && fp.MoveTo != fp.Path {
				if exists, err := t.exists(ctx, fp.MoveTo); err != nil {
					return fail("move %s to %s: %v", fp.Path, fp.MoveTo, explain(err))
				} else if exists {
					return fail("move %s to %s: the destination already exists", fp.Path, fp.MoveTo)
				}
				if !t.canRemove() {
					return fail("move %s: removing files is not available", fp.Path)
				}
				dest = fp.MoveTo
			}
			plan = append(plan, change{write: true, path: dest, content: []byte(content)})
			if dest != fp.Path {
				plan = append(plan, change{path: fp.Path})
				summary = append(summary, fmt.Sprintf("R %s -> %s", fp.Path, dest))
			} else {
				summary = append(summary, "M "+fp.Path)
			}
		}
	}
	return plan, summary, nil
}

func (t *ApplyPatch) regular(ctx context.Context, path, verb string) *Result {
	info, err := t.files.Stat(ctx, path)
	if err != nil {
		r := errorf("apply_patch: %s %s: %v; no file was changed", verb, path, explain(err))
		return &r
	}
	if !info.Mode.IsRegular() {
		r := errorf("apply_patch: %s %s: not a regular file; no file was changed", verb, path)
		return &r
	}
	return nil
}

// exists reports whether path exists; an error is a path that cannot be
// used (outside the workspace, say).
func (t *ApplyPatch) exists(ctx context.Context, path string) (bool, error) {
	_, err := t.files.Stat(ctx, path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

func explain(err error) string {
	switch {
	case errors.Is(err, executor.ErrOutsideWorkspace):
		return "path is outside the workspace"
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	default:
		return err.Error()
	}
}

func (t *ApplyPatch) canRemove() bool {
	_, ok := t.files.(Remover)
	return ok || t.cmds != nil
}

// remove removes path, which plan has checked to be a regular file inside
// the workspace.
func (t *ApplyPatch) remove(ctx context.Context, path string) error {
	if r, ok := t.files.(Remover); ok {
		return r.Remove(ctx, path)
	}
	p, err := t.cmds.Start(ctx, executor.Command{Argv: []string{"rm", "-f", "--", path}, CombinedOutput: true})
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	out, _ := io.ReadAll(p.Stdout())
	exit, err := p.Wait(ctx)
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	if exit.Code != 0 {
		return fmt.Errorf("remove: rm: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// FilePaths returns the files a call's patch adds, updates, moves or
// deletes, as the patch names them.
func (*ApplyPatch) FilePaths(call json.RawMessage) []string {
	var a applyPatchArgs
	if decode("apply_patch", call, &a) != nil {
		return nil
	}
	p, err := ParsePatch(a.Patch)
	if err != nil {
		return nil
	}
	var paths []string
	for _, fp := range p.Files {
		paths = append(paths, fp.Path)
		if fp.MoveTo != "" {
			paths = append(paths, fp.MoveTo)
		}
	}
	return paths
}
