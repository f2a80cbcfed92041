package userlayer

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkReplace measures one checked, staged, atomic replace of a
// skill with its sidecar: the cost of an extension_manage call.
func BenchmarkReplace(b *testing.B) {
	f := newFixture(b, nil)
	m, err := New(Options{Layers: f.layers, Workspace: f.ws, WorkDir: f.ws})
	if err != nil {
		b.Fatal(err)
	}
	docs := []string{skillDoc, skillDoc2}
	if _, err := m.Apply(b.Context(), Request{Operation: OpCreate, Kind: KindSkill, Name: "notes", Content: str(docs[0])}); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		if _, err := m.Apply(b.Context(), Request{Operation: OpReplace, Kind: KindSkill, Name: "notes", Content: str(docs[i%2]), ExpectedDigest: digestOf(docs[(i+1)%2])}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList measures list over a user layer of 100 tools and 100
// skills.
func BenchmarkList(b *testing.B) {
	files := map[string]string{}
	for i := range 100 {
		files[fmt.Sprintf("home/tools/t%d.toml", i)] = strings.ReplaceAll(toolDoc, `"wc"`, fmt.Sprintf(`"t%d"`, i))
		files[fmt.Sprintf("home/skills/s%d/SKILL.md", i)] = strings.ReplaceAll(skillDoc, "notes", fmt.Sprintf("s%d", i))
	}
	f := newFixture(b, files)
	m, err := New(Options{Layers: f.layers, Workspace: f.ws, WorkDir: f.ws})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		res, err := m.Apply(b.Context(), Request{Operation: OpList})
		if err != nil || len(res.Artifacts) != 200 {
			b.Fatalf("%d artifacts, %v", len(res.Artifacts), err)
		}
	}
}
