package extensions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aerie-run/aerie/runner/layer"
)

var fuzzTOML = []string{
	"",
	"# comment only\n",
	"name = \"word_count\"\ndescription = \"d\"\ncommand = [\"./count.sh\", \"--json\"]\ntimeout_secs = 30\nsandbox = true\n[parameters.text]\ntype = \"string\"\nrequired = true\n[parameters.mode]\ntype = \"string\"\nenum = [\"a\"]\n",
	"name = 'x'\ndescription = 'd'\ncommand = ['/bin/cat']\ntimeout_secs = 3600\n",
	"name = 'x'\ndescription = 'd'\ncommand = ['x']\ntimeout_secs = -1\n",
	"name = 'x'\ncommand = 'x'\n[parameters]\nx = 1\n",
	"[parameters.\"\"]\ntype = 'string'\n",
	"[[pin]]\npath = '.aerie/tools/a.toml'\nsha256 = '" + strings.Repeat("a", 64) + "'\n",
	"[[pin]]\npath = '../x'\n",
	"pin = [{path = 'a', sha256 = 'b'}]\n",
	"[toolsets.a]\ntools = ['x']\nincludes = ['a', 'b']\nexclude = ['x']\n[toolsets.b]\nincludes = ['a']\n",
	"[toolsets]\na = 1\n",
	"bash = 'desc'\n\"mcp__a__b\" = \"\"\"\nx\n\"\"\"\n",
	"a.b.c = 1\n[x]\ny = 1979-05-27T07:32:00Z\nz = nan\n",
	"x = [\n",
	"x = 1\nx = 2\n",
	"\xff = 1\n",
}

// checkFileError fails unless err is a *FileError for f.toml with a line
// inside the document.
func checkFileError(t *testing.T, doc []byte, err error) {
	t.Helper()
	var fe *layer.FileError
	if !errors.As(err, &fe) || fe.Path != "f.toml" {
		t.Fatalf("error %v (%T) is not a *FileError for f.toml", err, err)
	}
	if lines := bytes.Count(doc, []byte("\n")) + 1; fe.Line < 0 || fe.Line > lines {
		t.Fatalf("error %v: line %d outside a %d-line file", err, fe.Line, lines)
	}
	if s := layer.SanitizeReason(err.Error()); !utf8.ValidString(s) || len(s) > layer.MaxReason+len("…") || strings.ContainsAny(s, "\n\r\x1b") {
		t.Fatalf("sanitized reason %q", s)
	}
}

func FuzzParseManifest(f *testing.F) {
	for _, d := range fuzzTOML {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, err := ParseManifest("f.toml", doc)
		if err != nil {
			checkFileError(t, doc, err)
			return
		}
		if !ValidToolName(m.Name) || len(m.Command) == 0 || m.Command[0] == "" || strings.TrimSpace(m.Description) == "" {
			t.Fatalf("accepted an invalid manifest: %+v", m)
		}
		if d := m.Timeout(); d < 1e9 || d > MaxToolTimeout {
			t.Fatalf("accepted timeout %s", d)
		}
		var schema map[string]any
		if err := json.Unmarshal(m.Schema(), &schema); err != nil || schema["type"] != "object" {
			t.Fatalf("schema %s: %v", m.Schema(), err)
		}
	})
}

func FuzzParseToolsets(f *testing.F) {
	for _, d := range fuzzTOML {
		f.Add([]byte(d), "a")
	}
	f.Fuzz(func(t *testing.T, doc []byte, name string) {
		sets, err := ParseToolsets("f.toml", doc)
		if err != nil {
			checkFileError(t, doc, err)
			return
		}
		ts := NewToolsets("f.toml", sets)
		// Every toolset resolves or fails cleanly, cycles included.
		for _, n := range append(ts.Names(), name) {
			tools, err := ts.Resolve(n)
			if err != nil {
				if !errors.Is(err, ErrUnknownToolset) {
					t.Fatalf("Resolve(%q): %v", n, err)
				}
				continue
			}
			for _, tool := range tools {
				if tool == "" {
					t.Fatalf("Resolve(%q) has an empty name", n)
				}
			}
		}
	})
}

func FuzzParseDescriptions(f *testing.F) {
	for _, d := range fuzzTOML {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, err := ParseDescriptions("f.toml", doc)
		if err != nil {
			checkFileError(t, doc, err)
			return
		}
		for k, v := range m {
			if strings.TrimSpace(v) == "" {
				t.Fatalf("accepted an empty description for %q", k)
			}
		}
	})
}

// FuzzHeadTail compares the capture with keeping everything and cutting
// afterwards.
func FuzzHeadTail(f *testing.F) {
	f.Add([]byte("hello, world"), uint8(4), uint8(3))
	f.Add([]byte("aéxxxxxxxé"), uint8(2), uint8(1))
	f.Add(bytes.Repeat([]byte("ab"), 100), uint8(7), uint8(13))
	f.Fuzz(func(t *testing.T, data []byte, n, chunk uint8) {
		if n == 0 || chunk == 0 {
			return
		}
		w := newHeadTail(int(n))
		for rest := data; len(rest) > 0; {
			k := min(int(chunk), len(rest))
			if m, err := w.Write(rest[:k]); m != k || err != nil {
				t.Fatalf("Write of %d bytes = %d, %v", k, m, err)
			}
			rest = rest[k:]
		}
		got := w.String()
		if len(data) <= 2*int(n) {
			if got != string(data) {
				t.Fatalf("short output changed: %q -> %q", data, got)
			}
			return
		}
		i := strings.Index(got, "\n[... ")
		j := strings.Index(got, " bytes dropped ...]\n")
		if i < 0 || j < i {
			t.Fatalf("no marker in %q", got)
		}
		head, tail := got[:i], got[j+len(" bytes dropped ...]\n"):]
		var dropped int
		if _, err := fmt.Sscanf(got[i+len("\n[... "):j], "%d", &dropped); err != nil {
			t.Fatalf("no count of dropped bytes in %q: %v", got, err)
		}
		if !bytes.HasPrefix(data, []byte(head)) || !bytes.HasSuffix(data, []byte(tail)) || len(head)+dropped+len(tail) != len(data) {
			t.Fatalf("%q (n=%d) -> head %q, %d dropped, tail %q", data, n, head, dropped, tail)
		}
		if len(head) > int(n) || len(tail) > int(n) || len(head) < int(n)-3 || len(tail) < int(n)-3 {
			t.Fatalf("kept %d and %d bytes of %d", len(head), len(tail), n)
		}
	})
}
