package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// manyFiles makes dir/many with n empty files and returns what
// list_directory prints of it.
func manyFiles(t *testing.T, dir string, n int) string {
	t.Helper()
	var want strings.Builder
	if err := os.Mkdir(filepath.Join(dir, "many"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("file_%04d.txt", i)
		if err := os.WriteFile(filepath.Join(dir, "many", name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&want, "%s (0 bytes)\n", name)
	}
	return want.String()
}

// retrievedPage splits a page of retrieve's output into the original's
// bytes and the offset of the next page (-1 after the last).
func retrievedPage(t *testing.T, got string) (string, int) {
	t.Helper()
	page, note, ok := strings.Cut(got, "\n[retrieve: bytes ")
	if !ok {
		return got, -1
	}
	if strings.HasSuffix(note, "the end]") {
		return page, -1
	}
	var next int
	if _, err := fmt.Sscanf(note[strings.LastIndex(note, "offset=")+len("offset="):], "%d", &next); err != nil {
		t.Fatalf("no next offset in %q", note)
	}
	return page, next
}

// offersRetrieve reports whether a request offers the retrieve tool.
func offersRetrieve(t *testing.T, req testenv.ModelRequest) bool {
	t.Helper()
	var r anthropicRequest
	if err := req.Decode(&r); err != nil {
		t.Fatal(err)
	}
	for _, tool := range r.Tools {
		if tool.Name == "retrieve" {
			return true
		}
	}
	return false
}

// TestRunCompressContext runs a session with --compress-context=true: a
// directory listing over the cap reaches the model as a compact view with
// the original's digest and the retrieve marker, and retrieve gives the
// model the original's bytes back, page by page.
func TestRunCompressContext(t *testing.T) {
	t.Parallel()
	var want string
	var pages strings.Builder
	e := newE2E(t, toolTurn(call("l", "list_directory", map[string]any{"path": "many"})))
	want = manyFiles(t, e.ws, 2000)
	e.model.Add(testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn {
		got := toolResults(t, req)["l"].text
		if len(got) > 32768 || !strings.Contains(got, "2000 entries (2000 files, 0 directories)") ||
			!strings.Contains(got, "compressed from 48000 to") || !strings.Contains(got, "(sha256:") ||
			!strings.HasSuffix(got, "retrieve(handle=l)]") {
			t.Errorf("the model read %d bytes, not the compressed listing:\n%.600s", len(got), got)
		}
		if !offersRetrieve(t, req) {
			t.Error("retrieve is not offered")
		}
		return toolTurn(call("r1", "retrieve", map[string]any{"handle": "l"}))
	}}, testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn {
		page, next := retrievedPage(t, toolResults(t, req)["r1"].text)
		pages.WriteString(page)
		if next <= 0 {
			t.Fatalf("the original came in one page of %d bytes, want two", len(page))
		}
		return toolTurn(call("r2", "retrieve", map[string]any{"handle": "l", "offset": next}))
	}}, testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn {
		page, next := retrievedPage(t, toolResults(t, req)["r2"].text)
		pages.WriteString(page)
		if next != -1 {
			t.Errorf("a third page at %d", next)
		}
		return answer("done")
	}})
	out := e.run("run", "--compress-context=true", "list it")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	if pages.String() != want {
		t.Errorf("retrieve returned %d bytes, not the original's %d", pages.Len(), len(want))
	}
	// The original was kept as a sidecar file in $AERIE_HOME/raw.
	kept, err := os.ReadFile(filepath.Join(e.home, "raw", out.end(t).Session+"_l.txt"))
	if err != nil || string(kept) != want {
		t.Errorf("sidecar: %d bytes, %v", len(kept), err)
	}
}

// TestRunCompressContextResume retrieves, in a resumed run of a new
// process, the original a compressed result of the first run kept (its
// first page: the original is over the cap the pages keep within).
func TestRunCompressContextResume(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(call("l", "list_directory", map[string]any{"path": "many"})), answer("listed"))
	want := manyFiles(t, e.ws, 1400)
	if err := os.WriteFile(filepath.Join(e.home, "config.toml"), []byte("[tool_results]\ncompress_context = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := e.run("run", "list it")
	if first.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", first.code, first.stderr)
	}
	if got := toolResults(t, e.model.Requests()[1])["l"].text; !strings.HasSuffix(got, "retrieve(handle=l)]") {
		t.Fatalf("the first run's result is not compressed:\n%.300s", got)
	}
	e.model.Add(toolTurn(call("r", "retrieve", map[string]any{"handle": "l"})), answer("got it"))
	second := e.run("run", "--resume", first.end(t).Session, "get the listing back")
	if second.code != 0 {
		t.Fatalf("resume: exit %d; stderr:\n%s", second.code, second.stderr)
	}
	got := toolResults(t, e.model.Requests()[3])["r"]
	page, next := retrievedPage(t, got.text)
	if got.isError || next <= 0 || page != want[:next] {
		t.Errorf("retrieve after resume: error %v, a page of %d bytes up to %d, not the original's first:\n%.300s", got.isError, len(page), next, got.text)
	}
}

// TestRunCompressContextKeepFails checks the spec's fallback: when the
// original cannot be written, the result is not compressed but capped,
// head and tail, naming no place to find it.
func TestRunCompressContextKeepFails(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(call("l", "list_directory", map[string]any{"path": "many"})), answer("done"))
	want := manyFiles(t, e.ws, 2000)
	blocker := filepath.Join(e.ws, "blocker")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.run("run", "--compress-context=true", "--tool-result-raw-dir", filepath.Join(blocker, "raw"), "list it")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	got := toolResults(t, e.model.Requests()[1])["l"].text
	wantCapped := fmt.Sprintf("%s\n\n[... %d bytes dropped ...]\n\n%s", want[:12288], len(want)-2*12288, want[len(want)-12288:])
	if got != wantCapped {
		t.Errorf("the model read %d bytes, not the head and tail of the listing:\n%.300s", len(got), got)
	}
	if !strings.Contains(out.stderr, "not compressing it") {
		t.Errorf("no warning about the original; stderr:\n%s", out.stderr)
	}
}

// TestRunCompressContextOff checks that without compression (the default,
// or --compress-context=false over the config's true) the retrieve tool is
// not offered and a large listing is only capped.
func TestRunCompressContextOff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, config string
		args         []string
	}{
		{name: "default"},
		{name: "flag over config", config: "[tool_results]\ncompress_context = true\n", args: []string{"--compress-context=false"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, toolTurn(call("l", "list_directory", map[string]any{"path": "many"})), answer("done"))
			manyFiles(t, e.ws, 2000)
			if tt.config != "" {
				if err := os.WriteFile(filepath.Join(e.home, "config.toml"), []byte(tt.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := e.run(append(append([]string{"run"}, tt.args...), "list it")...)
			if out.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
			}
			for i, req := range e.model.Requests() {
				if offersRetrieve(t, req) {
					t.Errorf("request %d offers retrieve", i)
				}
			}
			if got := toolResults(t, e.model.Requests()[1])["l"].text; strings.Contains(got, "retrieve(") || !strings.Contains(got, "bytes dropped") {
				t.Errorf("the listing is not just capped:\n%.300s", got)
			}
		})
	}
}
