package layer

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
)

func TestDiscover(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   map[string]string
		workDir string // relative to the workspace
		// workspace is relative to the temporary directory holding "ws"
		// and "home".
		workspace string
		noHome    bool
		want      []string // layer names, bundled last
		wantErr   string
	}{
		{
			name:    "nearest first, .aerie before .osprey at one level",
			files:   map[string]string{".aerie": "<dir>", ".osprey": "<dir>", "a/.osprey": "<dir>", "a/b/.aerie": "<dir>", "a/b/c": "<dir>"},
			workDir: "a/b/c",
			want:    []string{"a/b/.aerie", "a/.osprey", ".aerie", ".osprey", "home", "bundled"},
		},
		{
			name:      "never beyond the workspace boundary",
			files:     map[string]string{".aerie": "<dir>", "a/.aerie": "<dir>", "a/b": "<dir>"},
			workDir:   "a/b",
			workspace: "ws/a",
			want:      []string{".aerie", "home", "bundled"},
		},
		{
			name:    "empty workspace means the working directory alone",
			files:   map[string]string{".aerie": "<dir>", "a/.aerie": "<dir>"},
			workDir: "a",
			// workspace "" below
			workspace: "-",
			want:      []string{".aerie", "home", "bundled"},
		},
		{
			name:    "a .aerie file, or a link out of the workspace, is not a layer",
			files:   map[string]string{".aerie": "not a directory", "a/.aerie": "->../../home", "a/.osprey": "->../x", "x": "<dir>"},
			workDir: "a",
			want:    []string{"a/.osprey", "home", "bundled"},
		},
		{
			name:    "a link to a file, or a dangling one, is not a layer",
			files:   map[string]string{"f": "text", "a/.aerie": "->../f", "a/.osprey": "->../missing", ".osprey": "->a"},
			workDir: "a",
			want:    []string{".osprey", "home", "bundled"},
		},
		{
			name:    "no home directory, no home layer",
			files:   map[string]string{"a": "<dir>"},
			workDir: "a",
			noHome:  true,
			want:    []string{"bundled"},
		},
		{
			name:    "working directory outside the workspace",
			files:   map[string]string{"a": "<dir>"},
			workDir: "../home",
			wantErr: "outside the workspace",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ws := filepath.Join(dir, "ws")
			testenv.WriteTree(t, ws, tt.files)
			h := filepath.Join(dir, "home")
			if !tt.noHome {
				testenv.WriteTree(t, h, map[string]string{"tools": "<dir>"})
			}
			opts := DiscoverOptions{WorkDir: filepath.Join(ws, tt.workDir), Workspace: ws, Home: h}
			switch tt.workspace {
			case "":
			case "-":
				opts.Workspace = ""
			default:
				opts.Workspace = filepath.Join(dir, tt.workspace)
			}
			layers, err := Discover(opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Discover: err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, names(layers)); diff != "" {
				t.Errorf("layers (-want +got):\n%s", diff)
			}
			for _, l := range layers {
				switch l.Kind {
				case KindProject:
					if !filepath.IsAbs(l.Dir) || !strings.HasPrefix(l.Dir, ws) {
						t.Errorf("project layer %s: Dir %s is not absolute inside %s", l.Name, l.Dir, ws)
					}
				case KindBundled:
					if !strings.HasPrefix(l.Digest, "sha256:") {
						t.Errorf("bundled layer digest %q", l.Digest)
					}
				}
			}
		})
	}
}

func TestDiscoverHomeInsideWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	testenv.WriteTree(t, ws, map[string]string{".aerie/trust.toml": "", "a/.aerie": "<dir>"})
	layers, err := Discover(DiscoverOptions{WorkDir: filepath.Join(ws, "a"), Workspace: ws, Home: filepath.Join(ws, ".aerie")})
	if err != nil {
		t.Fatal(err)
	}
	// The workspace is the user's home directory: ~/.aerie is the home
	// layer (whose pins count), not a project layer.
	want := []Layer{
		{Name: "a/.aerie", Dir: filepath.Join(ws, "a/.aerie"), Kind: KindProject},
		{Name: "home", Dir: filepath.Join(ws, ".aerie"), Kind: KindHome},
		Bundled(),
	}
	if diff := cmp.Diff(want, layers); diff != "" {
		t.Errorf("layers (-want +got):\n%s", diff)
	}
}

func TestFindWorkspace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, map[string]string{"repo/.git": "<dir>", "repo/a/b": "<dir>", "wt/.git": "gitdir: ../repo/.git/worktrees/wt", "wt/c": "<dir>", "plain/d": "<dir>"})
	for _, tt := range []struct{ workDir, want string }{
		{"repo/a/b", "repo"},
		{"repo", "repo"},
		{"wt/c", "wt"}, // a worktree's .git is a file
	} {
		got, err := FindWorkspace(filepath.Join(dir, tt.workDir))
		if err != nil {
			t.Fatal(err)
		}
		if got != filepath.Join(dir, tt.want) {
			t.Errorf("FindWorkspace(%s) = %s, want %s", tt.workDir, got, filepath.Join(dir, tt.want))
		}
	}
	// Outside a repository (the temporary directory may itself be in one,
	// so only check that the result contains the working directory).
	got, err := FindWorkspace(filepath.Join(dir, "plain/d"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := relInside(got, filepath.Join(dir, "plain/d")); !ok {
		t.Errorf("FindWorkspace(plain/d) = %s, which does not contain it", got)
	}
}

// TestBundledHoldsNoExecutables keeps the bundled layer to text
// artifacts: it is read in place from the binary, so an executable in it
// would have nowhere to run from.
func TestBundledHoldsNoExecutables(t *testing.T) {
	t.Parallel()
	err := fs.WalkDir(bundledRoot, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case name == "tools", strings.HasPrefix(name, "tools/"), name == "hooks", name == "hooks.toml", strings.HasPrefix(name, "hooks/"):
			t.Errorf("bundled layer holds %s: executable artifacts cannot be bundled", name)
		case !d.IsDir() && d.Type()&fs.ModePerm&0o111 != 0:
			t.Errorf("bundled file %s is executable", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// names returns the layers' names.
func names(layers []Layer) []string {
	out := make([]string, len(layers))
	for i, l := range layers {
		out[i] = l.Name
	}
	return out
}
