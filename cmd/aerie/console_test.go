package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestConsoleCommand serves the console of this directory's sessions until
// the command's context ends, and refuses an unusable --addr or database.
func TestConsoleCommand(t *testing.T) {
	t.Parallel()
	dir, db := t.TempDir(), filepath.Join(t.TempDir(), "sessions.db")
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := st.Create(context.Background(), dir, store.NewSession{Label: "mine", State: store.StateCompleted,
		Entries: []transcript.Entry{{Seq: 1, CreatedAt: time.Now(),
			Payload: transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "hello console"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan result, 1)
	go func() {
		done <- harness{home: t.TempDir(), dir: dir, ctx: ctx}.aerie(t, "console", "--addr", addr, "--db", db)
	}()
	body := ""
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/sessions/" + sess.ID.String())
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		body = string(b)
		break
	}
	if !strings.Contains(body, "hello console") {
		t.Errorf("the console's session page lacks the session's text:\n%s", body)
	}
	cancel()
	r := <-done
	if r.err != nil || !strings.Contains(r.stdout, "aerie console on http://"+addr+"/") {
		t.Errorf("aerie console: %v\nstdout: %s\nstderr: %s", r.err, r.stdout, r.stderr)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a bad address", []string{"console", "--addr", "nowhere", "--db", db}, "--addr nowhere"},
		{"no database", []string{"console", "--db", filepath.Join(dir, "none.db")}, "no session database at"},
		{"a bad API server", []string{"console", "--db", db, "--cluster", "--api-server", "127.0.0.1:8001"},
			`--api-server "127.0.0.1:8001": want an http(s)://HOST:PORT URL`},
	} {
		r := harness{home: t.TempDir(), dir: dir}.aerie(t, tc.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, r.err, tc.want)
		}
	}
}
