package agenttls

import (
	"crypto/elliptic"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		min, suites string
		want        Policy
		err         string
	}{
		{"", "", DefaultPolicy(), ""},
		{"1.2", "", DefaultPolicy(), ""},
		{"1.3", "", Policy{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13}, ""},
		// With 1.3 only, IPA does not look at the cipher list.
		{"1.3", "NOT-A-SUITE", Policy{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13}, ""},
		{"1.2", "ECDHE-RSA-AES128-GCM-SHA256:ecdhe-ecdsa-chacha20-poly1305", Policy{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13,
			CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}, ""},
		{"1.1", "", Policy{}, `tls_min_version "1.1": must be 1.2 or 1.3`},
		{"1.2", "HIGH:!aNULL", Policy{}, `"HIGH" is not a TLS 1.2 cipher suite`},
		{"1.2", ":", Policy{}, "names no cipher suite"},
	} {
		got, err := ParsePolicy(tc.min, tc.suites)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePolicy(%q, %q) error %v, want %q", tc.min, tc.suites, err, tc.err)
			}
			continue
		}
		if err != nil || got.MinVersion != tc.want.MinVersion || got.MaxVersion != tc.want.MaxVersion || !slices.Equal(got.CipherSuites, tc.want.CipherSuites) {
			t.Errorf("ParsePolicy(%q, %q) = %+v, %v; want %+v", tc.min, tc.suites, got, err, tc.want)
		}
	}
	d, err := ParsePolicy("1.2", DefaultCipherSuites)
	if err != nil || !slices.Equal(d.CipherSuites, DefaultPolicy().CipherSuites) {
		t.Errorf("DefaultCipherSuites parses to %v, %v; DefaultPolicy has %v", d.CipherSuites, err, DefaultPolicy().CipherSuites)
	}
}

func TestParseCurve(t *testing.T) {
	for in, want := range map[string]elliptic.Curve{"": elliptic.P384(), "p256": elliptic.P256(), "P384": elliptic.P384(), "p521": elliptic.P521()} {
		if got, err := ParseCurve(in); err != nil || got != want {
			t.Errorf("ParseCurve(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseCurve("secp256k1"); err == nil {
		t.Error("secp256k1 accepted")
	}
}

// TestPolicyOnTheWire serves with one policy and connects with clients
// that offer only TLS 1.2, or only a suite outside the list: the policy
// decides the handshake, on the server side as on the client side.
func TestPolicyOnTheWire(t *testing.T) {
	s, err := GenerateSelfSigned(net.ParseIP("127.0.0.1"), "h", elliptic.P256(), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(p Policy) *httptest.Server {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, tls.VersionName(r.TLS.Version))
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{s.Cert}}
		p.Apply(srv.TLS)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	get := func(url string, client *tls.Config) (string, error) {
		client.InsecureSkipVerify = true
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: client}}
		resp, err := c.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	only13, _ := ParsePolicy("1.3", "")
	srv13 := serve(only13)
	if _, err := get(srv13.URL, &tls.Config{MaxVersion: tls.VersionTLS12}); err == nil {
		t.Error("a TLS 1.3-only server accepted a TLS 1.2 client")
	}
	if v, err := get(srv13.URL, &tls.Config{}); err != nil || v != "TLS 1.3" {
		t.Errorf("TLS 1.3 client: %q, %v", v, err)
	}
	srvDefault := serve(Policy{})
	if v, err := get(srvDefault.URL, &tls.Config{MaxVersion: tls.VersionTLS12}); err != nil || v != "TLS 1.2" {
		t.Errorf("TLS 1.2 client to the default policy: %q, %v", v, err)
	}
	cbc := &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}
	if _, err := get(srvDefault.URL, cbc); err == nil {
		t.Error("the default policy accepted a CBC suite")
	}
	// The client side: ClientOptions with 1.3 only refuses a 1.2 server.
	srv12 := serve(Policy{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: DefaultPolicy().CipherSuites})
	cfg, err := ClientOptions{Insecure: true, Policy: only13}.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(srv12.URL, cfg); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("a 1.3-only client against a 1.2-only server: %v", err)
	}
}
