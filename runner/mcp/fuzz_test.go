package mcp

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aerie-run/aerie/runner/layer"
)

// checkServer checks what a parser returned: no panic got through,
// every problem names its file, and every server is complete and
// renders to a declaration that parses back to it.
func checkServer(t *testing.T, s Server, probs []layer.Problem, file string) {
	t.Helper()
	for _, p := range probs {
		if strings.Contains(p.Reason, "internal error") {
			t.Fatalf("the parser panicked: %v", p)
		}
		if p.Reason == "" || p.File != file {
			t.Fatalf("incomplete problem %+v", p)
		}
	}
	if s.ID == "" {
		return
	}
	if !ValidID(s.ID) || s.StartupTimeout <= 0 || s.ToolTimeout <= 0 || len(s.Executors) == 0 {
		t.Fatalf("incomplete server %+v", s)
	}
	switch s.Type {
	case TypeStdio:
		if s.Command == "" || s.URL != "" || s.Headers != nil {
			t.Fatalf("bad stdio server %+v", s)
		}
	case TypeHTTP, TypeSSE:
		if s.URL == "" || s.Command != "" || s.Args != nil || s.Env != nil {
			t.Fatalf("bad %s server %+v", s.Type, s)
		}
	default:
		t.Fatalf("type %q", s.Type)
	}
	back, bp := ParseFile(s.Declaration(), s.ID, Source{File: file})
	if len(bp) > 0 {
		t.Fatalf("the declaration of %+v does not parse back: %v\n%s", s, bp, s.Declaration())
	}
	if diff := cmp.Diff(s, back, cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(0)); diff != "" {
		t.Fatalf("round trip (-server +parsed)\n%s", diff)
	}
}

func corpusSeeds(f *testing.F, ext string) {
	err := filepath.WalkDir("testdata/corpus", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ext) {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			f.Add(string(b))
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add("id: x\ntype: stdio\ncommand: uvx\nargs: [serena, start-mcp-server]\nexecutors: [local]\nrequired: true\n")
	f.Add("id: x\ntype: http\nurl: https://mcp.context7.com/mcp\nheaders:\n  CONTEXT7_API_KEY: abc\ntools: [a, b]\n")
	f.Add("id: x\ntype: sse\nurl: http://h/sse\nstartup_timeout_seconds: 0.001\ntool_timeout_seconds: 1e3\ndisabled: true\n")
	f.Add("id: x\ntype: stdio\ncommand: c\nenv: {A: 1, B: true, C: ~}\nargs: [*a]\n")
	f.Add("a: &a [x, *a]\nid: x\n")
	f.Add("{id: x, type: stdio, command: c, tools: []}")
	corpusSeeds(f, ".json")
	src := Source{File: "/l/mcp_servers/x.yaml", Executors: []string{"devbox"}}
	f.Fuzz(func(t *testing.T, in string) {
		s, probs := ParseFile([]byte(in), "x", src)
		if (s.ID != "") == (len(probs) > 0) {
			t.Fatalf("server %+v with problems %v", s, probs)
		}
		checkServer(t, s, probs, src.File)
	})
}

func FuzzImportClaude(f *testing.F) {
	corpusSeeds(f, ".json")
	f.Add(`{"a": {"type": "sse", "url": "http://x"}, "_c": "x", "b": 1}`)
	f.Fuzz(func(t *testing.T, in string) {
		servers, probs := ImportClaude([]byte(in), "f.json")
		for _, s := range servers {
			checkServer(t, s, probs, "f.json")
		}
		checkServer(t, Server{}, probs, "f.json")
	})
}

func FuzzImportCodex(f *testing.F) {
	corpusSeeds(f, ".toml")
	f.Add("[mcp_servers.a]\ncommand = \"x\"\nargs = [\"1\"]\nstartup_timeout_ms = 10\nenabled = false\n[mcp_servers.b]\nurl = \"https://x\"\nhttp_headers = { A = \"b\" }\n")
	f.Add("mcp_servers = { a = { command = 1 } }\n")
	f.Fuzz(func(t *testing.T, in string) {
		servers, probs := ImportCodex([]byte(in), "c.toml")
		for _, s := range servers {
			checkServer(t, s, probs, "c.toml")
		}
		checkServer(t, Server{}, probs, "c.toml")
	})
}
