package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDepsAreAeries: deps.go links exactly the packages of other modules
// that aerie's own packages import, so that the floor it measures is the
// one aerie stands on.
func TestDepsAreAeries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if eq .Module.Path "github.com/aerie-run/aerie"}}{{join .Imports "\n"}}{{end}}{{end}}`,
		"github.com/aerie-run/aerie/cmd/aerie").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var want []string
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		if strings.Contains(first, ".") && !strings.HasPrefix(p, "github.com/aerie-run/aerie") {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)

	f, err := parser.ParseFile(token.NewFileSet(), "deps.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		have = append(have, p)
	}
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Errorf("deps.go imports\n\t%s\naerie's packages import\n\t%s\nmake deps.go's list the second", strings.Join(have, "\n\t"), strings.Join(want, "\n\t"))
	}
}
