package ironic

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files WriteTLS writes, below its dir.
const (
	tlsCA   = "ca.pem"
	tlsCert = "server.pem"
	tlsKey  = "server-key.pem"
)

// TLSFiles are PEM files on the host: a CA certificate and a server
// certificate and key it signed.
type TLSFiles struct {
	CA, Cert, Key string
}

// WriteTLS makes a new CA and a certificate for host (an IP address or a
// DNS name) signed by it, and writes them into dir as ca.pem, server.pem
// and server-key.pem (the key readable only by its owner). Each call makes a different CA, so a second call
// gives a CA that does not vouch for the first one's server.
func WriteTLS(dir, host string) (TLSFiles, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("testbed ironic: CA key: %w", err)
	}
	// Backdated an hour: the services' clocks are this host's, but a
	// certificate must never look not-yet-valid to them.
	now := time.Now().Add(-time.Hour)
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "ironictest CA " + now.Format(time.RFC3339Nano)},
		NotBefore:             now,
		NotAfter:              now.Add(48 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("testbed ironic: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("testbed ironic: CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("testbed ironic: server key: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now,
		NotAfter:     now.Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		leaf.IPAddresses = []net.IP{ip}
	} else {
		leaf.DNSNames = []string{host}
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("testbed ironic: server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("testbed ironic: server key: %w", err)
	}
	f := TLSFiles{CA: filepath.Join(dir, tlsCA), Cert: filepath.Join(dir, tlsCert), Key: filepath.Join(dir, tlsKey)}
	for _, w := range []struct {
		path, typ string
		der       []byte
		mode      os.FileMode
	}{
		{f.CA, "CERTIFICATE", caDER, 0o644},
		{f.Cert, "CERTIFICATE", leafDER, 0o644},
		{f.Key, "PRIVATE KEY", keyDER, 0o600},
	} {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.typ, Bytes: w.der}), w.mode); err != nil {
			return TLSFiles{}, fmt.Errorf("testbed ironic: %w", err)
		}
	}
	return f, nil
}

// serial is a random 128-bit certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial is still a
		// valid certificate.
		return big.NewInt(1)
	}
	return n
}

// certPool is a pool of the certificates in the PEM file path.
func certPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("testbed ironic: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("testbed ironic: %s: no PEM certificate in it", path)
	}
	return pool, nil
}
