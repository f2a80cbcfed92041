package layer

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
)

// guarded writes a pinned project tool and returns its Guard, which keeps
// identities however recent the files are (window 0), and the script.
func guarded(t *testing.T) (*Guard, string) {
	t.Helper()
	ws := t.TempDir()
	testenv.WriteTree(t, ws, map[string]string{".aerie/tools/t.toml": manifest("t", "./t.sh"), ".aerie/tools/t.sh": "#!/bin/sh\necho ok\n"})
	l := project(ws, ".aerie")
	man := filepath.Join(ws, ".aerie/tools/t.toml")
	pins := NewPins(ws, mustPin(t, ws, l, man, "./t.sh"))
	g := pins.Guard(l, man, []string{"./t.sh"})
	g.window = 0
	return g, filepath.Join(ws, ".aerie/tools/t.sh")
}

// TestGuardReadsOnlyAfterAChange: once trusted, a Guard stands on the
// files' identities and does not hash them again until one changes.
func TestGuardReadsOnlyAfterAChange(t *testing.T) {
	t.Parallel()
	g, script := guarded(t)
	if v := g.Verify(); v.Status != Trusted {
		t.Fatalf("first verify: %+v", v)
	}
	// Without the pin a hash would now fail: a trusted verdict shows that
	// nothing was hashed.
	g.pins = NewPins(filepath.Dir(filepath.Dir(filepath.Dir(script))))
	if v := g.Verify(); v.Status != Trusted {
		t.Fatalf("unchanged files were hashed again: %+v", v)
	}
	// Setting the same times again changes only the status-change time.
	fi, err := os.Stat(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(script, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if v := g.Verify(); v.Status != Untrusted || !strings.Contains(v.Reason, "no trust pin") {
		t.Errorf("after a change: %+v, want a hash against the new pins", v)
	}
}

// TestGuardSeesChanges: whatever changes a pinned file — its bytes with
// the size and modification time forged back, its replacement, its
// removal — the next Verify hashes it and refuses it.
func TestGuardSeesChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(t *testing.T, script string)
		want   TrustStatus
		reason string
	}{
		{"same size and time", func(t *testing.T, script string) {
			fi, err := os.Stat(script)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(script, []byte("#!/bin/sh\necho no\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(script, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, Modified, "changed since it was pinned"},
		{"replaced by rename", func(t *testing.T, script string) {
			if err := os.WriteFile(script+".new", []byte("#!/bin/sh\necho ok\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(script+".new", script); err != nil {
				t.Fatal(err)
			}
		}, Trusted, "pinned"},
		{"removed", func(t *testing.T, script string) {
			if err := os.Remove(script); err != nil {
				t.Fatal(err)
			}
		}, Untrusted, "no such file"},
		{"a link out", func(t *testing.T, script string) {
			if err := os.Remove(script); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/bin/sh", script); err != nil {
				t.Fatal(err)
			}
		}, Untrusted, "leads outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, script := guarded(t)
			if v := g.Verify(); v.Status != Trusted {
				t.Fatalf("first verify: %+v", v)
			}
			tt.change(t, script)
			if v := g.Verify(); v.Status != tt.want || !strings.Contains(v.Reason, tt.reason) {
				t.Errorf("after the change: %s (%s), want %s (%s)", v.Status, v.Reason, tt.want, tt.reason)
			}
		})
	}
}

// TestGuardRacyFiles: files changed just before they were hashed may have
// changed again within the same clock tick, so their identities vouch for
// nothing and the next Verify hashes again.
func TestGuardRacyFiles(t *testing.T) {
	t.Parallel()
	g, script := guarded(t)
	g.window = time.Hour
	if v := g.Verify(); v.Status != Trusted {
		t.Fatalf("first verify: %+v", v)
	}
	g.pins = NewPins(filepath.Dir(filepath.Dir(filepath.Dir(script))))
	if v := g.Verify(); v.Status != Untrusted {
		t.Errorf("fresh files were not hashed again: %+v", v)
	}
}

func TestSettled(t *testing.T) {
	t.Parallel()
	ids := []fileID{{ctime: 10}, {ctime: 20}}
	for _, tt := range []struct {
		t    int64
		want bool
	}{{9, false}, {19, false}, {20, true}, {30, true}} {
		if got := settled(ids, tt.t); got != tt.want {
			t.Errorf("settled(.., %d) = %v, want %v", tt.t, got, tt.want)
		}
	}
	if settled([]fileID{{ctime: -1}}, 100) {
		t.Error("a file without times is settled")
	}
}

// TestGuardVerifyRead: a verdict from the bytes a loader read through the
// layer's directory is the verdict Verify gives, and keeps the same
// identities — the manifest's included — so that a changed manifest is
// hashed again; a directory opened otherwise than the pins would open it
// is not read through.
func TestGuardVerifyRead(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	testenv.WriteTree(t, ws, map[string]string{
		".aerie/tools/t.toml": manifest("t", "./t.sh"), ".aerie/tools/t.sh": "#!/bin/sh\necho ok\n",
		"other/tools/t.toml": manifest("t", "./t.sh"), "other/tools/t.sh": "#!/bin/sh\necho other\n",
	})
	l := project(ws, ".aerie")
	man := filepath.Join(ws, ".aerie/tools/t.toml")
	pins := NewPins(ws, mustPin(t, ws, l, man, "./t.sh"))
	read := func(t *testing.T, layer *Dir) ([]byte, fs.FileInfo) {
		t.Helper()
		f, err := layer.Open("tools/t.toml")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		doc, err := f.ReadBounded(MaxArtifactBytes)
		if err != nil {
			t.Fatal(err)
		}
		return doc, fi
	}
	openLayer := func(t *testing.T, top, rel string) *Dir {
		t.Helper()
		d, err := OpenDir(top)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		if rel == "" {
			return d
		}
		sub, err := d.OpenDir(rel)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		return sub
	}

	t.Run("same verdict", func(t *testing.T) {
		layer := openLayer(t, ws, ".aerie")
		doc, fi := read(t, layer)
		g := pins.Guard(l, man, []string{"./t.sh"})
		g.window = 0
		got, want := g.VerifyRead(doc, fi, layer), pins.Guard(l, man, []string{"./t.sh"}).Verify()
		if diff := cmp.Diff(want, got); diff != "" || got.Status != Trusted {
			t.Fatalf("VerifyRead differs from Verify (-want +got):\n%s", diff)
		}
		if len(g.ids) != 2 || g.ids[0].path != man {
			t.Fatalf("identities %+v, want the manifest's and the script's", g.ids)
		}
		// The manifest's identity is kept: touching it makes the next
		// Verify hash again, against pins that now refuse it.
		g.pins = NewPins(ws)
		if err := os.Chtimes(man, time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}
		if v := g.Verify(); v.Status != Untrusted {
			t.Errorf("after a change of the manifest: %+v, want a hash against the new pins", v)
		}
	})
	t.Run("bytes read are hashed", func(t *testing.T) {
		// The pin covers the bytes the loader read and parsed, not those
		// a second read would find.
		layer := openLayer(t, ws, ".aerie")
		_, fi := read(t, layer)
		g := pins.Guard(l, man, []string{"./t.sh"})
		if v := g.VerifyRead([]byte("other bytes"), fi, layer); v.Status != Modified {
			t.Errorf("verdict %+v, want modified", v)
		}
	})
	t.Run("layer not opened beneath the workspace", func(t *testing.T) {
		// Opened directly, the layer's directory does not confine reads
		// to the workspace as the pins do: Verify decides, from the file.
		layer := openLayer(t, filepath.Join(ws, ".aerie"), "")
		_, fi := read(t, layer)
		g := pins.Guard(l, man, []string{"./t.sh"})
		if v := g.VerifyRead([]byte("other bytes"), fi, layer); v.Status != Trusted {
			t.Errorf("verdict %+v, want trusted from a read of the file", v)
		}
	})
	t.Run("another directory", func(t *testing.T) {
		// The same manifest bytes, but another script beside them: read
		// through that directory the pin would not match.
		layer := openLayer(t, ws, "other")
		doc, fi := read(t, layer)
		g := pins.Guard(l, man, []string{"./t.sh"})
		if v := g.VerifyRead(doc, fi, layer); v.Status != Trusted {
			t.Errorf("verdict %+v, want trusted from the layer's own files", v)
		}
	})
}
