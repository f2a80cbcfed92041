package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// fileWorkspace returns a workspace with a few files, a .git directory,
// and symbolic links leading out of it, plus a directory outside it.
func fileWorkspace(t *testing.T) (Files, string) {
	t.Helper()
	l, dir := newWorkspace(t)
	outside := t.TempDir()
	testenv.WriteTree(t, outside, map[string]string{"secret.txt": "secret\n"})
	testenv.WriteTree(t, dir, map[string]string{
		"a.txt":                "one\ntwo\nthree\n",
		"dup.txt":              "x = 1\nx = 1\n",
		"src/main.go":          "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
		"src/util/strings.go":  "package util\n\n// Hello says hello.\nfunc Hello() string { return \"hello\" }\n",
		"src/util/x_test.go":   "package util\n",
		"docs/readme.md":       "# Hello\n",
		".git/config":          "hello from git\n",
		"bin.dat":              "hello\x00binary",
		"deep/a/b/c/d/file.go": "package d\n",
		"empty/.keep":          "",
	})
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "escape.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escapedir")); err != nil {
		t.Fatal(err)
	}
	return l, dir
}

type toolCase struct {
	name     string
	args     string
	wantErr  bool
	contains []string
	absent   []string
}

func runCases(t *testing.T, tool Tool, tests []toolCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tool.Run(context.Background(), json.RawMessage(tt.args))
			check(t, got, tt.wantErr, tt.contains...)
			for _, s := range tt.absent {
				if strings.Contains(got.Content, s) {
					t.Errorf("content contains %q:\n%s", s, got.Content)
				}
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	files, dir := fileWorkspace(t)
	runCases(t, NewReadFile(files), []toolCase{
		{name: "whole file", args: `{"path":"a.txt"}`, contains: []string{"     1\tone\n     2\ttwo\n     3\tthree\n"}},
		{name: "offset and limit", args: `{"path":"a.txt","offset":2,"limit":1}`, contains: []string{"     2\ttwo\n", "[1 more lines; read on with offset 3]"}, absent: []string{"one", "three"}},
		{name: "absolute path inside", args: `{"path":"` + filepath.Join(dir, "a.txt") + `"}`, contains: []string{"one"}},
		{name: "offset past end", args: `{"path":"a.txt","offset":9}`, wantErr: true, contains: []string{"has 3 lines; offset 9 is past the end"}},
		{name: "negative limit", args: `{"path":"a.txt","limit":-1}`, wantErr: true, contains: []string{"must not be negative"}},
		{name: "missing path", args: `{}`, wantErr: true, contains: []string{`missing required argument "path"`}},
		{name: "not found", args: `{"path":"nope.txt"}`, wantErr: true, contains: []string{"nope.txt: no such file"}},
		{name: "directory", args: `{"path":"src"}`, wantErr: true, contains: []string{"is a directory"}},
		{name: "binary", args: `{"path":"bin.dat"}`, wantErr: true, contains: []string{"binary"}},
		{name: "empty", args: `{"path":"empty/.keep"}`, contains: []string{"[empty file]"}},
		{name: "dotdot escape", args: `{"path":"../x"}`, wantErr: true, contains: []string{"outside the workspace"}},
		{name: "absolute escape", args: `{"path":"/etc/passwd"}`, wantErr: true, contains: []string{"outside the workspace"}},
		{name: "symlink escape", args: `{"path":"escape.txt"}`, wantErr: true, contains: []string{"outside the workspace"}, absent: []string{"secret"}},
		{name: "symlinked dir escape", args: `{"path":"escapedir/secret.txt"}`, wantErr: true, contains: []string{"outside the workspace"}, absent: []string{"secret\n"}},
	})
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	files, dir := fileWorkspace(t)
	runCases(t, NewWriteFile(files), []toolCase{
		{name: "new with parents", args: `{"path":"new/dir/f.txt","content":"hi\n"}`, contains: []string{"wrote 3 bytes to new/dir/f.txt"}},
		{name: "replace", args: `{"path":"a.txt","content":"replaced"}`, contains: []string{"wrote 8 bytes"}},
		{name: "empty content", args: `{"path":"empty.txt","content":""}`, contains: []string{"wrote 0 bytes"}},
		{name: "missing content", args: `{"path":"x.txt"}`, wantErr: true, contains: []string{`missing required argument "content"`}},
		{name: "missing path", args: `{"content":"x"}`, wantErr: true, contains: []string{`missing required argument "path"`}},
		{name: "directory", args: `{"path":"src","content":"x"}`, wantErr: true, contains: []string{"is a directory"}},
		{name: "dotdot escape", args: `{"path":"../evil.txt","content":"x"}`, wantErr: true, contains: []string{"outside the workspace"}},
		{name: "symlinked dir escape", args: `{"path":"escapedir/evil.txt","content":"x"}`, wantErr: true, contains: []string{"outside the workspace"}},
		{name: "symlink escape", args: `{"path":"escape.txt","content":"x"}`, wantErr: true, contains: []string{"outside the workspace"}},
	})
	for name, want := range map[string]string{"new/dir/f.txt": "hi\n", "a.txt": "replaced", "empty.txt": ""} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil.txt")); err == nil {
		t.Error("evil.txt was written outside the workspace")
	}
	secret, _ := os.ReadFile(filepath.Join(dir, "escape.txt"))
	if len(secret) != 0 && string(secret) != "secret\n" {
		t.Errorf("the file outside was changed: %q", secret)
	}
}

