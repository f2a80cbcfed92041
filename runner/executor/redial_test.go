package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRedialerServerRestarted: the executor dies with a call in flight and
// a new one serves the same socket a while later, as a restarted sidecar
// does; the call in flight fails, the next ones wait for the new executor
// and go through, and with no executor coming back they fail after the
// wait, naming the socket.
func TestRedialerServerRestarted(t *testing.T) {
	t.Parallel()
	l := newLocal(t, Options{Grace: 100 * time.Millisecond})
	sock := socketPath(t)
	serve := func() (stop func()) {
		ln, err := Listen(sock)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		served := make(chan error, 1)
		go func() { served <- Serve(ctx, ln, l, ServeOptions{}) }()
		return func() {
			cancel()
			if err := <-served; err != nil {
				t.Error(err)
			}
		}
	}
	stop := serve()
	first, err := Dial(t.Context(), sock)
	if err != nil {
		t.Fatal(err)
	}
	d := NewRedialer(first, sock, 5*time.Second)
	p, err := d.Start(t.Context(), Command{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := p.Wait(t.Context()); !errors.Is(err, errConnLost) {
		t.Errorf("Wait of the call in flight: %v, want the connection lost", err)
	}
	restarted := make(chan func(), 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		restarted <- serve()
	}()
	if _, err := d.Stat(t.Context(), "."); err != nil {
		t.Errorf("Stat after the executor came back: %v", err)
	}
	p, err = d.Start(t.Context(), Command{Argv: []string{"true"}})
	if err != nil {
		t.Fatalf("Start after the executor came back: %v", err)
	}
	if ex, err := p.Wait(t.Context()); err != nil || ex.Code != 0 {
		t.Errorf("Wait after the executor came back: %+v, %v", ex, err)
	}
	if err := d.Close(t.Context()); err != nil {
		t.Errorf("Close: %v", err)
	}

	last, err := Dial(t.Context(), sock)
	if err != nil {
		t.Fatal(err)
	}
	(<-restarted)()
	<-last.done
	short := NewRedialer(last, sock, 200*time.Millisecond)
	if _, err := short.List(t.Context()); err == nil || !strings.Contains(err.Error(), sock) {
		t.Errorf("List with no executor: %v, want an error naming %s", err, sock)
	}
}
