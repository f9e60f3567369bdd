package agenttls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSelfSignedFields(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	s, err := GenerateSelfSigned(net.ParseIP("192.0.2.10"), "ramdisk-host", nil, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(s.CertPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("PEM %q", s.CertPEM)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject.CommonName != "ramdisk-host" || c.Issuer.CommonName != "ramdisk-host" {
		t.Errorf("subject %v issuer %v", c.Subject, c.Issuer)
	}
	if !c.NotBefore.Equal(now.Add(-time.Hour)) || !c.NotAfter.Equal(now.Add(30*24*time.Hour)) {
		t.Errorf("validity %v .. %v", c.NotBefore, c.NotAfter)
	}
	if len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(net.ParseIP("192.0.2.10")) || len(c.DNSNames) != 0 {
		t.Errorf("SAN ips %v dns %v", c.IPAddresses, c.DNSNames)
	}
	critical := false
	for _, e := range c.Extensions {
		if e.Id.String() == "2.5.29.17" {
			critical = e.Critical
		}
	}
	if !critical {
		t.Errorf("SubjectAltName not critical")
	}
	// IPA 11.6+: P-384 by default, SHA-512.
	if c.SignatureAlgorithm != x509.ECDSAWithSHA512 {
		t.Errorf("signature %v", c.SignatureAlgorithm)
	}
	if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P384() {
		t.Errorf("key %T", c.PublicKey)
	}
	if c.BasicConstraintsValid || c.KeyUsage != 0 || len(c.ExtKeyUsage) != 0 {
		t.Errorf("extra constraints: basic %v ku %v eku %v", c.BasicConstraintsValid, c.KeyUsage, c.ExtKeyUsage)
	}
}

// Ironic stores the PEM and uses it as the CA bundle toward the agent, with
// hostname checking against the IP: the same must work here.
func TestSelfSignedServesToAVerifyingClient(t *testing.T) {
	s, err := GenerateSelfSigned(net.ParseIP("127.0.0.1"), "h", nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	c := serveWithCA(t, srv, s)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("verifying with the certificate as CA: %v", err)
	}
	resp.Body.Close()

	// Without the CA it must fail; with insecure it must pass.
	plain, _ := NewHTTPClient(ClientOptions{})
	if _, err := plain.Get(srv.URL); err == nil {
		t.Errorf("unverified certificate accepted")
	}
	insecure, _ := NewHTTPClient(ClientOptions{Insecure: true})
	if resp, err := insecure.Get(srv.URL); err != nil {
		t.Errorf("insecure: %v", err)
	} else {
		resp.Body.Close()
	}
}

func TestClientOptionErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not pem"), 0o644)
	for _, o := range []ClientOptions{
		{CAFile: filepath.Join(dir, "missing.pem")},
		{CAFile: bad},
		{CertFile: bad},
		{CertFile: bad, KeyFile: bad},
	} {
		if _, err := NewHTTPClient(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// An agent advertising an IPv6 address gets a certificate whose SAN is that
// address (16 bytes), and a client verifying against it over IPv6 accepts it.
func TestSelfSignedIPv6(t *testing.T) {
	s, err := GenerateSelfSigned(net.ParseIP("::1"), "h", nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(s.CertPEM)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.IPAddresses) != 1 || len(c.IPAddresses[0]) != net.IPv6len || !c.IPAddresses[0].Equal(net.IPv6loopback) {
		t.Fatalf("SAN ips %v", c.IPAddresses)
	}
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("SKIPPED: no IPv6 loopback here: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	srv.Listener.Close()
	srv.Listener = l
	cl := serveWithCA(t, srv, s)
	if srv.URL != "https://"+l.Addr().String() || srv.URL[:9] != "https://[" {
		t.Fatalf("server URL %s", srv.URL)
	}
	resp, err := cl.Get(srv.URL)
	if err != nil {
		t.Fatalf("verifying %s with the certificate as CA: %v", srv.URL, err)
	}
	resp.Body.Close()
}

// serveWithCA starts srv with the certificate and returns a client that
// verifies it with the certificate as its CA, as Ironic does.
func serveWithCA(t *testing.T, srv *httptest.Server, s *SelfSigned) *http.Client {
	t.Helper()
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{s.Cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "agent.crt")
	if err := os.WriteFile(ca, s.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := NewHTTPClient(ClientOptions{CAFile: ca, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
