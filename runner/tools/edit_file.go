package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// EditFile replaces an exact string in a file of the workspace.
type EditFile struct{ files Files }

// NewEditFile returns the edit_file tool.
func NewEditFile(files Files) *EditFile { return &EditFile{files: files} }

func (*EditFile) Name() string { return "edit_file" }

func (*EditFile) Description() string {
	return "Replace old_string with new_string in a file of the workspace. old_string must match exactly, " +
		"whitespace included, and occur exactly once unless replace_all is true; include enough surrounding " +
		"lines to make it unique."
}

func (*EditFile) Schema() json.RawMessage {
	return schema(map[string]any{
		argPath:       prop("string", "File path, relative to the workspace root."),
		"old_string":  prop("string", "The exact text to replace."),
		"new_string":  prop("string", "The replacement text."),
		"replace_all": prop("boolean", "Replace every occurrence instead of exactly one."),
	}, argPath, "old_string", "new_string")
}

type editFileArgs struct {
	Path       string  `json:"path"`
	OldString  string  `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all"`
}

func (t *EditFile) Run(ctx context.Context, call json.RawMessage) Result {
	var a editFileArgs
	if r := decode("edit_file", call, &a); r != nil {
		return *r
	}
	if r := required("edit_file", argPath, a.Path); r != nil {
		return *r
	}
	if a.OldString == "" {
		return errorf("edit_file: missing required argument \"old_string\"; use write_file to create a file")
	}
	if a.NewString == nil {
		return errorf("edit_file: missing required argument \"new_string\"")
	}
	if a.OldString == *a.NewString {
		return errorf("edit_file: old_string and new_string are the same")
	}
	data, err := t.files.ReadFile(ctx, a.Path)
	if err != nil {
		return fileError("edit_file", a.Path, err)
	}
	content := string(data)
	n := strings.Count(content, a.OldString)
	switch {
	case n == 0:
		return errorf("edit_file: %s: old_string not found (0 matches); read the file and copy the text exactly", a.Path)
	case n > 1 && !a.ReplaceAll:
		return errorf("edit_file: %s: old_string occurs %d times; "+
			"add surrounding context to make it unique, or set replace_all", a.Path, n)
	}
	if a.ReplaceAll {
		content = strings.ReplaceAll(content, a.OldString, *a.NewString)
	} else {
		content = strings.Replace(content, a.OldString, *a.NewString, 1)
	}
	if err := t.files.WriteFile(ctx, a.Path, []byte(content), 0o644); err != nil {
		return fileError("edit_file", a.Path, err)
	}
	return Result{Content: fmt.Sprintf("replaced %s in %s", plural(n, "occurrence", "occurrences"), a.Path)}
}

// FilePaths returns the file a call edits, as the call names it.
func (*EditFile) FilePaths(call json.RawMessage) []string {
	var a editFileArgs
	if decode("edit_file", call, &a) != nil || a.Path == "" {
		return nil
	}
	return []string{a.Path}
}
