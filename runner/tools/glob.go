package tools

import (
	"fmt"
	"regexp"
	"strings"
)

// compileGlob turns a glob into a regular expression matching whole
// slash-separated paths: * and ? stay within one path element, ** crosses
// elements ("**/" also matches no directory at all), [...] is a class
// and {a,b} an alternation.
func compileGlob(glob string) (*regexp.Regexp, error) {
	var sb strings.Builder
	sb.WriteString("^")
	depth := 0
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch c {
		case '*':
			if i+1 < len(glob) && glob[i+1] == '*' {
				i++
				if i+1 < len(glob) && glob[i+1] == '/' {
					i++
					sb.WriteString("(?:.*/)?")
				} else {
					sb.WriteString(".*")
				}
			} else {
				sb.WriteString("[^/]*")
			}
		case '?':
			sb.WriteString("[^/]")
		case '[':
			j := strings.IndexByte(glob[i+1:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [ in glob %q", glob)
			}
			class := glob[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			sb.WriteString("[" + class + "]")
			i += j + 1
		case '{':
			depth++
			sb.WriteString("(?:")
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("unmatched } in glob %q", glob)
			}
			depth--
			sb.WriteString(")")
		case ',':
			if depth > 0 {
				sb.WriteString("|")
			} else {
				sb.WriteString(",")
			}
		case '\\':
			if i+1 < len(glob) {
				i++
				sb.WriteString(regexp.QuoteMeta(string(glob[i])))
			}
		default:
			sb.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unclosed { in glob %q", glob)
	}
	sb.WriteString("$")
	re, err := regexp.Compile(sb.String())
	if err != nil {
		return nil, fmt.Errorf("invalid glob %q: %w", glob, err)
	}
	return re, nil
}

// globMatcher matches a path relative to the search root: a glob without
// a slash matches the base name at any depth, one with a slash the whole
// relative path.
type globMatcher struct {
	re       *regexp.Regexp
	baseOnly bool
}

func newGlobMatcher(glob string) (globMatcher, error) {
	glob = strings.TrimPrefix(glob, "./")
	re, err := compileGlob(glob)
	if err != nil {
		return globMatcher{}, err
	}
	return globMatcher{re: re, baseOnly: !strings.Contains(glob, "/")}, nil
}

func (m globMatcher) match(rel string) bool {
	if m.baseOnly {
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			rel = rel[i+1:]
		}
	}
	return m.re.MatchString(rel)
}

// relTo returns name (slash-separated, from the workspace root) relative
// to the directory root as Walk yields it.
func relTo(root, name string) string {
	if root == "." || root == "" {
		return name
	}
	return strings.TrimPrefix(strings.TrimPrefix(name, strings.TrimSuffix(root, "/")), "/")
}
