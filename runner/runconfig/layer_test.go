package runconfig

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLayerFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		data        map[string]string
		binary      map[string][]byte
		annotations map[string]string
		want        []LayerFile
		wantErr     string
	}{
		{
			name: "tree with executables",
			data: map[string]string{
				"SYSTEM.md":                      "sys",
				"skills__review__SKILL.md":       "skill",
				"tools__lint.toml":               "tool",
				"tools__bin__lint.sh":            "#!/bin/sh\n",
				"skills__review__scripts__py.py": "print()",
			},
			annotations: map[string]string{ExecutablesAnnotation: `["tools/bin/lint.sh"]`},
			want: []LayerFile{
				{Key: "SYSTEM.md", Path: "SYSTEM.md", Data: []byte("sys")},
				{Key: "skills__review__SKILL.md", Path: "skills/review/SKILL.md", Data: []byte("skill")},
				{Key: "skills__review__scripts__py.py", Path: "skills/review/scripts/py.py", Data: []byte("print()")},
				{Key: "tools__bin__lint.sh", Path: "tools/bin/lint.sh", Executable: true, Data: []byte("#!/bin/sh\n")},
				{Key: "tools__lint.toml", Path: "tools/lint.toml", Data: []byte("tool")},
			},
		},
		{
			name:        "explicit paths and binary data",
			data:        map[string]string{"init": ""},
			binary:      map[string][]byte{"tool-bin": {0x7f, 'E', 'L', 'F'}},
			annotations: map[string]string{PathsAnnotation: `{"init": "tools/lib/__init__.py", "tool-bin": "tools/bin/tool"}`, ExecutablesAnnotation: `["tools/bin/tool"]`},
			want: []LayerFile{
				{Key: "tool-bin", Path: "tools/bin/tool", Executable: true, Data: []byte{0x7f, 'E', 'L', 'F'}},
				{Key: "init", Path: "tools/lib/__init__.py", Data: []byte("")},
			},
		},
		{name: "empty", want: []LayerFile{}},
		{name: "leading separator", data: map[string]string{"__x": ""}, wantErr: `key "__x": path "/x" is absolute`},
		{name: "double separator", data: map[string]string{"a____b": ""}, wantErr: `key "a____b"`},
		{name: "dotdot", data: map[string]string{"..__x": ""}, wantErr: `starts with ".."`},
		{name: "bad explicit path", data: map[string]string{"x": ""}, annotations: map[string]string{PathsAnnotation: `{"x": "a/../b"}`}, wantErr: "annotation aerie.run/paths: key \"x\""},
		{name: "paths not json", data: map[string]string{"x": ""}, annotations: map[string]string{PathsAnnotation: `x=a`}, wantErr: "want a JSON object"},
		{name: "executables not json", data: map[string]string{"x": ""}, annotations: map[string]string{ExecutablesAnnotation: `x`}, wantErr: "want a JSON array"},
		{name: "unknown executable", data: map[string]string{"x": ""}, annotations: map[string]string{ExecutablesAnnotation: `["y"]`}, wantErr: `"y" is not a file`},
		{name: "path for no key", data: map[string]string{"x": ""}, annotations: map[string]string{PathsAnnotation: `{"y": "z"}`}, wantErr: `key "y" is not in the ConfigMap`},
		{name: "same path", data: map[string]string{"a__b": "", "c": ""}, annotations: map[string]string{PathsAnnotation: `{"c": "a/b"}`}, wantErr: "are both the file a/b"},
		{name: "file is a directory", data: map[string]string{"a": "", "a__b": ""}, wantErr: `needs as a directory`},
		{name: "data and binary", data: map[string]string{"a": ""}, binary: map[string][]byte{"a": nil}, wantErr: "in both data and binaryData"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := LayerFiles(tt.data, tt.binary, tt.annotations)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LayerFiles() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LayerFiles() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPathKey(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{"skills/a/SKILL.md": true, "tools/__init__.py": false, "a_b/c": true, "x__": false} {
		k, ok := PathKey(p)
		if ok != want {
			t.Errorf("PathKey(%q) = %q, %v; want ok %v", p, k, ok, want)
		}
		if ok && KeyPath(k) != p {
			t.Errorf("KeyPath(PathKey(%q)) = %q", p, KeyPath(k))
		}
	}
}

func TestLayerDigest(t *testing.T) {
	t.Parallel()
	a, err := LayerFiles(map[string]string{"x__y": "1", "z": "2"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same tree under other keys has the same digest.
	b, err := LayerFiles(map[string]string{"k1": "1", "z": "2"}, nil, map[string]string{PathsAnnotation: `{"k1":"x/y"}`})
	if err != nil {
		t.Fatal(err)
	}
	if LayerDigest(a) != LayerDigest(b) {
		t.Errorf("same tree, different digests")
	}
	if !validDigest(LayerDigest(a)) {
		t.Errorf("LayerDigest() = %q is not a sha256 digest", LayerDigest(a))
	}
	// Content, paths and modes each change it.
	for name, files := range map[string][]LayerFile{
		"content": {{Path: "x/y", Data: []byte("1")}, {Path: "z", Data: []byte("3")}},
		"path":    {{Path: "x/y", Data: []byte("1")}, {Path: "w", Data: []byte("2")}},
		"mode":    {{Path: "x/y", Data: []byte("1"), Executable: true}, {Path: "z", Data: []byte("2")}},
		"split":   {{Path: "x/y", Data: []byte("12")}, {Path: "z", Data: []byte("")}},
	} {
		if LayerDigest(files) == LayerDigest(a) {
			t.Errorf("a change of %s keeps the digest", name)
		}
	}
}

func FuzzLayerFiles(f *testing.F) {
	f.Add("skills__a__SKILL.md", "tools__x.sh", `{"k":"p"}`, `["tools/x.sh"]`)
	f.Add("__x", "a____b", `{`, `[`)
	f.Add("a", "a__b", `{"a":"../x"}`, `["a"]`)
	f.Fuzz(func(t *testing.T, k1, k2, paths, execs string) {
		data := map[string]string{k1: "1", k2: "2"}
		files, err := LayerFiles(data, nil, map[string]string{PathsAnnotation: paths, ExecutablesAnnotation: execs})
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, f := range files {
			if err := checkLayerPath(f.Path); err != nil {
				t.Fatalf("accepted path %q: %v", f.Path, err)
			}
			if seen[f.Path] {
				t.Fatalf("path %q twice", f.Path)
			}
			seen[f.Path] = true
		}
		for p := range seen {
			for d := p; strings.Contains(d, "/"); {
				d = d[:strings.LastIndex(d, "/")]
				if seen[d] {
					t.Fatalf("%q is a file and the directory of %q", d, p)
				}
			}
		}
	})
}
