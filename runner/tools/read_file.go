package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

const readFileDefaultLimit = 2000

// ReadFile reads a text file of the workspace, with line numbers.
type ReadFile struct{ files Files }

// NewReadFile returns the read_file tool.
func NewReadFile(files Files) *ReadFile { return &ReadFile{files: files} }

func (*ReadFile) Name() string { return "read_file" }

func (*ReadFile) Description() string {
	return "Read a file of the workspace. Lines are numbered from 1 (number, tab, line). " +
		"offset is the first line to read (default 1), limit the number of lines (default 2000)."
}

func (*ReadFile) Schema() json.RawMessage {
	return schema(map[string]any{
		argPath:  prop("string", "File path, relative to the workspace root."),
		"offset": prop("integer", "First line to read, from 1."),
		"limit":  prop("integer", "Number of lines to read."),
	}, argPath)
}

type readFileArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

func (t *ReadFile) Run(ctx context.Context, call json.RawMessage) Result {
	var a readFileArgs
	if r := decode("read_file", call, &a); r != nil {
		return *r
	}
	if r := required("read_file", argPath, a.Path); r != nil {
		return *r
	}
	if a.Offset < 0 || a.Limit < 0 {
		return errorf("read_file: offset and limit must not be negative")
	}
	info, err := t.files.Stat(ctx, a.Path)
	if err != nil {
		return fileError("read_file", a.Path, err)
	}
	if info.IsDir() {
		return errorf("read_file: %s is a directory; use list_directory", a.Path)
	}
	data, err := t.files.ReadFile(ctx, a.Path)
	if err != nil {
		return fileError("read_file", a.Path, err)
	}
	if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
		return errorf("read_file: %s looks like a binary file (%d bytes)", a.Path, len(data))
	}
	if len(data) == 0 {
		return Result{Content: "[empty file]"}
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	start := max(a.Offset, 1)
	if start > len(lines) {
		return errorf("read_file: %s has %s; offset %d is past the end", a.Path, plural(len(lines), "line", "lines"), start)
	}
	limit := a.Limit
	if limit == 0 {
		limit = readFileDefaultLimit
	}
	end := min(len(lines), start-1+limit)
	var sb strings.Builder
	for i := start - 1; i < end; i++ {
		fmt.Fprintf(&sb, "%6d\t%s", i+1, strings.TrimSuffix(lines[i], "\n"))
		sb.WriteByte('\n')
	}
	if end < len(lines) {
		fmt.Fprintf(&sb, "[%d more lines; read on with offset %d]\n", len(lines)-end, end+1)
	}
	return Result{Content: sb.String()}
}

// FilePaths returns the file a call reads, as the call names it.
func (*ReadFile) FilePaths(call json.RawMessage) []string {
	var a readFileArgs
	if decode("read_file", call, &a) != nil || a.Path == "" {
		return nil
	}
	return []string{a.Path}
}
