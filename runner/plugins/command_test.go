package plugins

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestInvocation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, name, args string }{
		{"/review:status fast  now", "review:status", "fast  now"},
		{"  /review:status", "review:status", ""},
		{"/review:status\nmore", "review:status", "more"},
		{"/status", "", ""},
		{"/usr/bin:x y", "", ""},
		{"review:status", "", ""},
		{"/Review:x", "", ""},
	} {
		name, args, ok := Invocation(tc.in)
		if name != tc.name || args != tc.args || ok != (tc.name != "") {
			t.Errorf("Invocation(%q) = %q, %q, %v; want %q, %q", tc.in, name, args, ok, tc.name, tc.args)
		}
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	var ran []string
	x := Expander{
		Run: func(_ context.Context, root, line string) (string, error) {
			ran = append(ran, root+" "+line)
			if line == "big" {
				return strings.Repeat("é", MaxInline), nil
			}
			return "out of " + line + "\n", nil
		},
		Read: func(p string) ([]byte, error) {
			if p == "a.txt" {
				return []byte("A\n"), nil
			}
			return nil, errors.New("no such file")
		},
	}
	c := Command{Name: "p:c", Root: "/p", Body: "$1|$2|$3|$ARGUMENTS|${CLAUDE_PLUGIN_ROOT}\n!`git status`\nsee @a.txt and @a.txt, not a!`x y`, me@host or @alice\n!`big`"}
	got, err := c.Expand(context.Background(), `one "two three"`, x)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`one|two three||one "two three"|/p` + "\nout of git status\n",
		"not aout of x y,",
		"[the output of big: cut at 8192 of 16384 bytes]",
		"\n\n<file path=\"a.txt\">\nA\n</file>",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("expansion lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "<file") != 1 || !utf8.ValidString(got) {
		t.Errorf("want one file block and valid UTF-8:\n%s", got)
	}
	if len(ran) != 3 || ran[0] != "/p git status" {
		t.Errorf("ran %q", ran)
	}
	if _, err := (Command{Name: "p:c", Body: "@b.txt"}).Expand(context.Background(), "", x); err == nil ||
		!strings.Contains(err.Error(), "@b.txt") {
		t.Errorf("unreadable file: %v", err)
	}
	if _, err := (Command{Name: "p:c", Body: "!`ls`", Project: true}).Expand(context.Background(), "", x); err == nil ||
		!strings.Contains(err.Error(), "project layer") {
		t.Errorf("a project plugin's command ran: %v", err)
	}
}

func FuzzExpand(f *testing.F) {
	f.Add("/p:c a 'b c'", "$1 $ARGUMENTS !`x` @f.txt\n!`unterminated\n@")
	f.Add("/p:c", "!``!`a`@./x $9 $10")
	f.Fuzz(func(t *testing.T, prompt, body string) {
		name, args, ok := Invocation(prompt)
		if ok && !strings.Contains(name, ":") {
			t.Fatalf("name %q", name)
		}
		x := Expander{
			Run:  func(context.Context, string, string) (string, error) { return strings.Repeat("x", 9000), nil },
			Read: func(string) ([]byte, error) { return []byte("f"), nil },
		}
		out, err := Command{Name: "p:c", Root: "/p", Body: body}.Expand(context.Background(), args, x)
		if err != nil {
			t.Fatalf("expand: %v", err)
		}
		if strings.Count(out, "x") > 9000*strings.Count(body, "!`")+len(body)+len(args)*20 {
			t.Fatalf("an output was not cut")
		}
	})
}
