package plugins

import (
	"errors"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/layer"
)

func FuzzParseManifest(f *testing.F) {
	f.Add(true, []byte("name: review\nversion: 1.2.0\nskills: [a, b]\nhooks:\n  Stop:\n    - hooks: [{type: command, command: x}]\nmcp_servers:\n  - {id: a, type: stdio, command: c, env: {A: b}}\n"))
	f.Add(true, []byte("name: &a x\nversion: *a\n"))
	f.Add(true, []byte("mcp_servers: [{id: x, type: http, url: 'http://h', headers: {a: b}}]\n"))
	f.Add(false, []byte(`{"name":"supabase","version":"0.1.10","skills":["./skills/","x"]}`))
	f.Add(false, []byte(`{"name":"a","skills":"../x"}`))
	f.Fuzz(func(t *testing.T, native bool, data []byte) {
		format := FormatCodex
		if native {
			format = FormatAerie
		}
		m, err := ParseManifest(format, "/p/m", data)
		if err != nil {
			var me layer.Problem
			if !errors.As(err, &me) || me.File != "/p/m" {
				t.Fatalf("error %v is not a layer.Problem naming the file", err)
			}
			return
		}
		if CheckName(m.Name) != nil {
			t.Fatalf("accepted name %q", m.Name)
		}
		for _, s := range m.Skills {
			if _, err := cleanRel(s); err != nil {
				t.Fatalf("accepted skills path %q: %v", s, err)
			}
		}
	})
}

func FuzzParseMarketplace(f *testing.F) {
	f.Add(true, []byte(`{"name":"m","owner":{"name":"O"},"metadata":{"pluginRoot":"./p"},"renames":{"a":"b"},"plugins":[`+
		`{"name":"a","source":"./plugins/a","strict":false,"skills":["./s"],"lspServers":{}},`+
		`{"name":"b","source":{"source":"git-subdir","url":"o/r","path":"x","ref":"main","sha":"0123456"}},`+
		`{"name":"c","source":{"source":"github","repo":"o/c"}},{"name":"d","source":{"source":"npm"}}]}`))
	f.Add(false, []byte(`{"name":"m","plugins":[{"name":"a","source":{"source":"local","path":"./plugins/a"}}]}`))
	f.Add(true, []byte(`{"name":"m","plugins":[{"name":"a","source":{"source":"url","url":"ext::sh"}},{"name":"a","source":"../x"}]}`))
	f.Fuzz(func(t *testing.T, claude bool, data []byte) {
		format := FormatCodex
		if claude {
			format = FormatClaude
		}
		m, err := ParseMarketplace(format, "/m/marketplace.json", data)
		if err != nil {
			var p layer.Problem
			if !errors.As(err, &p) || p.File != "/m/marketplace.json" {
				t.Fatalf("error %v is not a layer.Problem naming the file", err)
			}
			return
		}
		if CheckName(m.Name) != nil {
			t.Fatalf("accepted name %q", m.Name)
		}
		names := map[string]bool{}
		for _, e := range m.Entries {
			if e.Problem != nil {
				var p layer.Problem
				if !errors.As(e.Problem, &p) || p.File != "/m/marketplace.json" || !strings.HasPrefix(p.Field, "plugins[") {
					t.Fatalf("entry problem %v does not name the file and the entry", e.Problem)
				}
				continue
			}
			if CheckName(e.Name) != nil || names[e.Name] {
				t.Fatalf("accepted entry name %q (twice: %v)", e.Name, names[e.Name])
			}
			names[e.Name] = true
			for _, s := range append([]string{e.Source.Path}, e.Skills...) {
				if s == "" {
					continue
				}
				if _, err := cleanRel(s); err != nil {
					t.Fatalf("accepted path %q: %v", s, err)
				}
			}
			switch e.Source.Kind {
			case SourceRelative:
				if e.Source.Path == "" {
					t.Fatal("a relative source without a path")
				}
			case SourceGit:
				if CheckGitURL(e.Source.URL) != nil || checkRef(e.Source.Ref) != nil || strings.HasPrefix(e.Source.SHA, "-") {
					t.Fatalf("accepted git source %+v", e.Source)
				}
			default:
				t.Fatalf("source kind %q", e.Source.Kind)
			}
		}
	})
}
