package mtls

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newTestSet is NewSet for the executors, failing the test on an error.
func newTestSet(t testing.TB, executors ...string) (Credential, map[string]Credential) {
	t.Helper()
	r, execs, err := NewSet(executors, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return r, execs
}

func TestNewSetRoundTrip(t *testing.T) {
	t.Parallel()
	before := time.Now()
	runner, execs := newTestSet(t, "workspace", "tools")
	if runner.Name() != RunnerName || !runner.IsRunner() {
		t.Errorf("runner's credential named %q (runner %v)", runner.Name(), runner.IsRunner())
	}
	var names []string
	for name, c := range execs {
		names = append(names, name)
		if c.Name() != name || c.IsRunner() {
			t.Errorf("executor %s's credential named %q (runner %v)", name, c.Name(), c.IsRunner())
		}
		if !c.ca.Equal(runner.ca) {
			t.Errorf("executor %s's authority is not the runner's", name)
		}
		if got := c.cert.DNSNames; !cmp.Equal(got, []string{name + ".executor.aerie"}) {
			t.Errorf("executor %s's DNS names %q", name, got)
		}
	}
	if diff := cmp.Diff([]string{"tools", "workspace"}, sortedStrings(names)); diff != "" {
		t.Errorf("executors (-want +got):\n%s", diff)
	}
	if nb := runner.cert.NotBefore; nb.After(before.Add(-Skew + time.Second)) {
		t.Errorf("NotBefore %s is not %s in the past", nb, Skew)
	}
	if na := runner.NotAfter(); na.Before(before.Add(time.Hour-time.Second)) || na.After(time.Now().Add(time.Hour)) {
		t.Errorf("NotAfter %s, want an hour from now", na)
	}

	dir := t.TempDir()
	for _, c := range []Credential{runner, execs["tools"]} {
		file := filepath.Join(dir, c.Name()+".pem")
		if err := os.WriteFile(file, c.Marshal(), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name() != c.Name() || !got.cert.Equal(c.cert) || !got.ca.Equal(c.ca) {
			t.Errorf("%s does not survive Marshal and Load", c.Name())
		}
		if !bytes.Equal(got.Marshal(), c.Marshal()) { // the key too
			t.Errorf("%s marshals differently once loaded", c.Name())
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.pem")); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("Load of a missing file: %v, want an error naming it", err)
	}
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestNewSetRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		names    []string
		validity time.Duration
		want     string
	}{
		{[]string{"Tools"}, time.Hour, `"Tools" is not a DNS label`},
		{[]string{"a.b"}, time.Hour, `"a.b" is not a DNS label`},
		{[]string{""}, time.Hour, `"" is not a DNS label`},
		{[]string{"-x"}, time.Hour, `"-x" is not a DNS label`},
		{[]string{strings.Repeat("a", 64)}, time.Hour, "is not a DNS label"},
		{[]string{"runner"}, time.Hour, `"runner" is the runner's`},
		{[]string{"tools", "tools"}, time.Hour, `"tools" is named twice`},
		{[]string{"tools"}, 0, "validity 0s is not positive"},
	}
	for _, tt := range tests {
		_, _, err := NewSet(tt.names, tt.validity)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewSet(%q, %s) = %v, want %q", tt.names, tt.validity, err, tt.want)
		}
	}
	if _, execs, err := NewSet(nil, time.Hour); err != nil || len(execs) != 0 {
		t.Errorf("NewSet without executors = %v, %v; want the runner's alone", execs, err)
	}
}

// blocks splits a credential file into its PEM blocks.
func blocks(t *testing.T, data []byte) []*pem.Block {
	t.Helper()
	var out []*pem.Block
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return out
		}
		out = append(out, b)
	}
}

func encode(bs ...*pem.Block) []byte {
	var b bytes.Buffer
	for _, blk := range bs {
		_ = pem.Encode(&b, blk)
	}
	return b.Bytes()
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	runner, execs := newTestSet(t, "tools")
	other, _ := newTestSet(t)
	r := blocks(t, runner.Marshal())
	o := blocks(t, other.Marshal())
	tl := blocks(t, execs["tools"].Marshal())
	withHeader := *r[1]
	withHeader.Headers = map[string]string{"Proc-Type": "4,ENCRYPTED"}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "0 PEM blocks, want 3"},
		{"not PEM", []byte("runner"), "0 PEM blocks, want 3"},
		{"no authority", encode(r[0], r[1]), "2 PEM blocks, want 3"},
		{"trailing data", append(runner.Marshal(), "x"...), "data after the third PEM block"},
		{"a fourth block", encode(r[0], r[1], r[2], r[2]), "data after the third PEM block"},
		{"key first", encode(r[1], r[0], r[2]), `PEM block 1 is "PRIVATE KEY", want "CERTIFICATE"`},
		{"encrypted key", encode(r[0], &withHeader, r[2]), "PEM block 2 has headers"},
		{"garbled certificate", encode(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")}, r[1], r[2]), "the certificate: x509:"},
		{"garbled key", encode(r[0], &pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")}, r[2]), "the private key: "},
		{"another's key", encode(r[0], tl[1], r[2]), "the private key is not the certificate's"},
		{"authority not an authority", encode(r[0], r[1], tl[0]), "the third block's certificate is not an authority"},
		{"the authority first", encode(r[2], r[1], r[2]), "the private key is not the certificate's"},
		{"another set's authority", encode(r[0], r[1], o[2]), "not signed by the authority in the file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.data, "creds/runner.pem")
			if err == nil {
				t.Fatalf("Parse succeeded, want %q", tt.want)
			}
			for _, want := range []string{"credential creds/runner.pem: ", tt.want, "aerie executor credentials"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Parse = %v, want %q in it", err, want)
				}
			}
		})
	}
}

