package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aerie-run/aerie/runner/executor"
)

const findFilesMaxResults = 1000

// FindFiles finds files of the workspace by glob.
type FindFiles struct{ files Files }

// NewFindFiles returns the find_files tool.
func NewFindFiles(files Files) *FindFiles { return &FindFiles{files: files} }

func (*FindFiles) Name() string { return "find_files" }

func (*FindFiles) Description() string {
	return "Find files of the workspace whose path matches a glob pattern: * and ? within one path element, " +
		"** across directories, [abc] and {a,b}. A pattern without / matches file names at any depth " +
		"(\"*.go\"); one with / matches the path relative to path (\"cmd/**/*_test.go\"). .git is skipped. " +
		"Paths are returned relative to the workspace root, sorted."
}

func (*FindFiles) Schema() json.RawMessage {
	return schema(map[string]any{
		"pattern": prop("string", "Glob pattern."),
		argPath:   prop("string", "Directory to search, relative to the workspace root (default: the root)."),
	}, "pattern")
}

type findFilesArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

func (t *FindFiles) Run(ctx context.Context, call json.RawMessage) Result {
	var a findFilesArgs
	if r := decode("find_files", call, &a); r != nil {
		return *r
	}
	if r := required("find_files", "pattern", a.Pattern); r != nil {
		return *r
	}
	m, err := newGlobMatcher(a.Pattern)
	if err != nil {
		return errorf("find_files: %v", err)
	}
	p := pathOr(a.Path)
	info, err := t.files.Stat(ctx, p)
	if err != nil {
		return fileError("find_files", p, err)
	}
	if !info.IsDir() {
		return errorf("find_files: %s is not a directory", p)
	}
	var found []string
	root := ""
	truncated := false
	for fi, err := range t.files.Walk(ctx, p, executor.WalkOptions{SkipDirs: skipDirs}) {
		if err != nil {
			if ctx.Err() != nil {
				return errorf("find_files: %v", ctx.Err())
			}
			continue
		}
		if root == "" {
			root = fi.Name // the first entry is the directory itself
			continue
		}
		if fi.IsDir() {
			continue
		}
		if m.match(relTo(root, fi.Name)) {
			if len(found) == findFilesMaxResults {
				truncated = true
				break
			}
			found = append(found, fi.Name)
		}
	}
	if len(found) == 0 {
		return Result{Content: fmt.Sprintf("no files match %q under %s", a.Pattern, p)}
	}
	out := strings.Join(found, "\n") + "\n"
	if truncated {
		out += fmt.Sprintf("[stopped after %d files; narrow the pattern or the path]\n", findFilesMaxResults)
	}
	return Result{Content: out}
}
