package plugins

import (
	"errors"
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
