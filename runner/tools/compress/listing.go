package compress

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// listEntry is one file or directory of a listing.
type listEntry struct {
	name string
	// suffix is how the listing marked the entry: "/" a directory, "@" a
	// symbolic link, " (N bytes)" a file's size.
	suffix string
	dir    bool
}

type listDir struct {
	path    string
	entries []listEntry
}

type listing struct {
	dirs         []*listDir
	files, other int
	notes        []string
}

type listingLimits struct{ perDir, dirs int }

const listingLevels = 5

func listingLimitsAt(level int) listingLimits {
	return [listingLevels]listingLimits{
		{perDir: 40, dirs: 300},
		{perDir: 15, dirs: 150},
		{perDir: 6, dirs: 60},
		{perDir: 2, dirs: 30},
		{perDir: 0, dirs: 15},
	}[level]
}

// parseListing reads s as a directory listing: a path a line, as
// find_files prints them, or names under a directory, as list_directory
// and tree print them (tree indents two spaces a level), with "/" after a
// directory, "@" after a link, or the size after a file. Nine lines in ten
// must be such entries.
func parseListing(s string) (any, bool) {
	body, tail := notes(lines(s))
	out := &listing{notes: tail}
	byPath := map[string]*listDir{}
	type open struct {
		indent int
		path   string
	}
	var stack []open
	entries := 0
	for _, l := range body {
		trimmed := strings.TrimLeft(l, " ")
		e, ok := listLine(trimmed)
		if !ok {
			if trimmed != "" {
				out.other++
			}
			continue
		}
		indent := len(l) - len(trimmed)
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		full := e.name
		if len(stack) > 0 {
			full = path.Join(stack[len(stack)-1].path, e.name)
		}
		dir, base := path.Split(full)
		if dir == "" {
			dir = "./"
		}
		if e.dir {
			stack = append(stack, open{indent: indent, path: full})
		}
		e.name = base
		d := byPath[dir]
		if d == nil {
			d = &listDir{path: dir}
			byPath[dir] = d
			out.dirs = append(out.dirs, d)
		}
		d.entries = append(d.entries, e)
		entries++
		if !e.dir {
			out.files++
		}
	}
	if entries < minStructuredLines || out.other*10 > entries+out.other {
		return nil, false
	}
	return out, true
}

// listLine reads one entry: a name without spaces (a size suffix aside)
// and without a colon, which would make it a search result or prose.
func listLine(l string) (listEntry, bool) {
	name, suffix := l, ""
	if i := strings.LastIndex(l, " ("); i > 0 && strings.HasSuffix(l, " bytes)") {
		if _, err := strconv.ParseInt(l[i+2:len(l)-len(" bytes)")], 10, 64); err == nil {
			name, suffix = l[:i], l[i:]
		}
	}
	if name == "" || strings.ContainsAny(name, " \t:") {
		return listEntry{}, false
	}
	e := listEntry{name: name, suffix: suffix}
	switch {
	case strings.HasSuffix(name, "/"):
		e.name, e.suffix, e.dir = strings.TrimSuffix(name, "/"), "/", true
	case strings.HasSuffix(name, "@"):
		e.name, e.suffix = strings.TrimSuffix(name, "@"), "@"
	}
	if e.name == "" {
		return listEntry{}, false
	}
	return e, true
}

func renderListing(parsed any, level int) string {
	out := parsed.(*listing)
	l := listingLimitsAt(level)
	var b strings.Builder
	total := 0
	for _, d := range out.dirs {
		total += len(d.entries)
	}
	fmt.Fprintf(&b, "%d entries (%d files, %d directories) in %d directories\n",
		total, out.files, total-out.files, len(out.dirs))
	shown := min(len(out.dirs), l.dirs)
	for _, d := range out.dirs[:shown] {
		fmt.Fprintf(&b, "%s: %d entries\n", d.path, len(d.entries))
		n := min(len(d.entries), l.perDir)
		for _, e := range d.entries[:n] {
			b.WriteString("  " + e.name + e.suffix + "\n")
		}
		if rest := d.entries[n:]; len(rest) > 0 {
			fmt.Fprintf(&b, "  … %d more: %s\n", len(rest), summarize(rest))
		}
	}
	if rest := out.dirs[shown:]; len(rest) > 0 {
		n := 0
		for _, d := range rest {
			n += len(d.entries)
		}
		moreGroups(&b, fmt.Sprintf("directories with %d entries", n), len(rest), 3*l.dirs,
			func(i int) string { return rest[i].path })
	}
	if out.other > 0 {
		fmt.Fprintf(&b, "(%d lines that are not entries left out)\n", out.other)
	}
	for _, n := range out.notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// summarize counts entries by kind: directories, then files by extension,
// the commonest first.
func summarize(es []listEntry) string {
	counts := map[string]int{}
	for _, e := range es {
		k := path.Ext(e.name)
		switch {
		case e.dir:
			k = "directories"
		case k == "":
			k = "no extension"
		}
		counts[k]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	parts := make([]string, 0, min(len(keys), 8))
	for i, k := range keys {
		if i == 8 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}
