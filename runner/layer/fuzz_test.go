package layer

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
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
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != "f.toml" {
		t.Fatalf("error %v (%T) is not a *FileError for f.toml", err, err)
	}
	if lines := bytes.Count(doc, []byte("\n")) + 1; fe.Line < 0 || fe.Line > lines {
		t.Fatalf("error %v: line %d outside a %d-line file", err, fe.Line, lines)
	}
	if s := SanitizeReason(err.Error()); !utf8.ValidString(s) || len(s) > MaxReason+len("…") || strings.ContainsAny(s, "\n\r\x1b") {
		t.Fatalf("sanitized reason %q", s)
	}
}

func FuzzParseTrust(f *testing.F) {
	for _, d := range fuzzTOML {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		pins, err := ParseTrust("f.toml", doc)
		if err != nil {
			checkFileError(t, doc, err)
			return
		}
		for _, p := range pins {
			if !hexSHA256().MatchString(p.SHA256) || p.Path == "" || strings.HasPrefix(p.Path, "/") {
				t.Fatalf("accepted pin %+v", p)
			}
			// A pin's TOML form reads back as itself.
			back, err := ParseTrust("f.toml", []byte(p.TOML()))
			if err != nil || len(back) != 1 || back[0] != p {
				t.Fatalf("pin %+v round-trips to %+v, %v", p, back, err)
			}
		}
	})
}

func FuzzParseProvenance(f *testing.F) {
	for _, d := range []string{
		`{"origin":"agent","operation_id":"op","digest":"sha256:` + strings.Repeat("0", 64) + `","activation_boundary":"next_turn"}`,
		`{"origin":"user","operation_id":"op","digest":"sha256:` + strings.Repeat("0", 64) + `"}`,
		`{"origin":"agent"}`, `{}`, `[]`, `null`, `{"origin":"agent"} {}`, ``,
	} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := ParseProvenance(doc)
		if err != nil {
			return
		}
		if p.OperationID == "" || !IsDigest(p.Digest) || (p.State == ProvenanceAgent) != (p.Origin == OriginAgent) {
			t.Fatalf("accepted %+v", p)
		}
	})
}
