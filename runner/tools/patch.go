package tools

import (
	"fmt"
	"strings"
)

// The patch format of apply_patch, Codex's:
//
//	*** Begin Patch
//	*** Add File: path
//	+line
//	*** Delete File: path
//	*** Update File: path
//	*** Move to: new/path
//	@@ optional context line
//	 context
//	-removed
//	+added
//	*** End of File
//	*** End Patch
const (
	patchBegin  = "*** Begin Patch"
	patchEnd    = "*** End Patch"
	patchAdd    = "*** Add File: "
	patchDelete = "*** Delete File: "
	patchUpdate = "*** Update File: "
	patchMove   = "*** Move to: "
	patchEOF    = "*** End of File"
)

// PatchOp is what a patch does to one file.
type PatchOp string

const (
	PatchAdd    PatchOp = "add"
	PatchDelete PatchOp = "delete"
	PatchUpdate PatchOp = "update"
)

// Patch is a parsed apply_patch patch.
type Patch struct {
	Files []FilePatch
}

// FilePatch is the change to one file.
type FilePatch struct {
	Op   PatchOp
	Path string
	// MoveTo is the new path of an updated file, if it moves.
	MoveTo string
	// Content is an added file's content.
	Content string
	// Hunks are an updated file's changes, in file order.
	Hunks []Hunk
}

// Hunk is one change in an updated file.
type Hunk struct {
	// Context is the @@ line's text: a line at or before the change that
	// locates it.
	Context string
	// Old are the context and removed lines, New the context and added
	// lines, in order.
	Old, New []string
	// EOF means the hunk ends at the end of the file.
	EOF bool
	// Line is the hunk's first line in the patch, for error messages.
	Line int
}

// ParsePatch parses a patch in the apply_patch format.
func ParsePatch(text string) (*Patch, error) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != patchBegin {
		return nil, fmt.Errorf("line 1: the patch must start with %q", patchBegin)
	}
	if strings.TrimSpace(lines[len(lines)-1]) != patchEnd || len(lines) < 2 {
		return nil, fmt.Errorf("line %d: the patch must end with %q", len(lines), patchEnd)
	}
	p := &Patch{}
	seen := map[string]bool{}
	claim := func(path string, ln int) error {
		if path == "" {
			return fmt.Errorf("line %d: missing file path", ln)
		}
		if seen[path] {
			return fmt.Errorf("line %d: %s appears more than once in the patch", ln, path)
		}
		seen[path] = true
		return nil
	}
	i := 1
	end := len(lines) - 1
	for i < end {
		line := lines[i]
		ln := i + 1
		switch {
		case strings.HasPrefix(line, patchAdd):
			path := strings.TrimSpace(strings.TrimPrefix(line, patchAdd))
			if err := claim(path, ln); err != nil {
				return nil, err
			}
			i++
			var sb strings.Builder
			for i < end && !strings.HasPrefix(lines[i], "*** ") {
				if !strings.HasPrefix(lines[i], "+") {
					return nil, fmt.Errorf("line %d: in added file %s, every line must start with '+'", i+1, path)
				}
				sb.WriteString(lines[i][1:])
				sb.WriteByte('\n')
				i++
			}
			p.Files = append(p.Files, FilePatch{Op: PatchAdd, Path: path, Content: sb.String()})
		case strings.HasPrefix(line, patchDelete):
			path := strings.TrimSpace(strings.TrimPrefix(line, patchDelete))
			if err := claim(path, ln); err != nil {
				return nil, err
			}
			i++
			p.Files = append(p.Files, FilePatch{Op: PatchDelete, Path: path})
		case strings.HasPrefix(line, patchUpdate):
			path := strings.TrimSpace(strings.TrimPrefix(line, patchUpdate))
			if err := claim(path, ln); err != nil {
				return nil, err
			}
			fp := FilePatch{Op: PatchUpdate, Path: path}
			i++
			if i < end && strings.HasPrefix(lines[i], patchMove) {
				fp.MoveTo = strings.TrimSpace(strings.TrimPrefix(lines[i], patchMove))
				if fp.MoveTo == "" {
					return nil, fmt.Errorf("line %d: missing path after %q", i+1, strings.TrimSpace(patchMove))
				}
				if fp.MoveTo != path {
					if err := claim(fp.MoveTo, i+1); err != nil {
						return nil, err
					}
				}
				i++
			}
			var err error
			i, fp.Hunks, err = parseHunks(lines, i, end, path)
			if err != nil {
				return nil, err
			}
			if len(fp.Hunks) == 0 && fp.MoveTo == "" {
				return nil, fmt.Errorf("line %d: update of %s has no hunks", ln, path)
			}
			p.Files = append(p.Files, fp)
		case strings.TrimSpace(line) == "":
			i++
		default:
			return nil, fmt.Errorf("line %d: expected %q, %q or %q, got %q", ln,
				strings.TrimSpace(patchAdd), strings.TrimSpace(patchDelete), strings.TrimSpace(patchUpdate), line)
		}
	}
	if len(p.Files) == 0 {
		return nil, fmt.Errorf("the patch changes no files")
	}
	return p, nil
}