func TestEditFile(t *testing.T) {
	t.Parallel()
	files, dir := fileWorkspace(t)
	runCases(t, NewEditFile(files), []toolCase{
		{name: "once", args: `{"path":"a.txt","old_string":"two\n","new_string":"TWO\n"}`, contains: []string{"replaced 1 occurrence in a.txt"}},
		{name: "zero matches", args: `{"path":"a.txt","old_string":"four","new_string":"4"}`, wantErr: true, contains: []string{"0 matches"}},
		{name: "two matches", args: `{"path":"dup.txt","old_string":"x = 1","new_string":"x = 2"}`, wantErr: true, contains: []string{"occurs 2 times"}},
		{name: "replace all", args: `{"path":"dup.txt","old_string":"x = 1","new_string":"y = 2","replace_all":true}`, contains: []string{"replaced 2 occurrences"}},
		{name: "delete text", args: `{"path":"src/main.go","old_string":"\n\tprintln(\"hello\")","new_string":""}`, contains: []string{"replaced 1 occurrence"}},
		{name: "same strings", args: `{"path":"a.txt","old_string":"one","new_string":"one"}`, wantErr: true, contains: []string{"are the same"}},
		{name: "missing old_string", args: `{"path":"a.txt","new_string":"x"}`, wantErr: true, contains: []string{`"old_string"`}},
		{name: "missing new_string", args: `{"path":"a.txt","old_string":"one"}`, wantErr: true, contains: []string{`"new_string"`}},
		{name: "not found", args: `{"path":"nope.txt","old_string":"a","new_string":"b"}`, wantErr: true, contains: []string{"no such file"}},
		{name: "symlink escape", args: `{"path":"escape.txt","old_string":"secret","new_string":"x"}`, wantErr: true, contains: []string{"outside the workspace"}},
		{name: "dotdot escape", args: `{"path":"src/../../x","old_string":"a","new_string":"b"}`, wantErr: true, contains: []string{"outside the workspace"}},
	})
	for name, want := range map[string]string{
		"a.txt":       "one\nTWO\nthree\n",
		"dup.txt":     "y = 2\ny = 2\n",
		"src/main.go": "package main\n\nfunc main() {\n}\n",
	} {
		got, _ := os.ReadFile(filepath.Join(dir, name))
		if string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

func TestListDirectory(t *testing.T) {
	t.Parallel()
	files, _ := fileWorkspace(t)
	runCases(t, NewListDirectory(files), []toolCase{
		{name: "root", args: `{}`, contains: []string{"a.txt (14 bytes)\n", "src/\n", "escape.txt@\n"}, absent: []string{".git"}},
		{name: "subdir", args: `{"path":"src/util"}`, contains: []string{"strings.go", "x_test.go"}, absent: []string{"main.go"}},
		{name: "file", args: `{"path":"a.txt"}`, wantErr: true, contains: []string{"not a directory"}},
		{name: "missing", args: `{"path":"nope"}`, wantErr: true, contains: []string{"no such file"}},
		{name: "dotdot escape", args: `{"path":".."}`, wantErr: true, contains: []string{"outside the workspace"}},
		{name: "symlink escape", args: `{"path":"escapedir"}`, wantErr: true, contains: []string{"outside the workspace"}},
	})
}

func TestTree(t *testing.T) {
	t.Parallel()
	files, _ := fileWorkspace(t)
	runCases(t, NewTree(files), []toolCase{
		{name: "default depth", args: `{}`, contains: []string{"./\n", "  src/\n", "    util/\n", "      strings.go", "  deep/\n", "      b/\n"}, absent: []string{".git", "        c/", "hello from git"}},
		{name: "depth 1", args: `{"path":"src","depth":1}`, contains: []string{"src/\n", "  util/\n", "  main.go"}, absent: []string{"strings.go"}},
		{name: "deep", args: `{"path":"deep","depth":10}`, contains: []string{"file.go"}},
		{name: "bad depth", args: `{"depth":0}`, wantErr: true, contains: []string{"at least 1"}},
		{name: "file", args: `{"path":"a.txt"}`, wantErr: true, contains: []string{"not a directory"}},
		{name: "dotdot escape", args: `{"path":"../.."}`, wantErr: true, contains: []string{"outside the workspace"}},
		{name: "symlink escape", args: `{"path":"escapedir"}`, wantErr: true, contains: []string{"outside the workspace"}},
	})
}

func TestFindFiles(t *testing.T) {
	t.Parallel()
	files, _ := fileWorkspace(t)
	runCases(t, NewFindFiles(files), []toolCase{
		{name: "base name any depth", args: `{"pattern":"*.go"}`, contains: []string{"src/main.go\n", "src/util/strings.go\n", "deep/a/b/c/d/file.go\n"}, absent: []string{"a.txt"}},
		{name: "doublestar path", args: `{"pattern":"src/**/*_test.go"}`, contains: []string{"src/util/x_test.go"}, absent: []string{"strings.go"}},
		{name: "doublestar matches zero dirs", args: `{"pattern":"**/main.go","path":"src"}`, contains: []string{"src/main.go"}},
		{name: "relative to path", args: `{"pattern":"util/*.go","path":"src"}`, contains: []string{"src/util/strings.go", "src/util/x_test.go"}},
		{name: "single star stays in element", args: `{"pattern":"src/*.go"}`, contains: []string{"src/main.go"}, absent: []string{"util"}},
		{name: "braces", args: `{"pattern":"*.{md,txt}"}`, contains: []string{"docs/readme.md", "a.txt"}, absent: []string{".go"}},
		{name: "skips .git", args: `{"pattern":"config"}`, contains: []string{"no files match"}},
		{name: "no match", args: `{"pattern":"*.rs"}`, contains: []string{`no files match "*.rs"`}},
		{name: "bad glob", args: `{"pattern":"[abc"}`, wantErr: true, contains: []string{"unclosed ["}},
		{name: "missing pattern", args: `{}`, wantErr: true, contains: []string{`"pattern"`}},
		{name: "dotdot escape", args: `{"pattern":"*","path":".."}`, wantErr: true, contains: []string{"outside the workspace"}},
		{name: "symlink not followed", args: `{"pattern":"secret.txt"}`, contains: []string{"no files match"}},
	})
}

func TestGrep(t *testing.T) {
	t.Parallel()
	files, _ := fileWorkspace(t)
	runCases(t, NewGrep(files), []toolCase{
		{name: "recursive", args: `{"pattern":"hello"}`, contains: []string{`src/main.go:4: 	println("hello")`, `src/util/strings.go:4: func Hello() string { return "hello" }`}, absent: []string{".git", "bin.dat", "secret"}},
		{name: "case insensitive", args: `{"pattern":"(?i)^# hello"}`, contains: []string{"docs/readme.md:1: # Hello"}},
		{name: "glob", args: `{"pattern":"hello","glob":"*.md"}`, contains: []string{"no matches"}},
		{name: "glob path", args: `{"pattern":"^package","glob":"src/**/*.go"}`, contains: []string{"src/main.go:1", "src/util/x_test.go:1"}, absent: []string{"deep/"}},
		{name: "single file", args: `{"pattern":"t","path":"a.txt"}`, contains: []string{"a.txt:2: two", "a.txt:3: three"}},
		{name: "max results", args: `{"pattern":"^package","max_results":2}`, contains: []string{"stopped after 2 matches"}},
		{name: "bad regexp", args: `{"pattern":"("}`, wantErr: true, contains: []string{"invalid pattern"}},
		{name: "missing pattern", args: `{"path":"src"}`, wantErr: true, contains: []string{`"pattern"`}},
		{name: "dotdot escape", args: `{"pattern":"x","path":"../"}`, wantErr: true, contains: []string{"outside the workspace"}},
		{name: "symlink escape", args: `{"pattern":"secret","path":"escape.txt"}`, wantErr: true, contains: []string{"outside the workspace"}},
	})
}

func TestCompileGlob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		glob, path string
		want       bool
	}{
		{"*.go", "main.go", true},
		{"*.go", "a/main.go", false},
		{"**/*.go", "main.go", true},
		{"**/*.go", "a/b/main.go", true},
		{"a/**", "a/b/c", true},
		{"a/**/c", "a/c", true},
		{"a/**/c", "a/x/y/c", true},
		{"?.go", "ab.go", false},
		{"[ab].go", "b.go", true},
		{"[!ab].go", "c.go", true},
		{"{x,y}.md", "y.md", true},
		{"a.b", "axb", false},
		{`\*.go`, "*.go", true},
	}
	for _, tt := range tests {
		re, err := compileGlob(tt.glob)
		if err != nil {
			t.Errorf("compileGlob(%q): %v", tt.glob, err)
			continue
		}
		if got := re.MatchString(tt.path); got != tt.want {
			t.Errorf("%q matches %q = %v, want %v", tt.glob, tt.path, got, tt.want)
		}
	}
	for _, bad := range []string{"[a", "{a,b", "a}"} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("compileGlob(%q) accepted", bad)
		}
	}
}
