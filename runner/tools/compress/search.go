package compress

import (
	"fmt"
	"strconv"
	"strings"
)

// searchFile is one file's matches, in the order the output gave them.
type searchFile struct {
	path    string
	matches []searchMatch
}

type searchMatch struct {
	line int
	text string
}

type searchOutput struct {
	files []*searchFile
	total int
	// other are the lines that are not matches (a "--" separator, an error
	// about one file), notes the tool's notes at the end; both are kept.
	other, notes []string
}

// searchLimits are how much of the matches one view shows.
type searchLimits struct {
	perFile, files, text int
}

const searchLevels = 5

func searchLimitsAt(level int) searchLimits {
	return [searchLevels]searchLimits{
		{perFile: 10, files: 200, text: 200},
		{perFile: 5, files: 100, text: 160},
		{perFile: 3, files: 50, text: 120},
		{perFile: 1, files: 30, text: 80},
		{perFile: 0, files: 20, text: 0},
	}[level]
}

// minStructuredLines is the fewest lines a search result or a listing must
// have to be taken for one: a few lines of prose can look like anything.
const minStructuredLines = 8

// parseSearch reads s as search results, one "path:line: text" (or
// "path:line:text") a line, as grep -n and the grep tool print them. Nine
// lines in ten must be matches.
func parseSearch(s string) (any, bool) {
	body, tail := notes(lines(s))
	out := &searchOutput{notes: tail}
	byPath := map[string]*searchFile{}
	for _, l := range body {
		path, line, text, ok := searchLine(l)
		if !ok {
			if strings.TrimSpace(l) != "" {
				out.other = append(out.other, l)
			}
			continue
		}
		f := byPath[path]
		if f == nil {
			f = &searchFile{path: path}
			byPath[path] = f
			out.files = append(out.files, f)
		}
		f.matches = append(f.matches, searchMatch{line: line, text: text})
		out.total++
	}
	if out.total < minStructuredLines || len(out.other)*10 > out.total+len(out.other) {
		return nil, false
	}
	return out, true
}

// searchLine splits "path:line: text".
func searchLine(l string) (path string, line int, text string, ok bool) {
	i := strings.IndexByte(l, ':')
	if i <= 0 || strings.TrimSpace(l[:i]) != l[:i] {
		return "", 0, "", false
	}
	rest := l[i+1:]
	j := 0
	for j < len(rest) && j < 10 && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	if j == 0 || j == len(rest) || rest[j] != ':' {
		return "", 0, "", false
	}
	n, err := strconv.Atoi(rest[:j])
	if err != nil {
		return "", 0, "", false
	}
	return l[:i], n, strings.TrimPrefix(rest[j+1:], " "), true
}

func renderSearch(parsed any, level int) string {
	out := parsed.(*searchOutput)
	l := searchLimitsAt(level)
	var b strings.Builder
	fmt.Fprintf(&b, "%d matches in %d files\n", out.total, len(out.files))
	shown := min(len(out.files), l.files)
	for _, f := range out.files[:shown] {
		fmt.Fprintf(&b, "%s: %d matches\n", f.path, len(f.matches))
		n := min(len(f.matches), l.perFile)
		for _, m := range f.matches[:n] {
			fmt.Fprintf(&b, "  %d: %s\n", m.line, clip(m.text, l.text))
		}
		if rest := f.matches[n:]; len(rest) > 0 {
			b.WriteString("  … more at lines ")
			writeNumbers(&b, rest)
			b.WriteByte('\n')
		}
	}
	if rest := out.files[shown:]; len(rest) > 0 {
		matches := 0
		for _, f := range rest {
			matches += len(f.matches)
		}
		moreGroups(&b, fmt.Sprintf("files with %d matches", matches), len(rest), 3*l.files,
			func(i int) string { return rest[i].path })
	}
	for _, o := range out.other[:min(len(out.other), l.files)] {
		b.WriteString(clip(o, max(l.text, 80)) + "\n")
	}
	if rest := len(out.other) - min(len(out.other), l.files); rest > 0 {
		fmt.Fprintf(&b, "… %d more lines that are not matches\n", rest)
	}
	for _, n := range out.notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// writeNumbers lists the line numbers of ms, at most 20 of them.
func writeNumbers(b *strings.Builder, ms []searchMatch) {
	for i, m := range ms {
		if i == 20 {
			fmt.Fprintf(b, ", … (%d more)", len(ms)-i)
			return
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(m.line))
	}
}
