package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/aerie-run/aerie/runner/executor"
)

const (
	grepDefaultMaxResults = 100
	grepMaxFileSize       = 10 << 20
	grepMaxLineLen        = 500
)

// Grep searches the contents of files of the workspace with a regular
// expression.
type Grep struct{ files Files }

// NewGrep returns the grep tool.
func NewGrep(files Files) *Grep { return &Grep{files: files} }

func (*Grep) Name() string { return "grep" }

func (*Grep) Description() string {
	return "Search file contents in the workspace with a Go regular expression (RE2 syntax). " +
		"Returns path:line: text for each matching line. path is a directory (searched recursively, " +
		".git and binary files skipped) or a file; glob filters file names (\"*.go\") or paths (\"cmd/**/*.go\"). " +
		"At most max_results matches are returned (default 100)."
}

func (*Grep) Schema() json.RawMessage {
	return schema(map[string]any{
		"pattern":     prop("string", "Go regular expression; (?i) for case-insensitive."),
		argPath:       prop("string", "File or directory to search, relative to the workspace root (default: the root)."),
		"glob":        prop("string", "Only search files matching this glob."),
		"max_results": prop("integer", "Maximum number of matching lines (default 100)."),
	}, "pattern")
}

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	MaxResults int    `json:"max_results"`
}

func (t *Grep) Run(ctx context.Context, call json.RawMessage) Result {
	var a grepArgs
	if r := decode("grep", call, &a); r != nil {
		return *r
	}
	if r := required("grep", "pattern", a.Pattern); r != nil {
		return *r
	}
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return errorf("grep: invalid pattern: %v", err)
	}
	var m *globMatcher
	if a.Glob != "" {
		gm, err := newGlobMatcher(a.Glob)
		if err != nil {
			return errorf("grep: %v", err)
		}
		m = &gm
	}
	if a.MaxResults < 0 {
		return errorf("grep: max_results must not be negative")
	}
	limit := a.MaxResults
	if limit == 0 {
		limit = grepDefaultMaxResults
	}
	p := pathOr(a.Path)
	info, err := t.files.Stat(ctx, p)
	if err != nil {
		return fileError("grep", p, err)
	}
	var sb strings.Builder
	matches := 0
	truncated := false
	search := func(name string) {
		data, err := t.files.ReadFile(ctx, name)
		if err != nil || bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			return
		}
		for i, line := range strings.Split(string(data), "\n") {
			if !re.MatchString(line) {
				continue
			}
			if matches == limit {
				truncated = true
				return
			}
			matches++
			if len(line) > grepMaxLineLen {
				line = line[:cutBack(line, grepMaxLineLen)] + "..."
			}
			fmt.Fprintf(&sb, "%s:%d: %s\n", name, i+1, line)
		}
	}
	if !info.IsDir() {
		search(info.Name)
	} else {
		root := ""
		for fi, err := range t.files.Walk(ctx, p, executor.WalkOptions{SkipDirs: skipDirs}) {
			if err != nil {
				if ctx.Err() != nil {
					return errorf("grep: %v", ctx.Err())
				}
				continue
			}
			if root == "" {
				root = fi.Name
				continue
			}
			if !fi.Mode.IsRegular() || fi.Size > grepMaxFileSize {
				continue
			}
			if m != nil && !m.match(relTo(root, fi.Name)) {
				continue
			}
			search(fi.Name)
			if truncated {
				break
			}
		}
	}
	if matches == 0 {
		return Result{Content: fmt.Sprintf("no matches for %q under %s", a.Pattern, p)}
	}
	if truncated {
		fmt.Fprintf(&sb, "[stopped after %d matches; narrow the pattern, path or glob, or raise max_results]\n", limit)
	}
	return Result{Content: sb.String()}
}