// parseHunks parses the hunks of an updated file from lines[i:end] and
// returns the index of the line after them.
func parseHunks(lines []string, i, end int, path string) (int, []Hunk, error) {
	var hunks []Hunk
	var h *Hunk
	for i < end {
		line := lines[i]
		switch {
		case line == patchEOF || strings.TrimSpace(line) == patchEOF:
			if h == nil || (len(h.Old) == 0 && len(h.New) == 0) {
				return i, nil, fmt.Errorf("line %d: %q outside a hunk in %s", i+1, patchEOF, path)
			}
			h.EOF = true
			hunks = append(hunks, *h)
			h = nil
			i++
			continue
		case strings.HasPrefix(line, "*** "):
			if h != nil {
				hunks = append(hunks, *h)
			}
			return i, hunks, nil
		case strings.HasPrefix(line, "@@"):
			if h != nil {
				if len(h.Old) == 0 && len(h.New) == 0 {
					return i, nil, fmt.Errorf("line %d: empty hunk in %s", h.Line, path)
				}
				hunks = append(hunks, *h)
			}
			ctx := strings.TrimPrefix(line, "@@")
			ctx = strings.TrimPrefix(ctx, " ")
			h = &Hunk{Context: ctx, Line: i + 1}
		default:
			if h == nil {
				// The first hunk's @@ may be left out.
				h = &Hunk{Line: i + 1}
			}
			switch {
			case line == "":
				// An empty context line whose space was stripped.
				h.Old = append(h.Old, "")
				h.New = append(h.New, "")
			case line[0] == ' ':
				h.Old = append(h.Old, line[1:])
				h.New = append(h.New, line[1:])
			case line[0] == '-':
				h.Old = append(h.Old, line[1:])
			case line[0] == '+':
				h.New = append(h.New, line[1:])
			default:
				return i, nil, fmt.Errorf("line %d: in %s, a hunk line must start with ' ', '-' or '+', got %q", i+1, path, line)
			}
		}
		i++
	}
	if h != nil {
		if len(h.Old) == 0 && len(h.New) == 0 {
			return i, nil, fmt.Errorf("line %d: empty hunk in %s", h.Line, path)
		}
		hunks = append(hunks, *h)
	}
	return i, hunks, nil
}

// applyHunks applies hunks to content and returns the new content, or an
// error naming the first hunk that does not match.
func applyHunks(content string, hunks []Hunk) (string, error) {
	lines := strings.Split(content, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	type repl struct {
		at, n int
		with  []string
	}
	var repls []repl
	cursor := 0
	for k, h := range hunks {
		if h.Context != "" {
			at := findLines(lines, []string{h.Context}, cursor, false)
			if at < 0 {
				return "", fmt.Errorf("hunk %d (patch line %d): context line %q not found", k+1, h.Line, h.Context)
			}
			cursor = at + 1
		}
		if len(h.Old) == 0 {
			at := len(lines)
			if h.Context != "" {
				at = cursor
			}
			repls = append(repls, repl{at: at, with: h.New})
			cursor = at
			continue
		}
		at := findLines(lines, h.Old, cursor, h.EOF)
		if at < 0 {
			return "", fmt.Errorf("hunk %d (patch line %d): these lines were not found in the file (after line %d):\n%s",
				k+1, h.Line, cursor, strings.Join(h.Old, "\n"))
		}
		repls = append(repls, repl{at: at, n: len(h.Old), with: h.New})
		cursor = at + len(h.Old)
	}
	var out []string
	prev := 0
	for _, r := range repls {
		out = append(out, lines[prev:r.at]...)
		out = append(out, r.with...)
		prev = r.at + r.n
	}
	out = append(out, lines[prev:]...)
	if len(out) == 0 {
		return "", nil
	}
	return strings.Join(out, "\n") + "\n", nil
}

// findLines returns the index of the first occurrence of want in lines at
// or after from, or -1. With eof it is looked for at the end of the file
// first. Matching is exact, then ignoring trailing whitespace, then
// ignoring surrounding whitespace, as models often get whitespace wrong.
func findLines(lines, want []string, from int, eof bool) int {
	norms := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRight(s, " \t") },
		strings.TrimSpace,
	}
	for _, norm := range norms {
		if eof {
			if at := len(lines) - len(want); at >= from && linesEqual(lines[at:], want, norm) {
				return at
			}
		}
		for at := from; at+len(want) <= len(lines); at++ {
			if linesEqual(lines[at:at+len(want)], want, norm) {
				return at
			}
		}
	}
	return -1
}

func linesEqual(a, b []string, norm func(string) string) bool {
	for i := range b {
		if norm(a[i]) != norm(b[i]) {
			return false
		}
	}
	return true
}
