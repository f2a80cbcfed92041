package config

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pelletier/go-toml/v2"
)

var fuzzDocs = []string{
	"",
	"# only a comment",
	"database_url = \"postgres://u:p@db/x\" # c\n",
	"database_url='sqlite:///a.db'\r\n[tool_results]\r\nmax_bytes = 10\r\n",
	"a = 1\nb = [\n 1, # x\n]\n\n# t\n[t]\ndatabase_url = 1\n",
	"[tool_results]\ncompress_context = true\nmax_bytes = 100\nhead_bytes = 10\ntail_bytes = 10\nmax_lines = 3\n",
	"tool_results = { max_bytes = -1 }\n",
	"tool_results.head_bytes = 99999999999\n",
	"[database_url]\nx = 1\n",
	"database_url.x = 1\n",
	"[[database_url]]\n",
	"database_url = \"\"\"\nmulti\n\"\"\"\n",
	"\"database_url\" = 'x'\n[a.b]\nc = nan\nd = 1979-05-27T07:32:00Z\n",
	"x = 1\nx = 2\n",
	"[t\n",
	"[moa]\nreference_models = [\"anthropic:a\", \"b\"]\naggregator_model = \"openai:c\"\n",
	"moa = { reference_models = [], aggregator_model = 1 }\n",
	"[moa]\nreference_models = [\"x:y\", 2]\n",
	"[prices.\"a.b\"]\ninput = 1\noutput = \"x\"\n",
	"prices = { m = { input = 1, output = 1e400 } }\n",
}

// FuzzParse checks that no file makes the decoder panic, and that every
// rejection is a *FileError for that file whose position is in the file.
func FuzzParse(f *testing.F) {
	for _, d := range fuzzDocs {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		l, err := parse("f.toml", doc)
		if err == nil {
			err = l.apply(Defaults("/h")).Validate()
			if err != nil {
				err = placeKeyError("f.toml", doc, err)
			}
		}
		if err == nil {
			return
		}
		var fe *FileError
		if !errors.As(err, &fe) || fe.Path != "f.toml" {
			t.Fatalf("error %v (%T) is not a *FileError for f.toml", err, err)
		}
		if lines := bytes.Count(doc, []byte("\n")) + 1; fe.Line < 0 || fe.Line > lines {
			t.Fatalf("error %v: line %d outside a %d-line file", err, fe.Line, lines)
		}
	})
}

// FuzzSetDatabaseURL checks the setup edit: whenever it succeeds, the file
// still parses, holds the new value and every other key with its old value,
// and an inserted line removed nothing of the original. It may refuse only a
// malformed file, a value TOML cannot hold, or a database_url table.
func FuzzSetDatabaseURL(f *testing.F) {
	for _, d := range fuzzDocs {
		f.Add(d, "postgres://u:p@db/x")
		f.Add(d, "sqlite:///tmp/\"odd\"\\\n\x00\x7f.db")
	}
	f.Fuzz(func(t *testing.T, doc, value string) {
		out, err := setTopLevelString("f.toml", []byte(doc), "database_url", value)

		var before map[string]any
		beforeErr := toml.Unmarshal([]byte(doc), &before)
		old, had := before["database_url"]
		_, oldIsString := old.(string)
		mayRefuse := beforeErr != nil || !utf8.ValidString(value) || (had && !oldIsString)
		if err != nil {
			if !mayRefuse {
				t.Fatalf("refused a valid file: %v\n%q", err, doc)
			}
			return
		}
		if beforeErr != nil {
			t.Fatalf("edited a malformed file (%v):\n%q", beforeErr, doc)
		}

		var after map[string]any
		if err := toml.Unmarshal(out, &after); err != nil {
			t.Fatalf("result does not parse: %v\nbefore: %q\nafter:  %q", err, doc, out)
		}
		if after["database_url"] != value {
			t.Fatalf("database_url = %#v, want %q\nafter: %q", after["database_url"], value, out)
		}
		delete(before, "database_url")
		delete(after, "database_url")
		if diff := cmp.Diff(before, after, cmpopts.EquateNaNs(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("other keys changed (-before +after):\n%s\nbefore: %q\nafter:  %q", diff, doc, out)
		}
		if !had {
			p := commonPrefix(doc, string(out))
			s := commonPrefix(reverse(doc[p:]), reverse(string(out[p:])))
			if p+s != len(doc) {
				t.Fatalf("insertion removed text\nbefore: %q\nafter:  %q", doc, out)
			}
		}
	})
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
