package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// ListDirectory lists one directory of the workspace.
type ListDirectory struct{ files Files }

// NewListDirectory returns the list_directory tool.
func NewListDirectory(files Files) *ListDirectory { return &ListDirectory{files: files} }

func (*ListDirectory) Name() string { return "list_directory" }

func (*ListDirectory) Description() string {
	return "List a directory of the workspace: one entry a line, directories ending in /, " +
		"symbolic links marked with @, files with their size in bytes. .git is not listed."
}

func (*ListDirectory) Schema() json.RawMessage {
	return schema(map[string]any{
		argPath: prop("string", "Directory path, relative to the workspace root (default: the root)."),
	})
}

type listDirectoryArgs struct {
	Path string `json:"path"`
}

func (t *ListDirectory) Run(ctx context.Context, call json.RawMessage) Result {
	var a listDirectoryArgs
	if r := decode("list_directory", call, &a); r != nil {
		return *r
	}
	p := pathOr(a.Path)
	info, err := t.files.Stat(ctx, p)
	if err != nil {
		return fileError("list_directory", p, err)
	}
	if !info.IsDir() {
		return errorf("list_directory: %s is not a directory", p)
	}
	entries, err := t.files.ReadDir(ctx, p)
	if err != nil {
		return fileError("list_directory", p, err)
	}
	var sb strings.Builder
	for _, e := range entries {
		if e.IsDir() && slices.Contains(skipDirs, path.Base(e.Name)) {
			continue
		}
		sb.WriteString(entryLine(path.Base(e.Name), e.Mode, e.Size))
		sb.WriteByte('\n')
	}
	if sb.Len() == 0 {
		return Result{Content: "[empty directory]"}
	}
	return Result{Content: sb.String()}
}

func entryLine(name string, mode fs.FileMode, size int64) string {
	switch {
	case mode.IsDir():
		return name + "/"
	case mode&fs.ModeSymlink != 0:
		return name + "@"
	case mode.IsRegular():
		return fmt.Sprintf("%s (%d bytes)", name, size)
	default:
		return name
	}
}
