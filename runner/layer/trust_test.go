package layer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
)

// TestComputePinEncoding fixes the documented hash encoding, so that a
// pin computed by hand (or by another tool) matches.
func TestComputePinEncoding(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	man, script := manifest("wc", "./wc.sh"), "#!/bin/sh\ncat\n"
	testenv.WriteTree(t, ws, map[string]string{".aerie/tools/wc.toml": man, ".aerie/tools/wc.sh": script})
	got, err := ComputePin(ws, project(ws, ".aerie"), filepath.Join(ws, ".aerie/tools/wc.toml"), []string{"./wc.sh", "/usr/bin/env", "python3"})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "aerie-trust-v1\x00")
	fmt.Fprintf(h, "manifest\x00.aerie/tools/wc.toml\x00%d\x00%s", len(man), man)
	fmt.Fprintf(h, "file\x00.aerie/tools/wc.sh\x00%d\x00%s", len(script), script)
	fmt.Fprintf(h, "path\x00/usr/bin/env\x00")
	want := Pin{Path: ".aerie/tools/wc.toml", SHA256: hex.EncodeToString(h.Sum(nil))}
	if got != want {
		t.Errorf("pin = %+v, want %+v", got, want)
	}
}

func TestComputePinSensitivity(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		".aerie/tools/wc.toml": manifest("wc", "./wc.sh"),
		".aerie/tools/wc.sh":   "#!/bin/sh\ncat\n",
	}
	pin := func(t *testing.T, files map[string]string, manifestRel string, exes ...string) (Pin, error) {
		ws := t.TempDir()
		testenv.WriteTree(t, ws, base)
		testenv.WriteTree(t, ws, files)
		return ComputePin(ws, project(ws, ".aerie"), filepath.Join(ws, manifestRel), exes)
	}
	orig, err := pin(t, nil, ".aerie/tools/wc.toml", "./wc.sh")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := pin(t, nil, ".aerie/tools/wc.toml", "./wc.sh")
	if again != orig {
		t.Fatalf("the pin depends on the workspace's location: %v vs %v", again, orig)
	}
	for _, tt := range []struct {
		name     string
		files    map[string]string
		manifest string
		exes     []string
		same     bool
		wantErr  string
	}{
		{name: "script bytes", files: map[string]string{".aerie/tools/wc.sh": "#!/bin/sh\nrm -rf /\n"}},
		{name: "manifest bytes", files: map[string]string{".aerie/tools/wc.toml": manifest("wc", "./wc.sh") + "\n"}},
		{name: "manifest path", files: map[string]string{"a/.aerie/tools/wc.toml": manifest("wc", "./wc.sh"), "a/.aerie/tools/wc.sh": "#!/bin/sh\ncat\n"}, manifest: "a/.aerie/tools/wc.toml"},
		{name: "a bare name adds nothing", exes: []string{"./wc.sh", "python3"}, same: true},
		{name: "an external program adds its path", exes: []string{"./wc.sh", "/bin/sh"}},
		{name: "a relative path out of the workspace is external", exes: []string{"./wc.sh", "../../../../../../../../bin/sh"}},
		{name: "a missing script", exes: []string{"./missing.sh"}, wantErr: "no such file"},
		{name: "a script linking out of the workspace", files: map[string]string{".aerie/tools/out.sh": "->/bin/sh"}, exes: []string{"./out.sh"}, wantErr: "a symbolic link leads outside"},
		{name: "a directory as a script", files: map[string]string{".aerie/tools/d": "<dir>"}, exes: []string{"./d"}, wantErr: "not a regular file"},
		{name: "a manifest outside the workspace", manifest: "../elsewhere.toml", wantErr: "outside the workspace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.manifest
			if m == "" {
				m = ".aerie/tools/wc.toml"
			}
			exes := tt.exes
			if exes == nil {
				exes = []string{"./wc.sh"}
			}
			got, err := pin(t, tt.files, m, exes...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == orig) != tt.same {
				t.Errorf("pin %v vs original %v: same = %v, want %v", got, orig, got == orig, tt.same)
			}
		})
	}
}

