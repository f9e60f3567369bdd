package agenttls

import (
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
)

// Policy is IPA's TLS version and cipher policy (tls_min_version,
// tls_cipher_suites; IPA 11.6+), applied alike to the agent's API server and
// to every outgoing connection.
type Policy struct {
	// MinVersion and MaxVersion bound the protocol: 1.2-1.3, or 1.3 only.
	MinVersion, MaxVersion uint16
	// CipherSuites are the TLS 1.2 suites allowed; TLS 1.3 suites are not
	// configurable (neither in Go nor in IPA's Python ssl module).
	CipherSuites []uint16
}

// DefaultCipherSuites is IPA's TLS 1.2 list when tls_cipher_suites is
// unset: ECDHE with AES-GCM only.
const DefaultCipherSuites = "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256"

// openSSLSuites maps the OpenSSL names IPA's option takes to the suites Go
// implements. OpenSSL's cipher-string language (HIGH, !aNULL, @STRENGTH)
// is not accepted: a name Go cannot honour is an error, never dropped.
var openSSLSuites = map[string]uint16{
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-ECDSA-AES128-SHA256":     tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256,
	"ECDHE-RSA-AES128-SHA256":       tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
	"ECDHE-ECDSA-AES128-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	"AES128-SHA256":                 tls.TLS_RSA_WITH_AES_128_CBC_SHA256,
	"AES128-SHA":                    tls.TLS_RSA_WITH_AES_128_CBC_SHA,
	"AES256-SHA":                    tls.TLS_RSA_WITH_AES_256_CBC_SHA,
}

// ParsePolicy reads tls_min_version ("1.2" or "1.3", "" meaning 1.2) and
// tls_cipher_suites (colon-separated OpenSSL names, "" meaning IPA's
// default list). With 1.3 the cipher list does not apply, as in IPA.
func ParsePolicy(minVersion, cipherSuites string) (Policy, error) {
	p := Policy{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13}
	switch strings.TrimSpace(minVersion) {
	case "", "1.2":
	case "1.3":
		p.MinVersion = tls.VersionTLS13
		return p, nil
	default:
		return Policy{}, fmt.Errorf("tls_min_version %q: must be 1.2 or 1.3", minVersion)
	}
	if strings.TrimSpace(cipherSuites) == "" {
		p.CipherSuites = defaultSuites()
		return p, nil
	}
	for _, name := range strings.Split(cipherSuites, ":") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		id, ok := openSSLSuites[strings.ToUpper(name)]
		if !ok {
			return Policy{}, fmt.Errorf("tls_cipher_suites: %q is not a TLS 1.2 cipher suite this agent implements (OpenSSL names such as %s; keywords like HIGH or !aNULL are not accepted)",
				name, "ECDHE-RSA-AES128-GCM-SHA256")
		}
		if fips140.Enabled() && !fipsApproved(id) {
			return Policy{}, fmt.Errorf("tls_cipher_suites: %s is not approved in FIPS mode (fips=1 on the kernel command line): use an ECDHE suite with AES-GCM, such as ECDHE-RSA-AES256-GCM-SHA384", name)
		}
		p.CipherSuites = append(p.CipherSuites, id)
	}
	if len(p.CipherSuites) == 0 {
		return Policy{}, errors.New("tls_cipher_suites names no cipher suite")
	}
	return p, nil
}

// fipsApproved says whether Go's TLS in FIPS 140-3 mode negotiates the
// suite: the ECDHE suites with AES-GCM, not ChaCha20-Poly1305.
func fipsApproved(id uint16) bool {
	switch id {
	case tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:
		return true
	}
	return false
}

// defaultSuites is DefaultCipherSuites as Go suite IDs.
func defaultSuites() []uint16 {
	return []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	}
}

// DefaultPolicy is IPA's policy with no option set.
func DefaultPolicy() Policy {
	return Policy{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13, CipherSuites: defaultSuites()}
}

// ParseCurve reads tls_certificate_curve (p256, p384 or p521; "" is IPA's
// default, p384): the curve of the automatic TLS key.
func ParseCurve(s string) (elliptic.Curve, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "p256":
		return elliptic.P256(), nil
	case "", "p384":
		return elliptic.P384(), nil
	case "p521":
		return elliptic.P521(), nil
	}
	return nil, fmt.Errorf("tls_certificate_curve %q: must be p256, p384 or p521", s)
}

// Apply sets the policy on cfg. A zero Policy leaves IPA's defaults.
func (p Policy) Apply(cfg *tls.Config) {
	if p.MinVersion == 0 {
		p = DefaultPolicy()
	}
	cfg.MinVersion, cfg.MaxVersion = p.MinVersion, p.MaxVersion
	cfg.CipherSuites = append([]uint16(nil), p.CipherSuites...)
}

// String names the policy for logs: "TLS 1.2+ (4 suites)" or "TLS 1.3 only".
func (p Policy) String() string {
	if p.MinVersion == tls.VersionTLS13 {
		return "TLS 1.3 only"
	}
	names := make([]string, 0, len(p.CipherSuites))
	for _, id := range p.CipherSuites {
		names = append(names, tls.CipherSuiteName(id))
	}
	return "TLS 1.2+ with " + strings.Join(names, ",")
}
