package compress

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// codeLine is one line of source code.
type codeLine struct {
	// raw is the line as the output had it, its number included.
	raw string
	// number is its line number: read_file's, or its place in the output.
	number int
	// indent is its indentation in columns (a tab is four); -1 for a blank
	// line.
	indent int
	// lead is its leading whitespace.
	lead string
}

type code struct {
	lines []codeLine
	// widths are the distinct indentations, smallest first.
	widths   []int
	numbered bool
	notes    []string
}

// codeLevels is how many views of code renderCode has: the lines indented
// at most the third, the second and the first indentation found.
const codeLevels = 3

// minCodeLines is the fewest non-blank lines taken for code.
const minCodeLines = 20

// parseCode reads s as source code, with or without the line numbers
// read_file puts before each line ("    12\t"). Six lines in ten must look
// like code: ending in a bracket, a semicolon, a comma or a colon,
// starting with a comment or a keyword, or holding an operator.
func parseCode(s string) (any, bool) {
	body, tail := notes(lines(s))
	c := &code{notes: tail, numbered: numbered(body)}
	likely, nonBlank := 0, 0
	seen := map[int]bool{}
	for i, raw := range body {
		l := codeLine{raw: raw, number: i + 1}
		text := raw
		if c.numbered {
			if num, rest, ok := strings.Cut(raw, "\t"); ok {
				if n, err := strconv.Atoi(strings.TrimSpace(num)); err == nil {
					l.number, text = n, rest
				}
			}
		}
		t := strings.TrimLeft(text, " \t")
		if strings.TrimSpace(t) == "" {
			l.indent = -1
			c.lines = append(c.lines, l)
			continue
		}
		l.lead = text[:len(text)-len(t)]
		l.indent = strings.Count(l.lead, " ") + 4*strings.Count(l.lead, "\t")
		if !seen[l.indent] {
			seen[l.indent] = true
			c.widths = append(c.widths, l.indent)
		}
		nonBlank++
		if codeLike(strings.TrimSpace(t)) {
			likely++
		}
		c.lines = append(c.lines, l)
	}
	if nonBlank < minCodeLines || likely*10 < nonBlank*6 {
		return nil, false
	}
	slices.Sort(c.widths)
	return c, true
}

// numbered reports whether nine lines in ten start with a line number and
// a tab, as read_file prints them.
func numbered(ls []string) bool {
	n := 0
	for _, l := range ls {
		num, _, ok := strings.Cut(l, "\t")
		if _, err := strconv.Atoi(strings.TrimSpace(num)); ok && err == nil {
			n++
		}
	}
	return len(ls) > 0 && n*10 >= len(ls)*9
}

// codeLike reports whether a trimmed line looks like code rather than
// prose.
func codeLike(t string) bool {
	if strings.ContainsAny(t[len(t)-1:], "{}()[];,:") {
		return true
	}
	for _, p := range [...]string{
		"//", "#", "/*", "*", "--", "@", "}", "func ", "def ", "class ", "import ", "from ", "package ",
		"return", "if ", "for ", "while ", "const ", "let ", "var ", "fn ", "pub ", "type ", "struct ",
		"public ", "private ", "static ", "end", "else", "case ", "use ",
	} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	for _, op := range [...]string{" = ", ":=", "=>", "->", "==", "&&", "||", "+=", "()"} {
		if strings.Contains(t, op) {
			return true
		}
	}
	return false
}

// renderCode keeps the lines indented no deeper than a level's width and
// replaces each run of deeper ones with a line saying which lines it left
// out.
func renderCode(parsed any, level int) string {
	c := parsed.(*code)
	keep := c.widths[max(0, min(len(c.widths)-1, codeLevels-1-level))]
	var b strings.Builder
	var run []codeLine
	flush := func() {
		if len(run) == 0 {
			return
		}
		first, last := run[0], run[len(run)-1]
		lead := ""
		for _, l := range run {
			if l.indent >= 0 {
				lead = l.lead
				break
			}
		}
		if c.numbered {
			b.WriteString("      \t")
		}
		fmt.Fprintf(&b, "%s… %d lines (%d–%d)\n", lead, len(run), first.number, last.number)
		run = run[:0]
	}
	for i, l := range c.lines {
		// A blank line goes with the lines around it: dropped inside a run
		// that goes on after it.
		deeper := l.indent > keep || (l.indent < 0 && len(run) > 0 && nextIndent(c.lines, i) > keep)
		if deeper {
			run = append(run, l)
			continue
		}
		flush()
		b.WriteString(l.raw + "\n")
	}
	flush()
	for _, n := range c.notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// nextIndent is the indentation of the first non-blank line after i, -1
// if there is none.
func nextIndent(ls []codeLine, i int) int {
	for _, l := range ls[i+1:] {
		if l.indent >= 0 {
			return l.indent
		}
	}
	return -1
}
