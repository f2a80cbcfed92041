package plugins

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aerie-run/aerie/runner/pluginroot"
)

// MaxInline bounds what one !`cmd` or one @path puts into a command's
// prompt; the rest is cut and the cut is said where it happened.
const MaxInline = 8 << 10

// Expander is what expanding a command needs from the session.
type Expander struct {
	// Run runs a shell command line of the plugin at root in the working
	// directory through the executor and returns its combined output.
	Run func(ctx context.Context, root, command string) (string, error)
	// Read reads a file the prompt references (@path), relative to the
	// working directory, without leaving the workspace.
	Read func(path string) ([]byte, error)
}

// Invocation splits a prompt that starts with a command's name,
// "/plugin:command ARGUMENTS", into the name and the arguments; ok is
// false when it starts with no such word.
func Invocation(prompt string) (name, args string, ok bool) {
	p := strings.TrimLeftFunc(prompt, unicode.IsSpace)
	if !strings.HasPrefix(p, "/") {
		return "", "", false
	}
	word, args, _ := strings.Cut(p[1:], " ")
	if i := strings.IndexAny(word, "\n\t"); i >= 0 {
		word, args = word[:i], word[i+1:]+" "+args
	}
	plugin, cmd, found := strings.Cut(word, ":")
	if !found || CheckName(plugin) != nil || !validCommandName(cmd) {
		return "", "", false
	}
	return word, strings.TrimSpace(args), true
}

func validCommandName(s string) bool {
	return s != "" && !strings.ContainsAny(s, "/:") && utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsSpace)
}

// Expand makes the prompt of the command called with args: $ARGUMENTS is
// args, $1 to $9 its words (quotes group words), ${CLAUDE_PLUGIN_ROOT}
// the plugin's directory; each !`cmd` is replaced by the output of cmd,
// run through x.Run after the arguments are in; each @path names a file
// whose contents follow the prompt. Outputs and files are cut at
// MaxInline. A command that fails to start, or a file that cannot be
// read, is an error naming it.
func (c Command) Expand(ctx context.Context, args string, x Expander) (string, error) {
	words := splitArgs(args)
	text := strings.ReplaceAll(c.Body, "$ARGUMENTS", args)
	text = pluginroot.Expand(text, c.Root, pluginroot.Claude)
	for i := 9; i >= 1; i-- {
		v := ""
		if i <= len(words) {
			v = words[i-1]
		}
		text = strings.ReplaceAll(text, "$"+strconv.Itoa(i), v)
	}
	text, err := c.runInline(ctx, text, x)
	if err != nil {
		return "", err
	}
	files, err := referencedFiles(text, x)
	if err != nil {
		return "", fmt.Errorf("command /%s: %w", c.Name, err)
	}
	return text + files, nil
}

// runInline replaces each !`cmd` of text with cmd's output.
func (c Command) runInline(ctx context.Context, text string, x Expander) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(text, "!`")
		if i < 0 {
			b.WriteString(text)
			return b.String(), nil
		}
		end := strings.IndexByte(text[i+2:], '`')
		if end < 0 || strings.Contains(text[i+2:i+2+end], "\n") {
			b.WriteString(text[:i+2])
			text = text[i+2:]
			continue
		}
		line := text[i+2 : i+2+end]
		b.WriteString(text[:i])
		text = text[i+3+end:]
		if c.Project {
			return "", fmt.Errorf("command /%s: !`%s`: a project layer's plugin command does not run commands; "+
				"install the plugin into $AERIE_HOME or a layer of the session instead", c.Name, line)
		}
		if x.Run == nil {
			return "", fmt.Errorf("command /%s: !`%s`: commands cannot run here", c.Name, line)
		}
		out, err := x.Run(ctx, c.Root, line)
		if err != nil {
			return "", fmt.Errorf("command /%s: !`%s`: %w", c.Name, line, err)
		}
		b.WriteString(capped(strings.TrimRight(out, "\n"), "the output of "+line))
	}
}

// referencedFiles returns the contents of the files text references as
// @path (a word starting with @ at the start of a line or after a blank),
// each in a <file> block, in order, each once.
func referencedFiles(text string, x Expander) (string, error) {
	var b strings.Builder
	seen := map[string]bool{}
	for i := 0; i < len(text); i++ {
		if text[i] != '@' {
			continue
		}
		if i > 0 {
			r, _ := utf8.DecodeLastRuneInString(text[:i])
			if !unicode.IsSpace(r) {
				continue
			}
		}
		j := i + 1
		for j < len(text) && !unicode.IsSpace(rune(text[j])) && text[j] != '`' {
			j++
		}
		p := strings.TrimRight(text[i+1:j], ".,;:!?)\"'")
		if p == "" || seen[p] || !strings.ContainsAny(p, "./") {
			continue // @name alone is a mention, not a file
		}
		seen[p] = true
		if x.Read == nil {
			return "", fmt.Errorf("@%s: files cannot be read here", p)
		}
		data, err := x.Read(p)
		if err != nil {
			return "", fmt.Errorf("@%s: %w", p, err)
		}
		fmt.Fprintf(&b, "\n\n<file path=%q>\n%s\n</file>", p, capped(strings.TrimRight(string(data), "\n"), p))
	}
	return b.String(), nil
}

// capped is s cut at MaxInline, with a line saying so.
func capped(s, what string) string {
	if len(s) <= MaxInline {
		return s
	}
	cut := strings.ToValidUTF8(s[:MaxInline], "")
	return fmt.Sprintf("%s\n[%s: cut at %d of %d bytes]", cut, what, len(cut), len(s))
}

// splitArgs splits args into words at blanks; double or single quotes
// group words.
func splitArgs(args string) []string {
	var (
		out   []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range args {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote, in = r, true
		case quote == 0 && unicode.IsSpace(r):
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
