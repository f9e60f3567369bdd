package ironic

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWriteTLS: the server certificate WriteTLS makes verifies for its IP
// against its own CA, through a real TLS handshake, and not against the CA
// of a second call.
func TestWriteTLS(t *testing.T) {
	f, err := WriteTLS(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := WriteTLS(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()
	for _, tc := range []struct {
		ca     string
		wantOK bool
	}{{f.CA, true}, {other.CA, false}} {
		pool, err := certPool(tc.ca)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		var unknown x509.UnknownAuthorityError
		switch {
		case tc.wantOK && err != nil:
			t.Errorf("GET %s trusting its own CA: %v", srv.URL, err)
		case !tc.wantOK && (err == nil || !errors.As(err, &unknown)):
			t.Errorf("GET %s trusting another CA: %v, want an unknown-authority error", srv.URL, err)
		}
		c.CloseIdleConnections()
	}
}

// TestIronicConfTLS: Config.TLS turns on Ironic's HTTPS API with the
// certificate files below etc/tls, in both groups the series read, and
// makes Ironic's own URL https; without it nothing of that appears.
func TestIronicConfTLS(t *testing.T) {
	c := Config{Dir: "/work/ironic", TLS: true}
	c.defaults()
	conf := ironicConf(c, c.Dir)
	for _, want := range []string{
		"[api]\nhost_ip = 127.0.0.1\nport = 6385\n",
		"enable_ssl_api = true\ncert_file = /work/ironic/etc/tls/server.pem\nkey_file = /work/ironic/etc/tls/server-key.pem\n",
		"[ssl]\ncert_file = /work/ironic/etc/tls/server.pem\nkey_file = /work/ironic/etc/tls/server-key.pem\n",
		"api_url = https://127.0.0.1:6385\n",
		"[service_catalog]\nauth_type = none\nendpoint_override = https://127.0.0.1:6385\ncafile = /work/ironic/etc/tls/ca.pem\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("ironic.conf with TLS lacks %q:\n%s", want, conf)
		}
	}
	if ic := inspectorConf(c, c.Dir); !strings.Contains(ic, "endpoint_override = https://127.0.0.1:6385\ncafile = /work/ironic/etc/tls/ca.pem\n") {
		t.Errorf("inspector.conf with TLS does not trust the CA toward Ironic:\n%s", ic)
	}
	c.TLS = false
	conf = ironicConf(c, c.Dir)
	for _, unwanted := range []string{"ssl", "https", "cert_file", "cafile"} {
		if strings.Contains(conf, unwanted) {
			t.Errorf("ironic.conf without TLS mentions %s", unwanted)
		}
	}
}
