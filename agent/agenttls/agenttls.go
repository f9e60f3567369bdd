// Package agenttls holds the agent's TLS material: the one HTTP client
// factory every outgoing call uses (Ironic, ironic-inspector, image servers),
// and the self-signed certificate of automatic TLS.
package agenttls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"
)

// ClientOptions are IPA's TLS client options (insecure, cafile, certfile,
// keyfile) plus the per-request timeout.
type ClientOptions struct {
	Insecure bool
	CAFile   string
	CertFile string
	KeyFile  string
	// Policy is the TLS version and cipher policy; zero means IPA's
	// defaults.
	Policy Policy
	// Timeout bounds one whole request; 0 means none (image downloads bound
	// themselves by stall detection instead).
	Timeout time.Duration
}

// NewHTTPClient returns a client that verifies servers with the system CAs,
// or CAFile, or not at all when Insecure, and presents CertFile/KeyFile when
// given. Proxies come from the environment, as with Python requests.
func NewHTTPClient(o ClientOptions) (*http.Client, error) {
	cfg, err := o.TLSConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr, Timeout: o.Timeout}, nil
}

// TLSConfig builds the client TLS configuration.
func (o ClientOptions) TLSConfig() (*tls.Config, error) {
	cfg := &tls.Config{}
	o.Policy.Apply(cfg)
	if o.Insecure {
		// Operator asked for it (ipa-insecure=1), as in IPA.
		cfg.InsecureSkipVerify = true
	}
	if o.CAFile != "" {
		pemData, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cafile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("cafile %s: no PEM certificate in it", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	if o.CertFile != "" || o.KeyFile != "" {
		if o.CertFile == "" || o.KeyFile == "" {
			return nil, errors.New("certfile and keyfile must be given together")
		}
		pair, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("certfile %s / keyfile %s: %w", o.CertFile, o.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// SelfSigned is an automatically generated server certificate.
type SelfSigned struct {
	// CertPEM is sent to Ironic as agent_verify_ca.
	CertPEM []byte
	KeyPEM  []byte
	// Cert is ready for a tls.Config.
	Cert tls.Certificate
}

// GenerateSelfSigned makes the certificate of IPA's automatic TLS (IPA
// 11.6+): an EC key on curve (nil: P-384, IPA's default), SHA-512
// signature, subject and issuer CN = host name, one critical IP
// SubjectAltName (the advertised address Ironic verifies against), valid
// from now-skew to now+30 days.
func GenerateSelfSigned(ip net.IP, hostname string, curve elliptic.Curve, now time.Time, skew time.Duration) (*SelfSigned, error) {
	if ip == nil {
		return nil, errors.New("auto TLS: no advertised IP address for the certificate")
	}
	if curve == nil {
		curve = elliptic.P384()
	}
	key, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("auto TLS: generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 159))
	if err != nil {
		return nil, fmt.Errorf("auto TLS: serial: %w", err)
	}
	if hostname == "" {
		hostname = "localhost"
	}
	name := pkix.Name{CommonName: hostname}
	ipBytes := ip.To4()
	if ipBytes == nil {
		ipBytes = ip.To16()
	}
	// Go marks the SAN critical only for an empty subject; IPA always does,
	// so the extension is built by hand (one GeneralName iPAddress [7]).
	san, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 7, Bytes: ipBytes}})
	if err != nil {
		return nil, fmt.Errorf("auto TLS: SAN: %w", err)
	}
	// No key usage or basic constraints, like IPA: Ironic uses this very
	// certificate as its CA bundle, and extra constraints could make an
	// OpenSSL client refuse it as a trust anchor.
	tmpl := &x509.Certificate{
		SerialNumber:       serial,
		Subject:            name,
		Issuer:             name,
		NotBefore:          now.Add(-skew).UTC(),
		NotAfter:           now.Add(30 * 24 * time.Hour).UTC(),
		SignatureAlgorithm: x509.ECDSAWithSHA512,
		ExtraExtensions:    []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Critical: true, Value: san}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("auto TLS: signing: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("auto TLS: encoding key: %w", err)
	}
	s := &SelfSigned{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	s.Cert, err = tls.X509KeyPair(s.CertPEM, s.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("auto TLS: %w", err)
	}
	return s, nil
}
