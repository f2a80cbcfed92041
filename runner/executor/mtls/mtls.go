// Package mtls generates and loads the credentials that authenticate a
// runner and its executors to each other.
//
// A set of credentials belongs to one attempt of a session. NewSet makes a
// certificate authority of its own for the set, signs with it one client
// certificate for the runner and one server certificate per executor, and
// then forgets the authority's key: nobody can add a certificate to the set
// afterwards, and a set trusts no certificate of another set. Each side
// holds only its own key and the authority's certificate.
//
// The executor's TLS server (ServerConfig) accepts only the runner of its
// set; the runner's TLS client (ClientConfig) accepts only the executor it
// means to reach, by the name in its certificate, so that one executor of
// the set cannot pose as another. Both speak TLS 1.3 only.
//
// The package uses the standard library alone: the controller imports it to
// generate each attempt's credentials.
package mtls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"time"
)

// RunnerName is the common name of the runner's certificate, and the base
// name of its file (runner.pem): no executor may be called so.
const RunnerName = "runner"

// DNSSuffix ends the DNS name of every executor's certificate: the
// executor "tools" is "tools.executor.aerie". The name is never resolved;
// the runner's client verifies the executor's certificate against it
// (ServerName), whatever address it dials.
const DNSSuffix = ".executor.aerie"

// Skew is how far in the past a certificate's validity begins, so that a
// peer whose clock is a little behind accepts it at once.
const Skew = 5 * time.Minute

// ServerName is the DNS name in the certificate of the executor name.
func ServerName(executor string) string { return executor + DNSSuffix }

// label is a DNS label, as Kubernetes names an executor.
var label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ValidName checks that name can name an executor: a DNS label, not the
// runner's name.
func ValidName(name string) error {
	if !label.MatchString(name) {
		return fmt.Errorf("executor name %q is not a DNS label (at most 63 lower-case letters, digits and '-', "+
			"starting and ending with a letter or digit)", name)
	}
	if name == RunnerName {
		return fmt.Errorf("executor name %q is the runner's; choose another name", name)
	}
	return nil
}

// Credential is one side's credential: its certificate, its private key
// and the certificate of the authority that signed the set. The zero value
// is not usable; credentials come from NewSet or Parse.
type Credential struct {
	name string // RunnerName, or the executor's name
	cert *x509.Certificate
	key  crypto.Signer
	ca   *x509.Certificate
}

// Name is RunnerName for the runner's credential, else the executor's name.
func (c Credential) Name() string { return c.name }

// IsRunner reports whether c is the runner's credential.
func (c Credential) IsRunner() bool { return c.name == RunnerName }

// NotAfter is when c's certificate expires.
func (c Credential) NotAfter() time.Time { return c.cert.NotAfter }

// NewSet generates the credentials of one attempt: the runner's and one
// per executor, valid from Skew ago for validity. The authority's key
// exists only during the call.
func NewSet(executors []string, validity time.Duration) (runner Credential, execs map[string]Credential, err error) {
	if validity <= 0 {
		return Credential{}, nil, fmt.Errorf("generate credentials: validity %s is not positive", validity)
	}
	now := time.Now()
	return NewSetBetween(executors, now.Add(-Skew), now.Add(validity))
}

// NewSetBetween is NewSet with the certificates valid from notBefore to
// notAfter: for a caller with a clock of its own, and for tests of
// credentials not yet or no longer valid.
func NewSetBetween(executors []string, notBefore, notAfter time.Time) (Credential, map[string]Credential, error) {
	if !notAfter.After(notBefore) {
		return Credential{}, nil, fmt.Errorf("generate credentials: valid until %s, not after %s",
			notAfter.Format(time.RFC3339), notBefore.Format(time.RFC3339))
	}
	seen := make(map[string]bool, len(executors))
	for _, name := range executors {
		if err := ValidName(name); err != nil {
			return Credential{}, nil, fmt.Errorf("generate credentials: %w", err)
		}
		if seen[name] {
			return Credential{}, nil, fmt.Errorf("generate credentials: executor %q is named twice", name)
		}
		seen[name] = true
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Credential{}, nil, fmt.Errorf("generate credentials: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "aerie executor authority"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	ca, err := sign(caTmpl, caKey, nil, caKey)
	if err != nil {
		return Credential{}, nil, fmt.Errorf("generate credentials: the authority: %w", err)
	}
	issue := func(name string, tmpl *x509.Certificate) (Credential, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return Credential{}, err
		}
		tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.BasicConstraintsValid = true
		cert, err := sign(tmpl, key, ca, caKey)
		if err != nil {
			return Credential{}, fmt.Errorf("%s: %w", name, err)
		}
		return Credential{name: name, cert: cert, key: key, ca: ca}, nil
	}
	runner, err := issue(RunnerName, &x509.Certificate{
		Subject:     pkix.Name{CommonName: RunnerName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return Credential{}, nil, fmt.Errorf("generate credentials: %w", err)
	}
	execs := make(map[string]Credential, len(executors))
	for _, name := range executors {
		c, err := issue(name, &x509.Certificate{
			Subject:     pkix.Name{CommonName: name},
			DNSNames:    []string{ServerName(name)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			return Credential{}, nil, fmt.Errorf("generate credentials: %w", err)
		}
		execs[name] = c
	}
	// caKey goes out of scope here: the set is closed.
	return runner, execs, nil
}

// sign signs tmpl (with a fresh serial number) for key's public key with the
// authority parent and its key; a nil parent self-signs.
func sign(tmpl *x509.Certificate, key crypto.Signer, parent *x509.Certificate,
	parentKey crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// tlsCertificate is c's certificate and key as crypto/tls takes them.
func (c Credential) tlsCertificate() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.cert.Raw}, PrivateKey: c.key, Leaf: c.cert}
}

func (c Credential) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.ca)
	return p
}

// ErrNotRunner is the handshake error of a server whose client presented a
// certificate of the set that is not the runner's.
var ErrNotRunner = errors.New("the client's certificate is not the runner's")

// ServerConfig is the TLS configuration of an executor serving with c:
// TLS 1.3, c's certificate, and a client certificate required, signed by
// c's authority, for client authentication, with the runner's name.
func (c Credential) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.tlsCertificate()},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.pool(),
		// The chain and the client-auth usage are verified already; a
		// set holds one client certificate, the runner's, but a
		// certificate of the set for client auth with another name must
		// not pass either.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Subject.CommonName != RunnerName {
				return ErrNotRunner
			}
			return nil
		},
	}
}

// ClientConfig is the TLS configuration of the runner reaching executor
// with c: TLS 1.3, c's certificate, and the server's certificate verified
// against c's authority and the executor's name (ServerName).
func (c Credential) ClientConfig(executor string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.tlsCertificate()},
		RootCAs:      c.pool(),
		ServerName:   ServerName(executor),
	}
}
