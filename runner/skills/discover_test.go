package skills

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

// tree writes files, as testenv.WriteTree takes them, under a new
// directory and returns it.
func tree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, files)
	return dir
}

// md is a SKILL.md with a name (none when empty) and a description.
func md(name, desc string) string {
	s := "---\n"
	if name != "" {
		s += "name: " + name + "\n"
	}
	return s + "description: " + desc + "\n---\n# " + name + "\n\nDo the thing.\n"
}

// statuses summarizes entries as "root name status", the name or the
// path's base when there is none.
func statuses(es []Entry) []string {
	var out []string
	for _, e := range es {
		n := e.Name
		if n == "" {
			n = "(" + filepath.Base(e.Path) + ")"
		}
		out = append(out, e.Root+" "+n+" "+string(e.Status))
	}
	return out
}

func TestRootsOrder(t *testing.T) {
	t.Parallel()
	layers := []layer.Layer{
		{Name: "sub/.aerie", Dir: "/ws/sub/.aerie", Kind: layer.KindProject},
		{Name: ".aerie", Dir: "/ws/.aerie", Kind: layer.KindProject},
		{Name: "spec[0]", Dir: "/etc/aerie/layers/0", Kind: layer.KindSpec},
		{Name: "home", Dir: "/home/u/.aerie", Kind: layer.KindHome},
		{Name: "bundled", Dir: "/opt/aerie/bundled", Kind: layer.KindBundled},
	}
	plugin := Root{Name: "plugin review", Dir: "/home/u/.aerie/plugins/review/skills", Namespace: "review"}
	projectPlugin := Root{Name: "plugin lint", Dir: "/ws/.aerie/plugins/lint/skills", Namespace: "lint"}
	got := Roots(layers, Options{WorkDir: "/ws/sub", Workspace: "/ws", Home: "/home/u", Plugins: []Root{plugin, projectPlugin}})
	// Each with the kind of the layer it is in, for the report.
	want := []Root{
		{Name: "workdir .agents/skills", Dir: "/ws/sub/.agents/skills", Confine: "/ws", Kind: layer.KindProject},
		{Name: "workdir .claude/skills", Dir: "/ws/sub/.claude/skills", Confine: "/ws", Kind: layer.KindProject},
		{Name: "sub/.aerie", Dir: "/ws/sub/.aerie/skills", Confine: "/ws", Kind: layer.KindProject},
		{Name: ".aerie", Dir: "/ws/.aerie/skills", Confine: "/ws", Kind: layer.KindProject},
		{Name: "spec[0]", Dir: "/etc/aerie/layers/0/skills", Strict: true, Kind: layer.KindSpec},
		{Name: "home", Dir: "/home/u/.aerie/skills", Strict: true, Kind: layer.KindHome},
		{Name: "bundled", Dir: "/opt/aerie/bundled/skills", Strict: true, Kind: layer.KindBundled},
		{Name: "plugin review", Dir: "/home/u/.aerie/plugins/review/skills", Namespace: "review", Kind: layer.KindHome},
		{Name: "plugin lint", Dir: "/ws/.aerie/plugins/lint/skills", Namespace: "lint", Confine: "/ws", Kind: layer.KindProject},
		{Name: "home .agents/skills", Dir: "/home/u/.agents/skills"},
		{Name: "home .claude/skills", Dir: "/home/u/.claude/skills"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// The bundled layer read from the binary has no directory: it gives no
	// root, never the relative "skills" of the current directory.
	got = Roots([]layer.Layer{{Name: "bundled", Kind: layer.KindBundled}}, Options{})
	if len(got) != 0 {
		t.Errorf("a layer without a directory gave roots %+v; want none", got)
	}
	// Without a workspace, project layers stay inside their project
	// directory and there are no working-directory conventions.
	got = Roots(layers[:1], Options{})
	if diff := cmp.Diff([]Root{{Name: "sub/.aerie", Dir: "/ws/sub/.aerie/skills", Confine: "/ws/sub", Kind: layer.KindProject}}, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestDiscoverFirstNameWins(t *testing.T) {
	t.Parallel()
	home := tree(t, map[string]string{
		".agents/skills/shared/SKILL.md":    md("shared", "from the home directory"),
		".claude/skills/home-only/SKILL.md": md("", "only at home"),
	})
	ws := tree(t, map[string]string{
		"sub/.agents/skills/shared/SKILL.md":      md("shared", "from the working directory"),
		"sub/.claude/skills/claude/SKILL.md":      md("claude", "claude convention"),
		"sub/.claude/skills/other/SKILL.md":       md("shared", "same name, second root"),
		".aerie/skills/project/SKILL.md":          md("project", "project layer"),
		".aerie/skills/team/release/SKILL.md":     md("release-notes", "nested in a category directory"),
		".aerie/skills/team/release/sub/SKILL.md": md("hidden", "below a skill: not searched"),
	})
	spec := tree(t, map[string]string{
		"skills/release-notes/SKILL.md": md("", "the platform's release notes"),
		"skills/platform/SKILL.md":      md("", "platform"),
	})
	bundled := tree(t, map[string]string{"skills/aerie/SKILL.md": md("aerie", "the built-in skill")})
	plugin := tree(t, map[string]string{
		"skills/checklist/SKILL.md": md("", "review checklist"),
		"skills/aerie/SKILL.md":     md("", "a plugin skill may share a bare name"),
	})
	layers := []layer.Layer{
		{Name: ".aerie", Dir: filepath.Join(ws, ".aerie"), Kind: layer.KindProject},
		{Name: "spec[0]", Dir: spec, Kind: layer.KindSpec},
		{Name: "missing", Dir: filepath.Join(spec, "nope"), Kind: layer.KindPlatform},
		{Name: "bundled", Dir: bundled, Kind: layer.KindBundled},
	}
	roots := Roots(layers, Options{
		WorkDir: filepath.Join(ws, "sub"), Workspace: ws, Home: home,
		Plugins: []Root{{Name: "plugin review", Dir: filepath.Join(plugin, "skills"), Namespace: "review"}},
	})
	set, err := Discover(roots)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"workdir .agents/skills shared active",
		"workdir .claude/skills claude active",
		"workdir .claude/skills shared shadowed",
		".aerie project active",
		".aerie release-notes active",
		"spec[0] platform active",
		"spec[0] release-notes shadowed",
		"bundled aerie active",
		"plugin review review:aerie active",
		"plugin review review:checklist active",
		"home .agents/skills shared shadowed",
		"home .claude/skills home-only active",
	}
	if diff := cmp.Diff(want, statuses(set.Entries)); diff != "" {
		t.Errorf("entries (-want +got)\n%s", diff)
	}
	if len(set.Problems) != 0 {
		t.Errorf("problems: %v", set.Problems)
	}
	sk, ok := set.Lookup("shared")
	if !ok || sk.Description != "from the working directory" || sk.Dir != filepath.Join(ws, "sub/.agents/skills/shared") || sk.Root != "workdir .agents/skills" {
		t.Errorf("shared = %+v", sk)
	}
	if sk, ok := set.Lookup("review:checklist"); !ok || sk.Plugin != "review" {
		t.Errorf("review:checklist = %+v, %v", sk, ok)
	}
	if _, ok := set.Lookup("hidden"); ok {
		t.Error("a skill below a skill directory was discovered")
	}
	shadow := set.Entries[2]
	if !strings.Contains(shadow.Reason, "found first, in workdir .agents/skills") {
		t.Errorf("shadowed reason %q", shadow.Reason)
	}
	if got, want := set.Names(), []string{"aerie", "claude", "home-only", "platform", "project", "release-notes", "review:aerie", "review:checklist", "shared"}; !slices.Equal(got, want) {
		t.Errorf("names %v", got)
	}
}

func TestDiscoverMalformed(t *testing.T) {
	t.Parallel()
	big := "---\ndescription: big\n---\n" + strings.Repeat("x", MaxFileSize)
	files := map[string]string{
		"skills/ok/SKILL.md":               md("", "fine"),
		"skills/no-front/SKILL.md":         "# just markdown\n",
		"skills/no-desc/SKILL.md":          "---\nname: no-desc\n---\n",
		"skills/Bad_Dir/SKILL.md":          "---\ndescription: x\n---\n",
		"skills/bad-name/SKILL.md":         "---\nname: Bad Name\ndescription: x\n---\n",
		"skills/big/SKILL.md":              big,
		"skills/dir-skill/SKILL.md/x":      "SKILL.md is a directory",
		"skills/fallback/SKILL.md":         "---\nname: ok2\ndescription: y\n",
		"skills/.git/objects/SKILL.md":     md("", "never searched"),
		"skills/deep/a/b/c/d/e/SKILL.md":   md("deep-one", "deep"),
		"skills/category/README.md":        "not a skill",
		"skills/category/inner/SKILL.md":   md("", "in a category"),
		"skills/category/inner/x/SKILL.md": md("", "below a skill"),
	}
	for _, tc := range []struct {
		kind    layer.Kind
		wantErr bool
	}{{layer.KindProject, false}, {layer.KindHome, true}, {layer.KindBundled, true}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			dir := tree(t, files)
			set, err := Discover(Roots([]layer.Layer{{Name: "l", Dir: dir, Kind: tc.kind}}, Options{Workspace: dir}))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want one: %v", err, tc.wantErr)
			}
			want := []string{
				"l (Bad_Dir) skipped",
				"l (bad-name) skipped",
				"l (big) skipped",
				"l inner active",
				"l deep-one active",
				"l (dir-skill) skipped",
				"l (fallback) skipped",
				"l (no-desc) skipped",
				"l (no-front) skipped",
				"l ok active",
			}
			if diff := cmp.Diff(want, statuses(set.Entries)); diff != "" {
				t.Errorf("entries (-want +got)\n%s", diff)
			}
			reasons := map[string]string{}
			for _, p := range set.Problems {
				reasons[filepath.Base(filepath.Dir(p.File))] = p.Error()
			}
			for dir, want := range map[string]string{
				"Bad_Dir":   `SKILL.md: name: missing, and the directory name "Bad_Dir" is not a valid skill name`,
				"bad-name":  `SKILL.md: name: "Bad Name" is not a valid skill name`,
				"big":       "SKILL.md: larger than 1 MB (1048601 bytes); not read",
				"dir-skill": "SKILL.md: not a regular file",
				"fallback":  "SKILL.md: does not start with YAML frontmatter",
				"no-desc":   "SKILL.md: description: missing; say when the agent should use the skill",
				"no-front":  "SKILL.md: does not start with YAML frontmatter",
			} {
				if !strings.Contains(reasons[dir], want) {
					t.Errorf("%s: problem %q, want it to contain %q", dir, reasons[dir], want)
				}
			}
			if tc.wantErr {
				for _, d := range []string{"Bad_Dir", "bad-name", "big", "no-desc"} {
					if !strings.Contains(err.Error(), filepath.Join(dir, "skills", d, "SKILL.md")) {
						t.Errorf("the error does not name %s: %v", d, err)
					}
				}
				var p layer.Problem
				if !errors.As(err, &p) {
					t.Errorf("the error does not wrap a Problem: %T", err)
				}
			}
		})
	}
}

