package skills

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

// BenchmarkDiscover measures the discovery of 20 layers holding 500 and
// 1,000 skills, with SKILL.md files of a realistic size (a 200-character
// description, 4 KB of instructions) and a references/ directory each.
func BenchmarkDiscover(b *testing.B) {
	for _, perLayer := range []int{25, 50} {
		b.Run(fmt.Sprintf("skills=%d", 20*perLayer), func(b *testing.B) { benchmarkDiscover(b, perLayer) })
	}
}

func benchmarkDiscover(b *testing.B, perLayer int) {
	var layers []layer.Layer
	body := strings.Repeat("Follow these steps carefully. ", 140)
	for i := range 20 {
		files := map[string]string{}
		for j := range perLayer {
			name := fmt.Sprintf("skill-%d-%d", i, j)
			desc := "Use when " + strings.Repeat("working on things of kind "+name+", ", 5)
			files[filepath.Join("skills", name, "SKILL.md")] = "---\nname: " + name + "\ndescription: " + desc + "\nlicense: MIT\n---\n" + body
			files[filepath.Join("skills", name, "references", "guide.md")] = "guide"
		}
		kind := layer.KindSpec
		if i < 5 {
			kind = layer.KindProject
		}
		dir := filepath.Join(b.TempDir(), fmt.Sprint(i))
		testenv.WriteTree(b, dir, files)
		layers = append(layers, layer.Layer{Name: fmt.Sprint(i), Dir: dir, Kind: kind})
	}
	roots := Roots(layers, Options{WorkDir: layers[0].Dir, Workspace: filepath.Dir(layers[0].Dir), Home: b.TempDir()})
	b.ReportAllocs()
	report := testenv.ReportCPU(b)
	for b.Loop() {
		set, err := Discover(roots)
		if err != nil || set.Len() != 20*perLayer {
			b.Fatalf("%d skills, %v", set.Len(), err)
		}
	}
	report()
}
