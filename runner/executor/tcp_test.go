package executor

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor/mtls"
)

// logBuffer collects the JSON lines of a logger that the server writes
// while a test reads.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// records returns the records logged so far.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	text := b.b.String()
	b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(text) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// rawTLS completes a TLS handshake with cfg at addr, then reads: a server
// that refuses the client's certificate says so then, under TLS 1.3.
func rawTLS(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

// TestTCPRefusesPeers: whoever is not the runner of the executor's set is
// refused at the TLS handshake, the executor logs the peer's address and
// the reason and serves on, and nothing was started for the refused;
// likewise the runner refuses an executor that is not the one it means to
// reach. (An expired certificate is refused by crypto/tls's verification,
// tested in mtls.)
func TestTCPRefusesPeers(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	l := newLocal(t, Options{})
	runner, execs, err := mtls.NewSet([]string{testExecutorName, "build"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTCPWith(t, l, ServeOptions{
		Logger:           slog.New(slog.NewJSONHandler(&logs, nil)),
		HandshakeTimeout: 500 * time.Millisecond,
	}, execs[testExecutorName])
	otherRunner, otherExec := newCredentials(t)
	noCert := runner.ClientConfig(testExecutorName)
	noCert.Certificates = nil
	skipVerify := func(c *tls.Config) *tls.Config {
		c.InsecureSkipVerify = true // the server's check is what is tested
		return c
	}
	plaintext := func() error {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		w := newWire(conn)
		if err := w.sendJSON(0, frameHello, hello{Protocol: protocolVersion}); err != nil {
			return err
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		f, err := readFrame(bufio.NewReader(conn))
		if err == nil && f.typ == frameHello {
			return nil // served
		}
		return fmt.Errorf("no hello: %v", err)
	}
	silent := func() error {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			return fmt.Errorf("read %v, want the executor to close", err)
		}
		return errors.New("closed")
	}
	serverRefusals := []struct {
		name, reason string
		try          func() error
	}{
		{"no client certificate", "client didn't provide a certificate",
			func() error { return rawTLS(t, addr, noCert) }},
		{"a runner of another set", "certificate signed by unknown authority",
			func() error { return rawTLS(t, addr, skipVerify(otherRunner.ClientConfig(testExecutorName))) }},
		{"an executor's certificate as the client", "incompatible key usage",
			func() error { return rawTLS(t, addr, execs["build"].ClientConfig(testExecutorName)) }},
		{"the executor protocol in the clear", "does not look like a TLS handshake", plaintext},
		{"a peer that says nothing", "no TLS handshake within 500ms", silent},
	}
	for _, tt := range serverRefusals {
		before := len(logs.records(t))
		if err := tt.try(); err == nil {
			t.Errorf("%s: the client was not refused", tt.name)
		}
		testenv.Eventually(t, 10*time.Second, tt.name+": the refusal is logged", func() bool {
			for _, rec := range logs.records(t)[before:] {
				peer, _ := rec["peer"].(string)
				reason, _ := rec["reason"].(string)
				if rec["msg"] == "executor peer refused" && strings.HasPrefix(peer, "tcp 127.0.0.1:") &&
					strings.Contains(reason, tt.reason) {
					return true
				}
			}
			return false
		})
	}

	// The runner's side refuses executors it did not mean to reach.
	runnerServing, err := tls.Listen("tcp", "127.0.0.1:0", runner.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer runnerServing.Close()
	go func() {
		for {
			conn, err := runnerServing.Accept()
			if err != nil {
				return
			}
			go func() { _ = conn.(*tls.Conn).Handshake(); conn.Close() }()
		}
	}()
	runnerServingAddr := runnerServing.Addr().String()
	clientRefusals := []struct {
		name, addr, executor string
		cred                 mtls.Credential
		want                 string
	}{
		{"another executor's name", addr, "build", runner, "certificate is valid for tools.executor.aerie, not build.executor.aerie"},
		{"an executor of another set", addr, testExecutorName, otherRunner, "certificate signed by unknown authority"},
		{"the runner's certificate serving", runnerServingAddr, testExecutorName, runner, "not valid for any names"},
		{"an executor's credential dialling", addr, testExecutorName, otherExec, "the credential is executor tools's, not the runner's"},
	}
	for _, tt := range clientRefusals {
		r, err := DialTCP(t.Context(), tt.addr, tt.executor, tt.cred)
		if err == nil {
			_ = r.Close(t.Context())
			t.Errorf("%s: DialTCP succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.executor) {
			t.Errorf("%s: DialTCP = %v, want an error naming %s with %q", tt.name, err, tt.executor, tt.want)
		}
	}

	// The executor serves on, to its runner, and started nothing for the
	// refused.
	r := dialTCP(t, addr, runner)
	if infos, err := r.List(t.Context()); err != nil || len(infos) != 0 {
		t.Errorf("List = %+v, %v; want no group", infos, err)
	}
	if out, _ := runTo(t, r, Command{Argv: []string{"echo", "served"}}); out != "served\n" {
		t.Errorf("output %q after the refusals", out)
	}
	var connected bool
	for _, rec := range logs.records(t) {
		if rec["msg"] == "executor client connected" && rec["client"] == mtls.RunnerName {
			connected = true
		}
	}
	if !connected {
		t.Errorf("no log of the runner connecting, with its name")
	}
}

// runTo runs c on e to its end, which must be exit 0, and returns its
// output and the error of Wait.
func runTo(t *testing.T, e Executor, c Command) (string, error) {
	t.Helper()
	p, err := e.Start(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	out := readAll(p.Stdout())
	exit, err := p.Wait(t.Context())
	if err == nil && exit.Code != 0 {
		t.Errorf("%v: exit %+v", c.Argv, exit)
	}
	return within(t, 10*time.Second, "output", out), err
}

// TestListenTCPRefusesTheRunnersCredential: an executor serves with its
// own credential.
func TestListenTCPRefusesTheRunnersCredential(t *testing.T) {
	t.Parallel()
	runner, _ := newCredentials(t)
	if ln, err := ListenTCP("127.0.0.1:0", runner); err == nil || !strings.Contains(err.Error(), "the credential is the runner's") {
		if ln != nil {
			ln.Close()
		}
		t.Errorf("ListenTCP with the runner's credential: %v", err)
	}
}

// TestRedialerTCP: a Redialer over TCP connects again to an executor
// restarted at the same address, as a container restarted in its pod is.
func TestRedialerTCP(t *testing.T) {
	t.Parallel()
	l := newLocal(t, Options{Grace: 100 * time.Millisecond})
	runner, exec := newCredentials(t)
	ln, err := ListenTCP("127.0.0.1:0", exec)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serve := func(ln net.Listener) (stop func()) {
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
	stop := serve(ln)
	dial := func(ctx context.Context) (*Remote, error) { return DialTCP(ctx, addr, testExecutorName, runner) }
	first, err := dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	d := NewRedialerFunc(first, testExecutorName+" at "+addr, 5*time.Second, dial)
	if _, err := d.Stat(t.Context(), "."); err != nil {
		t.Fatal(err)
	}
	stop()
	<-first.done
	restarted := make(chan func(), 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		ln, err := ListenTCP(addr, exec)
		if err != nil {
			t.Error(err)
			restarted <- func() {}
			return
		}
		restarted <- serve(ln)
	}()
	if out, err := runTo(t, d, Command{Argv: []string{"echo", "again"}}); err != nil || out != "again\n" {
		t.Errorf("after the executor came back: %q, %v", out, err)
	}
	if err := d.Close(t.Context()); err != nil {
		t.Errorf("Close: %v", err)
	}
	(<-restarted)()
	var dials atomic.Int32
	counted := func(ctx context.Context) (*Remote, error) {
		dials.Add(1)
		return dial(ctx)
	}
	short := NewRedialerFunc(first, testExecutorName+" at "+addr, 200*time.Millisecond, counted)
	if _, err := short.List(t.Context()); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("List with no executor: %v, want an error naming %s", err, addr)
	}
	// Taken for gone after the wait: the next calls try once each.
	waited := dials.Load()
	for range 3 {
		if _, err := short.List(t.Context()); err == nil || !strings.Contains(err.Error(), "and again now") {
			t.Errorf("List with the executor gone: %v, want the wait's error and the new attempt's", err)
		}
	}
	if got := dials.Load() - waited; waited < 1 || got != 3 {
		t.Errorf("%d attempts to connect in the wait, then %d for 3 calls; want at least one, then one each", waited, got)
	}
	// Back at the address: the next call connects.
	ln2, err := ListenTCP(addr, exec)
	if err != nil {
		t.Fatal(err)
	}
	defer serve(ln2)()
	if _, err := short.List(t.Context()); err != nil {
		t.Errorf("List once the executor is back: %v", err)
	}
	if err := short.Close(t.Context()); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestTCPRefusesExpired: an expired certificate is refused on either
// side: the runner's by the executor, which logs it, the executor's by
// the runner.
func TestTCPRefusesExpired(t *testing.T) {
	t.Parallel()
	now := time.Now()
	runner, execs, err := mtls.NewSetBetween([]string{testExecutorName}, now.Add(-2*time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	addr := serveTCPWith(t, newLocal(t, Options{}),
		ServeOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, execs[testExecutorName])
	if r, err := DialTCP(t.Context(), addr, testExecutorName, runner); err == nil || !strings.Contains(err.Error(), "certificate has expired") {
		if r != nil {
			_ = r.Close(t.Context())
		}
		t.Errorf("DialTCP of an expired executor: %v, want the certificate expired", err)
	}
	cfg := runner.ClientConfig(testExecutorName)
	cfg.InsecureSkipVerify = true // past the runner's check: the executor's is tested
	if err := rawTLS(t, addr, cfg); err == nil || !strings.Contains(err.Error(), "expired certificate") {
		t.Errorf("an expired runner: %v, want the executor to refuse its certificate", err)
	}
	testenv.Eventually(t, 10*time.Second, "the expired runner's refusal is logged", func() bool {
		for _, rec := range logs.records(t) {
			if reason, _ := rec["reason"].(string); rec["msg"] == "executor peer refused" && strings.Contains(reason, "certificate has expired") {
				return true
			}
		}
		return false
	})
}