func TestParseTrust(t *testing.T) {
	t.Parallel()
	h := strings.Repeat("ab", 32)
	pins, err := ParseTrust("trust.toml", []byte(fmt.Sprintf("# reviewed\n[[pin]]\npath = \".aerie/tools/a.toml\"\nsha256 = %q\n\n[[pin]]\npath = \"$AERIE_HOME/tools/b.toml\"\nsha256 = %q\n", h, strings.ToUpper(h))))
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 2 || pins[1].SHA256 != h || pins[1].Path != "$AERIE_HOME/tools/b.toml" {
		t.Errorf("pins = %+v", pins)
	}
	for doc, want := range map[string]string{
		"[[pin]]\nsha256 = '" + h + "'\n":                     "trust.toml: pin[0].path: missing",
		"[[pin]]\npath = '/abs'\nsha256 = '" + h + "'\n":      "pin[0].path: \"/abs\" must be relative",
		"[[pin]]\npath = 'a/../b'\nsha256 = '" + h + "'\n":    "must be relative to the workspace root, without ..",
		"[[pin]]\npath = 'a'\nsha256 = 'abc'\n":               "trust.toml:3: pin[0].sha256: \"abc\" is not 64 hexadecimal digits",
		"[[pin]]\npath = 'a'\nsha256 = '" + h + "'\nby = 1\n": "trust.toml:4:1: pin.by: unknown key",
		"pin = 'a'\n": "pin: want an array of tables, got a string",
		"pin = [\n":   "trust.toml:",
	} {
		if _, err := ParseTrust("trust.toml", []byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", doc, err, want)
		}
	}
}

func TestTrustedByLayerKind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, h := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	testenv.WriteTree(t, dir, map[string]string{
		"ws/.aerie/tools/t.toml": manifest("t", "./t.sh"), "ws/.aerie/tools/t.sh": "#!/bin/sh\n",
		"home/tools/legacy.toml":                manifest("legacy", "/bin/true"),
		"home/tools/agent.toml":                 manifest("agent", "/bin/true"),
		"home/tools/agent.toml.provenance.json": `{"origin":"agent","operation_id":"op-1","digest":"sha256:` + strings.Repeat("1", 64) + `"}`,
		"home/tools/odd.toml":                   manifest("odd", "/bin/true"),
		"home/tools/odd.toml.provenance.json":   `{"origin":"martian","operation_id":"op-1","digest":"sha256:` + strings.Repeat("1", 64) + `"}`,
	})
	proj, hl := project(ws, ".aerie"), home(h)
	agentPin, err := ComputePin(ws, hl, filepath.Join(h, "tools/agent.toml"), []string{"/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if agentPin.Path != "$AERIE_HOME/tools/agent.toml" {
		t.Errorf("home pin path = %s", agentPin.Path)
	}
	pinned := NewPins(ws, agentPin)
	for _, tt := range []struct {
		name   string
		pins   *Pins
		l      Layer
		man    string
		ok     bool
		reason string
	}{
		{"project without a pin", pinned, proj, filepath.Join(ws, ".aerie/tools/t.toml"), false, "no trust pin for .aerie/tools/t.toml"},
		{"project with nil pins", nil, proj, filepath.Join(ws, ".aerie/tools/t.toml"), false, "no trust pins were loaded"},
		{"project with a malformed trust file", &Pins{workspace: ws, err: fmt.Errorf("bad")}, proj, filepath.Join(ws, ".aerie/tools/t.toml"), false, "a trust file is malformed"},
		{"home, no sidecar", nil, hl, filepath.Join(h, "tools/legacy.toml"), true, "without managed provenance"},
		{"home, agent-authored, pinned", pinned, hl, filepath.Join(h, "tools/agent.toml"), true, "pinned"},
		{"home, agent-authored, no pins", nil, hl, filepath.Join(h, "tools/agent.toml"), false, "no trust pins"},
		{"home, unknown origin", pinned, hl, filepath.Join(h, "tools/odd.toml"), false, "provenance sidecar is malformed: unknown origin"},
		{"spec layer", nil, Layer{Name: "spec[0]", Dir: h, Kind: KindSpec}, filepath.Join(h, "tools/agent.toml"), true, "controlled by the session's submitter"},
		{"platform layer", nil, Layer{Name: "p", Dir: h, Kind: KindPlatform}, filepath.Join(h, "tools/agent.toml"), true, "platform layer"},
		{"bundled layer", nil, Bundled(), "bundled:tools/x.toml", true, "bundled layer"},
	} {
		ok, reason := tt.pins.Trusted(tt.l, tt.man, []string{"./t.sh"})
		if tt.l.Kind == KindHome {
			ok, reason = tt.pins.Trusted(tt.l, tt.man, []string{"/bin/true"})
		}
		if ok != tt.ok || !strings.Contains(reason, tt.reason) {
			t.Errorf("%s: Trusted = %v, %q; want %v, %q", tt.name, ok, reason, tt.ok, tt.reason)
		}
	}
}

