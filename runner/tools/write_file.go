package tools

import (
	"context"
	"encoding/json"
	"fmt"
)

// WriteFile writes a whole file of the workspace.
type WriteFile struct{ files Files }

// NewWriteFile returns the write_file tool.
func NewWriteFile(files Files) *WriteFile { return &WriteFile{files: files} }

func (*WriteFile) Name() string { return "write_file" }

func (*WriteFile) Description() string {
	return "Create or replace a file of the workspace with content. Missing parent directories are created; " +
		"the file is replaced atomically. Prefer edit_file or apply_patch to change part of an existing file."
}

func (*WriteFile) Schema() json.RawMessage {
	return schema(map[string]any{
		argPath:   prop("string", "File path, relative to the workspace root."),
		"content": prop("string", "The file's complete new content."),
	}, argPath, "content")
}

type writeFileArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

func (t *WriteFile) Run(ctx context.Context, call json.RawMessage) Result {
	var a writeFileArgs
	if r := decode("write_file", call, &a); r != nil {
		return *r
	}
	if r := required("write_file", argPath, a.Path); r != nil {
		return *r
	}
	if a.Content == nil {
		return errorf("write_file: missing required argument \"content\"")
	}
	if info, err := t.files.Stat(ctx, a.Path); err == nil && info.IsDir() {
		return errorf("write_file: %s is a directory", a.Path)
	}
	if err := t.files.WriteFile(ctx, a.Path, []byte(*a.Content), 0o644); err != nil {
		return fileError("write_file", a.Path, err)
	}
	return Result{Content: fmt.Sprintf("wrote %d bytes to %s", len(*a.Content), a.Path)}
}

// FilePaths returns the file a call writes, as the call names it.
func (*WriteFile) FilePaths(call json.RawMessage) []string {
	var a writeFileArgs
	if decode("write_file", call, &a) != nil || a.Path == "" {
		return nil
	}
	return []string{a.Path}
}