// handshake runs a real TLS handshake over TCP on 127.0.0.1 between a
// server with srv and a client with cli, and returns each side's error.
// The server writes a byte once its handshake succeeded, which the client
// reads: under TLS 1.3 a client learns that the server refused its
// certificate only when it reads.
func handshake(t *testing.T, srv, cli *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.(*tls.Conn).Handshake(); err != nil {
			served <- err
			return
		}
		_, err = conn.Write([]byte{1})
		served <- err
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), cli)
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadFull(conn, make([]byte, 1))
		_ = conn.Close()
	}
	return <-served, err
}

// skipVerify makes a client that does not check the server, so that the
// server's own check is what a handshake tests.
func skipVerify(c *tls.Config) *tls.Config {
	c.InsecureSkipVerify = true
	return c
}

// TestHandshake: the runner and its executor meet; any other pairing is
// refused by the side that checks the other, with the reason.
func TestHandshake(t *testing.T) {
	t.Parallel()
	runner, execs := newTestSet(t, "tools", "build")
	otherRunner, otherExecs := newTestSet(t, "tools")
	now := time.Now()
	oldRunner, oldExecs, err := NewSetBetween([]string{"tools"}, now.Add(-2*time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	noCert := runner.ClientConfig("tools")
	noCert.Certificates = nil
	tests := []struct {
		name              string
		srv, cli          *tls.Config
		serverErr, cliErr string // "" is success
	}{
		{"the runner and its executor", execs["tools"].ServerConfig(), runner.ClientConfig("tools"), "", ""},
		{"no client certificate", execs["tools"].ServerConfig(), noCert, "client didn't provide a certificate", "certificate required"},
		{"a runner of another set", execs["tools"].ServerConfig(), skipVerify(otherRunner.ClientConfig("tools")), "certificate signed by unknown authority", "unknown certificate authority"},
		{"an executor of another set", otherExecs["tools"].ServerConfig(), runner.ClientConfig("tools"), "bad certificate", "certificate signed by unknown authority"},
		{"the runner's certificate serving", runner.ServerConfig(), runner.ClientConfig("tools"), "bad certificate", "certificate is not valid for any names"},
		{"an executor's certificate as the client", execs["tools"].ServerConfig(), execs["build"].ClientConfig("tools"), "incompatible key usage", "bad certificate"},
		{"another executor of the set", execs["build"].ServerConfig(), runner.ClientConfig("tools"), "bad certificate", "certificate is valid for build.executor.aerie, not tools.executor.aerie"},
		{"an expired executor", oldExecs["tools"].ServerConfig(), oldRunner.ClientConfig("tools"), "bad certificate", "certificate has expired"},
		{"an expired runner", oldExecs["tools"].ServerConfig(), skipVerify(oldRunner.ClientConfig("tools")), "certificate has expired", "expired certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			serverErr, clientErr := handshake(t, tt.srv, tt.cli)
			check := func(side string, err error, want string) {
				t.Helper()
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: %v, want success", side, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("%s: %v, want an error with %q", side, err, want)
				}
			}
			check("server", serverErr, tt.serverErr)
			check("client", clientErr, tt.cliErr)
		})
	}
}

// TestServerChecksTheRunnersName: past the chain and the client-auth
// usage, the server checks the name: a client certificate of the set
// that is not the runner's does not pass. (A set has no such certificate
// to try in a handshake: the authority's key is gone.)
func TestServerChecksTheRunnersName(t *testing.T) {
	t.Parallel()
	runner, execs := newTestSet(t, "tools")
	verify := execs["tools"].ServerConfig().VerifyConnection
	if err := verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{runner.cert}}); err != nil {
		t.Errorf("the runner: %v", err)
	}
	for _, peers := range [][]*x509.Certificate{{execs["tools"].cert}, nil} {
		if err := verify(tls.ConnectionState{PeerCertificates: peers}); !errors.Is(err, ErrNotRunner) {
			t.Errorf("peer %v: %v, want %v", peers, err, ErrNotRunner)
		}
	}
}