func TestReadProvenance(t *testing.T) {
	t.Parallel()
	h := t.TempDir()
	body := manifest("a", "/bin/true")
	testenv.WriteTree(t, h, map[string]string{
		"tools/a.toml":                 body,
		"tools/a.toml.provenance.json": `{"origin":"agent","operation_id":"op-7","digest":"` + Digest([]byte(body)) + `","activation_boundary":"next_turn"}`,
		"tools/b.toml":                 body,
		"tools/b.toml.provenance.json": `{"origin":"agent","operation_id":"op-8","digest":"` + Digest([]byte("older")) + `"}`,
		"tools/c.toml":                 body,
		"tools/c.toml.provenance.json": `{"origin":"agent","operation_id":"op-9","digest":"` + Digest([]byte(body)) + `","extra":1}`,
	})
	l := home(h)
	if p := ReadProvenance(l, filepath.Join(h, "tools/a.toml")); p.State != ProvenanceAgent || p.OperationID != "op-7" || p.ActivationBoundary != "next_turn" || p.DigestMismatch {
		t.Errorf("a: %+v", p)
	}
	if p := ReadProvenance(l, filepath.Join(h, "tools/b.toml")); p.State != ProvenanceAgent || !p.DigestMismatch {
		t.Errorf("b: %+v, want a digest mismatch", p)
	}
	if p := ReadProvenance(l, filepath.Join(h, "tools/c.toml")); p.State != ProvenanceUnknown || !strings.Contains(p.Reason, "unknown field") {
		t.Errorf("c: %+v, want unknown", p)
	}
	if p := ReadProvenance(l, filepath.Join(h, "tools/none.toml")); p.State != ProvenanceLegacy {
		t.Errorf("none: %+v, want legacy", p)
	}
	// Read together, with the layer opened once, they say the same; a
	// path outside the layer is unknown and does not stop the others.
	paths := []string{filepath.Join(h, "tools/a.toml"), "/elsewhere/x.toml", filepath.Join(h, "tools/b.toml"), filepath.Join(h, "tools/c.toml"), filepath.Join(h, "tools/none.toml")}
	var want []Provenance
	for _, p := range paths {
		want = append(want, ReadProvenance(l, p))
	}
	if diff := cmp.Diff(want, ReadProvenances(l, paths)); diff != "" {
		t.Errorf("ReadProvenances differs from ReadProvenance (-want +got):\n%s", diff)
	}
	if want[1].State != ProvenanceUnknown || !strings.Contains(want[1].Reason, "outside the layer") {
		t.Errorf("outside: %+v, want unknown", want[1])
	}
	if _, err := os.Stat(filepath.Join(h, "tools")); err != nil {
		t.Fatal(err)
	}
}
