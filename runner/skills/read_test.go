package skills

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aerie-run/aerie/runner/layer"
)

// TestReadSized reads SKILL.md files larger than the head discovery reads
// first, through every kind of reader: the frontmatter comes out as from
// the whole file, however far it reaches.
func TestReadSized(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("Follow the steps. ", 1000)
	long := "Use when " + strings.Repeat("long ", frontmatterHead/5)
	// edge fills the frontmatter so that the closing line ends exactly at
	// the end of the head.
	edge := strings.Repeat("x", frontmatterHead-len("---\ndescription: \n---\n"))
	tests := []struct {
		name     string
		content  string
		wantHead bool // read no further than the head
	}{
		{"frontmatter in the head", "---\nname: a\ndescription: Short.\n---\n" + body, true},
		{"frontmatter past the head", "---\nname: a\ndescription: " + long + "\n---\n" + body, false},
		{"closing line at the edge", "---\ndescription: " + edge + "\n---\n" + body, true},
		{"longer line at the edge", "---\ndescription: " + edge + "\n----\nname: b\n---\n" + body, false},
		{"closing line cut at the edge", "---\ndescription: " + edge + "x\n---\n" + body, false},
		{"no frontmatter", body, false},
		{"small file", "---\ndescription: Small.\n---\n", false},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		p := filepath.Join(dir, tt.name, "SKILL.md")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	confined, err := layer.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer confined.Close()
	readers := map[string]fileReader{
		"path":     {head: newFullReads(), fd: -1, dir: dir},
		"fd":       {head: newFullReads(), fd: fd},
		"beneath":  {head: newFullReads(), fd: fd, beneath: true},
		"confined": {head: newFullReads(), fd: -1, confined: confined},
	}
	for name, r := range readers {
		for _, tt := range tests {
			res := r.read(tt.name + "/SKILL.md")
			if res.err != nil {
				t.Fatalf("%s %s: %v", name, tt.name, res.err)
			}
			if head := len(res.data) < len(tt.content); head != tt.wantHead {
				t.Errorf("%s %s: read %d of %d bytes", name, tt.name, len(res.data), len(tt.content))
			}
			fm, err := ParseFrontmatter(res.data)
			res.release()
			want, wantErr := ParseFrontmatter([]byte(tt.content))
			if fm != want || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("%s %s: %+v, %v; want %+v, %v", name, tt.name, fm, err, want, wantErr)
			}
		}
	}
}