// A malformed skill is skipped, not claimed: a farther skill of the same
// name is used instead.
func TestDiscoverMalformedDoesNotShadow(t *testing.T) {
	t.Parallel()
	near := tree(t, map[string]string{"skills/x/SKILL.md": "---\nname: x\n---\n"})
	far := tree(t, map[string]string{"skills/x/SKILL.md": md("x", "far")})
	set, err := Discover(Roots([]layer.Layer{
		{Name: "near", Dir: near, Kind: layer.KindProject},
		{Name: "far", Dir: far, Kind: layer.KindSpec},
	}, Options{Workspace: near}))
	if err != nil {
		t.Fatal(err)
	}
	if sk, ok := set.Lookup("x"); !ok || sk.Root != "far" {
		t.Errorf("x = %+v, %v", sk, ok)
	}
}

func TestDiscoverSymlinks(t *testing.T) {
	t.Parallel()
	outside := tree(t, map[string]string{
		"single/SKILL.md":   md("", "a skill kept elsewhere"),
		"many/one/SKILL.md": md("", "one of many"),
		"many/two/SKILL.md": md("", "two of many"),
		"secret/SKILL.md":   md("", "outside the workspace"),
		"file.md":           "text",
	})
	home := tree(t, map[string]string{
		".agents/skills/linked":  "-> " + filepath.Join(outside, "single"),
		".agents/skills/tree":    "-> " + filepath.Join(outside, "many"),
		".agents/skills/broken":  "-> " + filepath.Join(outside, "gone"),
		".agents/skills/file.md": "-> " + filepath.Join(outside, "file.md"),
	})
	ws := tree(t, map[string]string{
		"vendor/inside/SKILL.md":  md("", "inside the workspace"),
		".agents/skills/inside":   "-> ../../vendor/inside",
		".agents/skills/escape":   "-> " + filepath.Join(outside, "secret"),
		".agents/skills/relative": "-> ../../../" + filepath.Base(outside) + "/secret",
	})
	// The whole root may be a link too, as in a ConfigMap mount.
	spec := tree(t, map[string]string{"real/viaroot/SKILL.md": md("", "through a linked root"), "skills": "-> real"})
	set, err := Discover(Roots([]layer.Layer{{Name: "spec", Dir: spec, Kind: layer.KindSpec}}, Options{WorkDir: ws, Home: home}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"workdir .agents/skills (escape) skipped",
		"workdir .agents/skills inside active",
		"workdir .agents/skills (relative) skipped",
		"spec viaroot active",
		"home .agents/skills (broken) skipped",
		"home .agents/skills linked active",
		"home .agents/skills (tree) skipped",
	}
	if diff := cmp.Diff(want, statuses(set.Entries)); diff != "" {
		t.Errorf("entries (-want +got)\n%s", diff)
	}
	for _, e := range set.Entries {
		switch filepath.Base(e.Path) {
		case "escape", "relative":
			if !strings.Contains(e.Reason, "leads outside the workspace") {
				t.Errorf("%s: reason %q", e.Path, e.Reason)
			}
		case "tree":
			if !strings.Contains(e.Reason, "must point straight at a single skill directory") {
				t.Errorf("tree: reason %q", e.Reason)
			}
		case "broken":
			if !strings.Contains(e.Reason, "no such file") {
				t.Errorf("broken: reason %q", e.Reason)
			}
		}
	}
	if sk, _ := set.Lookup("linked"); sk.Dir != filepath.Join(home, ".agents/skills/linked") {
		t.Errorf("linked skill dir %q", sk.Dir)
	}
	content, err := mustLookup(t, set, "linked").Content()
	if err != nil || !strings.Contains(content, "a skill kept elsewhere") {
		t.Errorf("content %q, %v", content, err)
	}
	content, err = mustLookup(t, set, "inside").Content()
	if err != nil || !strings.Contains(content, "inside the workspace") {
		t.Errorf("content %q, %v", content, err)
	}
}

func mustLookup(t *testing.T, set *Set, name string) Skill {
	t.Helper()
	sk, ok := set.Lookup(name)
	if !ok {
		t.Fatalf("no skill %q; have %v", name, set.Names())
	}
	return sk
}

// A root that is a file, or a single skill's directory.
func TestDiscoverRootShapes(t *testing.T) {
	t.Parallel()
	dir := tree(t, map[string]string{
		"single/SKILL.md": md("", "the root is one skill"),
		"file":            "x",
	})
	set, err := Discover([]Root{
		{Name: "single", Dir: filepath.Join(dir, "single"), Namespace: "p"},
		{Name: "file", Dir: filepath.Join(dir, "file"), Strict: true},
	})
	if err == nil || !strings.Contains(err.Error(), "file: is not a directory") {
		t.Errorf("error = %v", err)
	}
	if _, ok := set.Lookup("p:single"); !ok {
		t.Errorf("names %v", set.Names())
	}
	// A confined root outside its confinement is refused.
	set, _ = Discover([]Root{{Name: "x", Dir: dir, Confine: filepath.Join(dir, "single")}})
	if len(set.Problems) != 1 || !strings.Contains(set.Problems[0].Reason, "is outside") {
		t.Errorf("problems %v", set.Problems)
	}
}

func TestCatalog(t *testing.T) {
	t.Parallel()
	dir := tree(t, map[string]string{
		"skills/zeta/SKILL.md":  md("", "Use last."),
		"skills/alpha/SKILL.md": "---\ndescription: |\n  Use first,\n    across lines.\n---\n",
	})
	set, err := Discover(Roots([]layer.Layer{{Name: "l", Dir: dir, Kind: layer.KindHome}}, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Skills\n\nSkills are instructions for particular kinds of tasks. When a task fits a skill's description, " +
		"read the skill with the `skill` tool before you start, and follow it. A skill attached to the user's message is already in your context.\n\n" +
		"- alpha: Use first, across lines.\n- zeta: Use last.\n"
	if diff := cmp.Diff(want, set.Catalog()); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	var empty *Set
	if empty.Catalog() != "" || empty.Len() != 0 || empty.Names() != nil {
		t.Error("a nil set is not empty")
	}
}

// A FIFO planted as a SKILL.md, or as a file the tool is asked for, is
// refused at once: opening it must not wait for a writer.
func TestDiscoverFIFO(t *testing.T) {
	t.Parallel()
	ws := tree(t, map[string]string{".agents/skills/ok/SKILL.md": md("", "fine")})
	for _, p := range []string{".agents/skills/fifo/SKILL.md", ".agents/skills/ok/pipe"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(ws, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	home := tree(t, nil)
	if err := syscall.Mkfifo(filepath.Join(home, "SKILL.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := Discover(append(Roots(nil, Options{WorkDir: ws}), Root{Name: "home", Dir: home}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"workdir .agents/skills (fifo) skipped", "workdir .agents/skills ok active", "home (" + filepath.Base(home) + ") skipped"}
	if diff := cmp.Diff(want, statuses(set.Entries)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	for _, p := range set.Problems {
		if !strings.HasSuffix(p.Reason, "not a regular file") {
			t.Errorf("problem %v", p)
		}
	}
	if r := NewTool(set).Run(t.Context(), []byte(`{"name":"ok","file":"pipe"}`)); !r.IsError || !strings.Contains(r.Content, "not a regular file") {
		t.Errorf("%v %s", r.IsError, r.Content)
	}
}

// TestDiscoverProjectPluginConfined: a plugin in a project layer belongs to
// the repository, and a link in its skills that leads out of the
// workspace is not followed.
func TestDiscoverProjectPluginConfined(t *testing.T) {
	t.Parallel()
	outside := tree(t, map[string]string{"secret/SKILL.md": md("leaked", "outside the workspace")})
	ws := tree(t, map[string]string{
		".aerie/plugins/lint/skills/ok/SKILL.md": md("ok", "inside"),
		".aerie/plugins/lint/skills/escape":      "-> " + filepath.Join(outside, "secret"),
	})
	plugin := Root{Name: "plugin lint", Dir: filepath.Join(ws, ".aerie/plugins/lint/skills"), Namespace: "lint"}
	set, err := Discover(Roots(nil, Options{WorkDir: ws, Plugins: []Root{plugin}}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"plugin lint (escape) skipped", "plugin lint lint:ok active"}, statuses(set.Entries)); diff != "" {
		t.Errorf("entries (-want +got)\n%s", diff)
	}
	if _, ok := set.Lookup("lint:leaked"); ok {
		t.Error("a skill outside the workspace was discovered")
	}
}

// TestBoundedDiscovery: a skills directory of 10,000 skills and a 100 MB
// SKILL.md, in a project layer and in a private one, does not stall
// discovery: the big file is refused unread, the search stops at its cap
// with the first directory left out named in the report, and only in the
// private layer is that an error.
func TestBoundedDiscovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	skillsDir := filepath.Join(dir, "skills")
	for i := range 10000 {
		name := fmt.Sprintf("s%05d", i)
		testenv.WriteTree(t, skillsDir, map[string]string{name + "/SKILL.md": md(name, "Use for "+name+".")})
	}
	// A sparse 100 MB SKILL.md sorted first: refused on its size, unread.
	big := filepath.Join(skillsDir, "a-big")
	testenv.SparseFile(t, filepath.Join(big, "SKILL.md"), 100<<20)

	// A project layer's root is confined to the workspace, and read
	// through it; a private one is read as it is.
	for _, root := range []Root{{Name: "project", Dir: skillsDir, Confine: dir}, {Name: "private", Dir: skillsDir, Strict: true}} {
		start := time.Now()
		set, err := Discover([]Root{root})
		t.Logf("%s: searched a skills directory of 10,001 skills in %s", root.Name, time.Since(start))
		if root.Strict != (err != nil) || root.Strict && !strings.Contains(err.Error(), "the search stopped after 10000 directories") {
			t.Errorf("%s: error %v", root.Name, err)
		}
		// The root, a-big and 9,998 skill directories make 10,000.
		if set.Len() != maxDirs-2 {
			t.Errorf("%s: %d skills, want %d", root.Name, set.Len(), maxDirs-2)
		}
		byPath := map[string]Entry{}
		for _, e := range set.Entries {
			byPath[e.Path] = e
		}
		if e := byPath[big]; e.Status != layer.StatusSkipped || !strings.Contains(e.Reason, "larger than 1 MB") {
			t.Errorf("%s: big SKILL.md: %s %q", root.Name, e.Status, e.Reason)
		}
		if e := byPath[filepath.Join(skillsDir, "s09998")]; e.Status != layer.StatusSkipped || e.Reason != "the search stopped after 10000 directories: this one and those after it in name order are not searched; keep skills in a smaller tree" {
			t.Errorf("%s: first directory left out: %s %q", root.Name, e.Status, e.Reason)
		}
		if e := byPath[filepath.Join(skillsDir, "s09997")]; e.Status != layer.StatusActive {
			t.Errorf("%s: the last skill within the cap: %+v", root.Name, e)
		}
		if _, ok := byPath[filepath.Join(skillsDir, "s09999")]; ok {
			t.Errorf("%s: a directory past the cap was searched", root.Name)
		}
	}
}

// TestBoundedFullReads: SKILL.md files whose frontmatter does not end in
// the first frontmatterHead bytes are read in full only until the search
// has read maxFullReads bytes of them; the rest are refused unread.
func TestBoundedFullReads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	skillsDir := filepath.Join(dir, "skills")
	const size = 1 << 20
	files := map[string]string{}
	for i := range 40 {
		name := fmt.Sprintf("s%02d", i)
		doc := "---\nname: " + name + "\ndescription: Use for " + name + ".\nnotes: " + strings.Repeat("x", frontmatterHead) + "\n---\n"
		files[name+"/SKILL.md"] = doc + strings.Repeat("body\n", (size-len(doc))/5)
	}
	testenv.WriteTree(t, skillsDir, files)
	for _, root := range []Root{{Name: "project", Dir: skillsDir, Confine: dir}, {Name: "private", Dir: skillsDir}} {
		set, _ := Discover([]Root{root})
		fit := maxFullReads / size // files of just under size bytes each
		if set.Len() != fit {
			t.Errorf("%s: %d skills, want %d", root.Name, set.Len(), fit)
		}
		byPath := map[string]Entry{}
		for _, e := range set.Entries {
			byPath[e.Path] = e
		}
		if e := byPath[filepath.Join(skillsDir, fmt.Sprintf("s%02d", fit-1))]; e.Status != layer.StatusActive {
			t.Errorf("%s: the last skill within the bound: %s %q", root.Name, e.Status, e.Reason)
		}
		e := byPath[filepath.Join(skillsDir, fmt.Sprintf("s%02d", fit))]
		if e.Status != layer.StatusSkipped || !strings.Contains(e.Reason, "not read: its frontmatter does not end in the first 4096 bytes, and the search has read") {
			t.Errorf("%s: the first skill past the bound: %s %q", root.Name, e.Status, e.Reason)
		}
	}
}

// TestBoundedListing: a skills directory of more entries than
// layer.MaxDirEntries is listed only that far, and the report says so.
func TestBoundedListing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	skillsDir := filepath.Join(dir, "skills")
	testenv.WriteTree(t, skillsDir, map[string]string{"one/SKILL.md": md("one", "Use for one.")})
	for i := range layer.MaxDirEntries {
		f, err := os.Create(filepath.Join(skillsDir, fmt.Sprintf("f%06d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, root := range []Root{{Name: "project", Dir: skillsDir, Confine: dir}, {Name: "private", Dir: skillsDir, Strict: true}} {
		set, err := Discover([]Root{root})
		if root.Strict != (err != nil) {
			t.Errorf("%s: error %v", root.Name, err)
		}
		var found bool
		for _, e := range set.Entries {
			if e.Path == skillsDir {
				found = e.Status == layer.StatusSkipped && e.Reason == "the directory has more than 65536 entries: only the first 65536 it lists are searched; keep skills in a smaller directory"
			}
		}
		if !found {
			t.Errorf("%s: no report of the entries left out: %+v", root.Name, set.Entries)
		}
	}
}

// TestEntryDigests: every entry whose SKILL.md could be read has the
// digest of its bytes and the kind of its root: from the bytes discovery
// read when it read the file whole, from FileDigest when it read only the
// frontmatter. A shadowed skill has its own digest; a SKILL.md that cannot
// be read has none.
func TestEntryDigests(t *testing.T) {
	t.Parallel()
	small := md("small", "Use for small things.")
	big := md("big", "Use for big things.") + strings.Repeat("Follow the steps. ", 1000)
	bad := md("Bad_Name", "Use never.")
	ws := tree(t, map[string]string{
		".aerie/skills/small/SKILL.md":    small,
		".aerie/skills/big/SKILL.md":      big,
		".aerie/skills/bad/SKILL.md":      bad,
		".aerie/skills/linked":            "-> ../../shared/big",
		"shared/big/SKILL.md":             big,
		".aerie/skills/dir/SKILL.md/x":    "a directory, not a file",
		"home/skills/small/SKILL.md":      small,
		"home/skills/nested/big/SKILL.md": big,
	})
	layers := []layer.Layer{
		{Name: ".aerie", Dir: filepath.Join(ws, ".aerie"), Kind: layer.KindProject},
		{Name: "home", Dir: filepath.Join(ws, "home"), Kind: layer.KindHome},
	}
	set, _ := Discover(Roots(layers, Options{Workspace: ws}))
	digest := func(s string) string { return layer.Digest([]byte(s)) }
	type got struct {
		Path         string
		Kind         layer.Kind
		Status       layer.Status
		Digest, File string
	}
	var gots []got
	for _, e := range set.Entries {
		rel, _ := filepath.Rel(ws, e.Path)
		gots = append(gots, got{rel, e.Kind, e.Status, e.Digest, e.FileDigest()})
	}
	want := []got{
		{".aerie/skills/bad", layer.KindProject, layer.StatusSkipped, digest(bad), digest(bad)},
		{".aerie/skills/big", layer.KindProject, layer.StatusActive, "", digest(big)},
		{".aerie/skills/dir", layer.KindProject, layer.StatusSkipped, "", ""},
		{".aerie/skills/linked", layer.KindProject, layer.StatusShadowed, "", digest(big)},
		{".aerie/skills/small", layer.KindProject, layer.StatusActive, digest(small), digest(small)},
		{"home/skills/nested/big", layer.KindHome, layer.StatusShadowed, "", digest(big)},
		{"home/skills/small", layer.KindHome, layer.StatusShadowed, digest(small), digest(small)},
	}
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}
