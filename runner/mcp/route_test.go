package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/tools"
)

// TestStdioServerOnExecutors runs one stdio server on the default
// executor and on another: one connection and one process each, in each
// executor's directory, the second's tools named with its executor; an
// executor the session does not have fails that connection, naming it.
func TestStdioServerOnExecutors(t *testing.T) {
	t.Parallel()
	local, localDir := workspace(t)
	other, otherDir := workspace(t)
	on := func(name string) (Commands, string, bool) {
		if name != "tools" {
			return nil, "", false
		}
		return other, otherDir, true
	}
	srv := selfServer(t, "t", "serve", func(s *Server) { s.Executors = []string{ExecutorLocal, "tools", "gpu"} })
	m := New([]Server{srv}, Options{Commands: local, Dir: localDir, On: on, ExitWait: 5 * time.Second})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	for tool, want := range map[string]string{"mcp__t__pwd": localDir, "mcp__t__pwd__tools": otherDir} {
		r := lookup(t, m, tool).Run(t.Context(), json.RawMessage(`{}`))
		if r.IsError || r.Content != want {
			t.Errorf("%s: %+v, want %s", tool, r, want)
		}
	}
	placed, ok := tools.PlacedOf(lookup(t, m, "mcp__t__pwd__tools"))
	if !ok || placed.ExecutorOf(nil) != "tools" {
		t.Errorf("the tool on tools is not placed there")
	}
	for name, want := range map[string]int{"local": 1, "tools": 1} {
		exe := local
		if name == "tools" {
			exe = other
		}
		infos, err := exe.List(t.Context())
		if err != nil || len(infos) != want {
			t.Errorf("%s runs %d groups (%v), want %d", name, len(infos), err, want)
		}
	}
	var got []string
	for _, st := range m.Status() {
		got = append(got, st.Executor+":"+string(st.State))
	}
	if diff := cmp.Diff([]string{":connected", "tools:connected", "gpu:failed"}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if st := m.Status()[2]; !strings.Contains(st.Error, `the session has no executor "gpu"`) {
		t.Errorf("gpu error %q", st.Error)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, local)
	waitGone(t, other)
}
