package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

const (
	treeDefaultDepth = 3
	treeMaxEntries   = 2000
)

// Tree shows the directory tree under a path of the workspace.
type Tree struct{ files Files }

// NewTree returns the tree tool.
func NewTree(files Files) *Tree { return &Tree{files: files} }

func (*Tree) Name() string { return "tree" }

func (*Tree) Description() string {
	return "Show the directory tree under a path of the workspace, to depth levels (default 3), " +
		"directories ending in /. .git is skipped."
}

func (*Tree) Schema() json.RawMessage {
	return schema(map[string]any{
		argPath: prop("string", "Directory path, relative to the workspace root (default: the root)."),
		"depth": prop("integer", "How many levels to show (default 3)."),
	})
}

type treeArgs struct {
	Path  string `json:"path"`
	Depth *int   `json:"depth"`
}

func (t *Tree) Run(ctx context.Context, call json.RawMessage) Result {
	var a treeArgs
	if r := decode("tree", call, &a); r != nil {
		return *r
	}
	depth := treeDefaultDepth
	if a.Depth != nil {
		depth = *a.Depth
	}
	if depth < 1 {
		return errorf("tree: depth must be at least 1, got %d", depth)
	}
	p := pathOr(a.Path)
	info, err := t.files.Stat(ctx, p)
	if err != nil {
		return fileError("tree", p, err)
	}
	if !info.IsDir() {
		return errorf("tree: %s is not a directory", p)
	}
	var sb strings.Builder
	sb.WriteString(strings.TrimSuffix(p, "/") + "/\n")
	n := 0
	truncated := false
	var walk func(dir string, level int)
	walk = func(dir string, level int) {
		entries, err := t.files.ReadDir(ctx, dir)
		if err != nil {
			fmt.Fprintf(&sb, "%s[cannot read: %v]\n", strings.Repeat("  ", level), err)
			return
		}
		for _, e := range entries {
			if truncated || ctx.Err() != nil {
				return
			}
			base := path.Base(e.Name)
			if e.IsDir() && slices.Contains(skipDirs, base) {
				continue
			}
			if n >= treeMaxEntries {
				truncated = true
				return
			}
			n++
			sb.WriteString(strings.Repeat("  ", level+1))
			sb.WriteString(entryLine(base, e.Mode, e.Size))
			sb.WriteByte('\n')
			if e.IsDir() && level+1 < depth {
				walk(e.Name, level+1)
			}
		}
	}
	walk(p, 0)
	if truncated {
		fmt.Fprintf(&sb, "[stopped after %d entries; use a deeper path or a smaller depth]\n", treeMaxEntries)
	}
	if err := ctx.Err(); err != nil {
		return errorf("tree: %v", err)
	}
	return Result{Content: sb.String()}
}
