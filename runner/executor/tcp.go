package executor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/aerie-run/aerie/runner/executor/mtls"
)

// DefaultHandshakeTimeout bounds a TCP client's TLS handshake on the
// server (ServeOptions.HandshakeTimeout): a peer that connects and says
// nothing is dropped after it.
const DefaultHandshakeTimeout = 10 * time.Second

// ListenTCP listens on addr (host:port; port 0 picks one) for the runner
// of cred's set, over TLS 1.3 with the certificates of both sides checked
// (mtls). cred is the executor's own. Serve accepts the listener as it
// accepts a socket's; it refuses, and logs, any peer that is not the
// runner of cred's set during the TLS handshake, before the executor
// protocol begins.
func ListenTCP(addr string, cred mtls.Credential) (net.Listener, error) {
	if cred.IsRunner() {
		return nil, fmt.Errorf(
			"listen on %s: the credential is the runner's; an executor serves with its own (NAME.pem)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return tls.NewListener(ln, cred.ServerConfig()), nil
}

// DialTCP connects to the executor named executor serving addr with
// ListenTCP, as the runner of cred's set: the executor must present the
// certificate of that name from the same set. ctx bounds the connection,
// the TLS handshake and the executor protocol's handshake only.
func DialTCP(ctx context.Context, addr, executor string, cred mtls.Credential) (*Remote, error) {
	if !cred.IsRunner() {
		return nil, fmt.Errorf("dial executor %s at %s: the credential is executor %s's, not the runner's (runner.pem)",
			executor, addr, cred.Name())
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial executor %s: %w", executor, err)
	}
	conn := tls.Client(raw, cred.ClientConfig(executor))
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("dial executor %s at %s: %w", executor, addr, err)
	}
	// Under TLS 1.3 the server checks the runner's certificate after
	// the client's handshake is done: a refusal arrives as the answer to
	// the protocol's hello.
	r, err := handshake(ctx, conn)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("dial executor %s at %s: %w", executor, addr, err)
	}
	return r, nil
}

// tlsHandshake completes the TLS handshake of a TCP client, within
// c.handshakeTimeout, and names the client it authenticated in c's logs.
// On other connections it does nothing.
func (c *serverConn) tlsHandshake() error {
	tc, ok := c.conn.(*tls.Conn)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no TLS handshake within %s", c.handshakeTimeout)
		}
		return err
	}
	if peers := tc.ConnectionState().PeerCertificates; len(peers) > 0 {
		c.log = c.log.With("client", peers[0].Subject.CommonName)
	}
	return nil
}
