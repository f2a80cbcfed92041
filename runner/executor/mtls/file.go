package mtls

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
)

// The file of a credential is PEM, three blocks in this order and nothing
// else but white space:
//
//  1. CERTIFICATE: the side's own certificate;
//  2. PRIVATE KEY: its private key, PKCS #8;
//  3. CERTIFICATE: the certificate of the set's authority.
//
// It holds a private key: it is written with mode 0600.
const (
	blockCert = "CERTIFICATE"
	blockKey  = "PRIVATE KEY"
)

// regenerate is the fix named by every error of Parse.
const regenerate = "generate a fresh set with `aerie executor credentials`"

// Marshal encodes c as its file.
func (c Credential) Marshal() []byte {
	key, err := x509.MarshalPKCS8PrivateKey(c.key)
	if err != nil {
		// The key is one this package generated or parsed.
		panic(fmt.Sprintf("mtls: marshal the key of %s: %v", c.name, err))
	}
	var b bytes.Buffer
	for _, blk := range []*pem.Block{
		{Type: blockCert, Bytes: c.cert.Raw},
		{Type: blockKey, Bytes: key},
		{Type: blockCert, Bytes: c.ca.Raw},
	} {
		_ = pem.Encode(&b, blk)
	}
	return b.Bytes()
}

// Load reads and parses the credential file.
func Load(file string) (Credential, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Credential{}, fmt.Errorf("load credential: %w", err)
	}
	return Parse(data, file)
}

// Parse decodes a credential's file; source names it in errors.
func Parse(data []byte, source string) (Credential, error) {
	c, err := parse(data)
	if err != nil {
		return Credential{}, fmt.Errorf("credential %s: %w; %s", source, err, regenerate)
	}
	return c, nil
}

func parse(data []byte) (Credential, error) {
	var blocks []*pem.Block
	rest := data
	for len(blocks) < 3 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return Credential{}, fmt.Errorf(
				"%d PEM blocks, want 3 (the certificate, the private key, the authority's certificate)", len(blocks))
		}
		blocks = append(blocks, b)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return Credential{}, fmt.Errorf("data after the third PEM block")
	}
	for i, want := range []string{blockCert, blockKey, blockCert} {
		if blocks[i].Type != want {
			return Credential{}, fmt.Errorf("PEM block %d is %q, want %q", i+1, blocks[i].Type, want)
		}
		if len(blocks[i].Headers) > 0 {
			return Credential{}, fmt.Errorf("PEM block %d has headers (is it encrypted?); want none", i+1)
		}
	}
	cert, err := x509.ParseCertificate(blocks[0].Bytes)
	if err != nil {
		return Credential{}, fmt.Errorf("the certificate: %w", err)
	}
	anyKey, err := x509.ParsePKCS8PrivateKey(blocks[1].Bytes)
	if err != nil {
		return Credential{}, fmt.Errorf("the private key: %w", err)
	}
	ca, err := x509.ParseCertificate(blocks[2].Bytes)
	if err != nil {
		return Credential{}, fmt.Errorf("the authority's certificate: %w", err)
	}
	key, ok := anyKey.(crypto.Signer)
	if !ok {
		return Credential{}, fmt.Errorf("the private key is a %T, which cannot sign", anyKey)
	}
	type publicKey interface{ Equal(crypto.PublicKey) bool }
	if pub, ok := key.Public().(publicKey); !ok || !pub.Equal(cert.PublicKey) {
		return Credential{}, fmt.Errorf("the private key is not the certificate's")
	}
	if !ca.IsCA || !ca.BasicConstraintsValid {
		return Credential{}, fmt.Errorf("the third block's certificate is not an authority")
	}
	if cert.IsCA {
		return Credential{}, fmt.Errorf("the first block's certificate is an authority, want the runner's or an executor's")
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return Credential{}, fmt.Errorf("the certificate is not signed by the authority in the file: %w", err)
	}
	name, err := role(cert)
	if err != nil {
		return Credential{}, err
	}
	return Credential{name: name, cert: cert, key: key, ca: ca}, nil
}

// role is the name of the side cert authenticates: RunnerName for a
// client certificate so named, the executor's name for a server
// certificate of one executor.
func role(cert *x509.Certificate) (string, error) {
	cn := cert.Subject.CommonName
	switch {
	case slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}):
		if cn != RunnerName {
			return "", fmt.Errorf("the client certificate is %q's, want %q's", cn, RunnerName)
		}
		return RunnerName, nil
	case slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}):
		if err := ValidName(cn); err != nil {
			return "", fmt.Errorf("the server certificate: %w", err)
		}
		if !slices.Equal(cert.DNSNames, []string{ServerName(cn)}) {
			return "", fmt.Errorf("the server certificate of %q names %q, want [%s]", cn, cert.DNSNames, ServerName(cn))
		}
		return cn, nil
	}
	return "", fmt.Errorf(
		"the certificate is for neither client nor server authentication alone (extended key usages %v)", cert.ExtKeyUsage)
}
