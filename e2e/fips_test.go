package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	ironicclient "github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
)

// fipsLogLine is what the agent logs once it runs in Go's FIPS 140-3 mode
// (cmd/ironic-agent run).
var fipsLogLine = logtext.Msg(agent.EventFIPSMode)

// fipsCmdline writes a kernel command line with fips=1, as Metal3's
// ironic-image gives the ramdisk from a host in FIPS mode, and returns the
// agent flags that read it: the agent restarts itself in Go's FIPS mode.
func fipsCmdline(t *testing.T, more string) []string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cmdline")
	if err := os.WriteFile(p, []byte(strings.TrimSpace("fips=1 "+more)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--kernel-cmdline", p}
}

// TestDeployFIPS deploys, with fips=1 on the agent's kernel command line,
// the raw whole-disk image through Ironic three times, each with one kind
// of checksum only: a SHA-256 image_checksum (the algorithm by its
// length) and a SHA-512 os_hash_algo/os_hash_value complete, and the
// disk holds the image; an MD5 image_checksum, which every series passes
// on, ends in "deploy failed" with last_error saying FIPS mode is why.
// The agent that refused it still serves its API, and the API's automatic
// TLS is checked there (checkAgentTLSFIPS).
func TestDeployFIPS(t *testing.T) {
	s := need(t)
	s.seriesIndependent(t)
	imgDir := t.TempDir()
	raw, _ := deployImages(t, imgDir)
	b, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(imgDir)))
	t.Cleanup(srv.Close)
	imgURL := srv.URL + "/" + filepath.Base(raw)
	s256, s512, m5 := sha256.Sum256(b), sha512.Sum512(b), md5.Sum(b)
	for i, tc := range []struct {
		name string
		info map[string]any
	}{
		{"sha256", map[string]any{"image_checksum": hex.EncodeToString(s256[:])}},
		{"sha512", map[string]any{"image_os_hash_algo": "sha512", "image_os_hash_value": hex.EncodeToString(s512[:])}},
		{"md5", map[string]any{"image_checksum": hex.EncodeToString(m5[:])}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			dev := deployDisk(t)
			mac := fmt.Sprintf("52:54:e2:f1:00:%02x", i+1)
			info := map[string]any{"image_source": imgURL, "image_disk_format": "raw", "root_gb": 1}
			maps.Copy(info, tc.info)
			n := s.deployNodeWith(t, "e2e-fips-"+tc.name, mac, dev, info)
			d := s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, Devices: []string{dev}, Extra: fipsCmdline(t, "")})
			a, _ := d.Start(nodes.ProvisionStateOpts{Target: nodes.TargetActive})
			if err := a.WaitLog(ctx, fipsLogLine, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if os.Getenv("E2E_AGENT_BIN") == "" && !strings.Contains(a.Log(), "module=v1.0.0") {
				t.Errorf("the agent in FIPS mode does not run the certified module v1.0.0 the suite built it with")
			}
			if tc.name != "md5" {
				d.Wait("active", stepTimeout)
				assertDiskHolds(t, dev, raw)
				if !strings.Contains(a.Log(), "crypto (FIPS 140-3 mode)") {
					t.Errorf("the agent's write does not name the standard library's FIPS module as its %s", tc.name)
				}
				return
			}
			got := d.Wait("deploy failed", stepTimeout)
			if !strings.Contains(got.LastError, "MD5 is not allowed in FIPS mode") {
				t.Errorf("last_error = %q, want the agent's refusal naming FIPS mode", got.LastError)
			}
			t.Logf("MD5-only image in FIPS mode: deploy failed: %s", got.LastError)
			checkAgentTLSFIPS(t, a)
		})
	}
}

// checkAgentTLSFIPS checks the agent's API, served with automatic TLS
// (Ironic 2023.1 speaks API 1.68): a self-signed certificate on an ECDSA
// key of an approved curve with an approved signature, TLS 1.3 with an
// AES-GCM suite, or with 1.2 an ECDHE AES-GCM suite; and a client that
// offers only ChaCha20-Poly1305, or only X25519, gets no connection.
func checkAgentTLSFIPS(t *testing.T, a *agentProc) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(a.port))
	dial := func(c *tls.Config) (tls.ConnectionState, error) {
		c.InsecureSkipVerify = true // the certificate is checked below, by its key
		d := tls.Dialer{Config: c, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}
		conn, err := d.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer conn.Close()
		return conn.(*tls.Conn).ConnectionState(), nil
	}
	st, err := dial(&tls.Config{})
	if err != nil {
		t.Fatalf("the agent's API over TLS: %v", err)
	}
	cert := st.PeerCertificates[0]
	key, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !slices.Contains([]elliptic.Curve{elliptic.P256(), elliptic.P384(), elliptic.P521()}, key.Curve) {
		t.Errorf("the agent's certificate key is %T, want ECDSA on P-256, P-384 or P-521", cert.PublicKey)
	}
	if !slices.Contains([]x509.SignatureAlgorithm{x509.ECDSAWithSHA256, x509.ECDSAWithSHA384, x509.ECDSAWithSHA512}, cert.SignatureAlgorithm) {
		t.Errorf("the agent's certificate is signed with %s", cert.SignatureAlgorithm)
	}
	if st.Version != tls.VersionTLS13 || !fipsSuite(st.CipherSuite) {
		t.Errorf("the agent's API negotiated %s %s, want TLS 1.3 with AES-GCM", tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))
	}
	t.Logf("agent API: %s %s, certificate %s on %s", tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite), cert.SignatureAlgorithm, key.Curve.Params().Name)
	st, err = dial(&tls.Config{MaxVersion: tls.VersionTLS12})
	if err != nil || !fipsSuite(st.CipherSuite) {
		t.Errorf("the agent's API with TLS 1.2: %s, %v; want an ECDHE AES-GCM suite", tls.CipherSuiteName(st.CipherSuite), err)
	}
	for what, c := range map[string]*tls.Config{
		"ChaCha20-Poly1305 only": {MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}},
		"X25519 only": {CurvePreferences: []tls.CurveID{tls.X25519}},
	} {
		if st, err := dial(c); err == nil {
			t.Errorf("a client offering %s connected to the agent in FIPS mode: %s %s", what, tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))
		} else {
			t.Logf("a client offering %s: %v", what, err)
		}
	}
}

// fipsSuite says whether a negotiated suite is one FIPS 140-3 approves and
// the agent allows: AES-GCM, with ECDHE under TLS 1.2.
func fipsSuite(id uint16) bool {
	switch id {
	case tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:
		return true
	}
	return false
}

// fipsCurve says whether a key exchange is one Go's FIPS 140-3 mode
// allows: ML-KEM hybrids and the NIST curves, not X25519 alone.
func fipsCurve(id tls.CurveID) bool {
	switch id {
	case tls.X25519MLKEM768, tls.SecP256r1MLKEM768, tls.SecP384r1MLKEM1024, tls.CurveP256, tls.CurveP384, tls.CurveP521:
		return true
	}
	return false
}

// tlsFront is an HTTPS reverse proxy in front of the suite's Ironic that
// records what each client offered and what was negotiated.
type tlsFront struct {
	srv *httptest.Server
	ca  string // the PEM file of its certificate, for [DEFAULT]cafile

	mu     sync.Mutex
	hellos []*tls.ClientHelloInfo
	states []tls.ConnectionState
}

// newTLSFront starts a front to backend whose server side takes cfg's
// versions and suites.
func newTLSFront(t *testing.T, backend string, cfg *tls.Config) *tlsFront {
	t.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	f := &tlsFront{}
	f.srv = httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(u))
	f.srv.TLS = cfg
	// The refused handshakes are the point of some cases, not noise for
	// the test's output.
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		f.mu.Lock()
		f.hellos = append(f.hellos, h)
		f.mu.Unlock()
		return nil, nil
	}
	cfg.VerifyConnection = func(st tls.ConnectionState) error {
		f.mu.Lock()
		f.states = append(f.states, st)
		f.mu.Unlock()
		return nil
	}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	f.ca = filepath.Join(t.TempDir(), "front-ca.pem")
	if err := os.WriteFile(f.ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// seen returns what the front recorded so far.
func (f *tlsFront) seen() ([]*tls.ClientHelloInfo, []tls.ConnectionState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hellos), slices.Clone(f.states)
}

// checkFIPSHellos checks that every ClientHello offered only what FIPS
// 140-3 approves: TLS 1.2 and 1.3, AES-GCM suites (with ECDHE under 1.2),
// ML-KEM hybrids and NIST curves.
func checkFIPSHellos(t *testing.T, hellos []*tls.ClientHelloInfo) {
	t.Helper()
	if len(hellos) == 0 {
		t.Fatal("no ClientHello reached the TLS front")
	}
	for _, h := range hellos {
		for _, v := range h.SupportedVersions {
			if v != tls.VersionTLS12 && v != tls.VersionTLS13 {
				t.Errorf("the agent in FIPS mode offered %s", tls.VersionName(v))
			}
		}
		for _, id := range h.CipherSuites {
			if !fipsSuite(id) {
				t.Errorf("the agent in FIPS mode offered %s", tls.CipherSuiteName(id))
			}
		}
		for _, c := range h.SupportedCurves {
			if !fipsCurve(c) {
				t.Errorf("the agent in FIPS mode offered the key exchange %s", c)
			}
		}
	}
}

// TestIronicTLSFIPS: the agent with fips=1 talks to Ironic through an
// HTTPS front (Go's crypto/tls, recording each handshake) trusted by
// [DEFAULT]cafile:
//   - tls13: lookup, heartbeats and a clean step complete; every
//     ClientHello offered only approved versions, suites and key
//     exchanges, and TLS 1.3 with AES-GCM was negotiated;
//   - tls12: the front speaks TLS 1.2 at most; an ECDHE AES-GCM suite;
//   - chacha: the front offers only ChaCha20-Poly1305 (TLS 1.2); the
//     agent's lookup fails its handshakes and it exits naming the URL;
//   - control: the same agent without fips=1 offers ChaCha20-Poly1305
//     and X25519 under TLS 1.3, which the FIPS agent never did, so the
//     recording sees what a client offers.
func TestIronicTLSFIPS(t *testing.T) {
	s := need(t)
	s.seriesIndependent(t)
	c := s.ironic
	for i, tc := range []struct {
		name    string
		version uint16
	}{{"tls13", tls.VersionTLS13}, {"tls12", tls.VersionTLS12}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTLSFront(t, s.services.IronicURL, &tls.Config{MaxVersion: tc.version})
			confDir := confDirWith(t, "[DEFAULT]\ncafile = "+f.ca+"\n")
			mac := fmt.Sprintf("52:54:e2:f2:00:%02x", i+1)
			cleanOverTLS(t, s, c, f.srv.URL, mac, append([]string{"--config-dir", confDir}, fipsCmdline(t, "")...)...)
			hellos, states := f.seen()
			checkFIPSHellos(t, hellos)
			for _, st := range states {
				if st.Version != tc.version || !fipsSuite(st.CipherSuite) {
					t.Errorf("negotiated %s %s, want %s with AES-GCM (ECDHE under TLS 1.2)", tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite), tls.VersionName(tc.version))
				}
			}
			t.Logf("%d handshakes; the first: %s %s", len(states), tls.VersionName(states[0].Version), tls.CipherSuiteName(states[0].CipherSuite))
		})
	}
	t.Run("chacha", func(t *testing.T) {
		f := newTLSFront(t, s.services.IronicURL, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}})
		confDir := confDirWith(t, "[DEFAULT]\ncafile = "+f.ca+"\n")
		a := s.startAgent(t, agentOpts{MAC: "52:54:e2:f2:00:03", APIURL: f.srv.URL,
			Extra: append([]string{"--config-dir", confDir, "--lookup-timeout", "5"}, fipsCmdline(t, "")...)})
		select {
		case <-a.done:
		case <-time.After(90 * time.Second):
			t.Fatal("the agent did not give up its lookup within 90 s")
		}
		log := a.Log()
		if !strings.Contains(log, fipsLogLine) {
			t.Errorf("the agent did not run in FIPS mode")
		}
		if a.err == nil || !strings.Contains(log, f.srv.URL+"/") || !strings.Contains(log, "handshake failure") {
			t.Errorf("the agent (exit %v) did not fail its lookup with a handshake failure naming %s", a.err, f.srv.URL)
		}
		hellos, states := f.seen()
		checkFIPSHellos(t, hellos)
		if len(states) != 0 {
			t.Errorf("%d handshakes completed with a ChaCha20-only server", len(states))
		}
		t.Logf("agent exit: %v; its last lines:\n%s", a.err, tailBytes([]byte(log), 800))
	})
	t.Run("control", func(t *testing.T) {
		f := newTLSFront(t, s.services.IronicURL, &tls.Config{})
		confDir := confDirWith(t, "[DEFAULT]\ncafile = "+f.ca+"\n")
		// An address no node has: the lookup keeps failing; its first
		// ClientHello is all this needs.
		a := s.startAgent(t, agentOpts{MAC: "52:54:e2:f2:00:04", APIURL: f.srv.URL, Extra: []string{"--config-dir", confDir}})
		deadline := time.Now().Add(60 * time.Second)
		for {
			if hellos, _ := f.seen(); len(hellos) > 0 {
				h := hellos[0]
				if !slices.Contains(h.CipherSuites, tls.TLS_CHACHA20_POLY1305_SHA256) || !slices.Contains(h.SupportedCurves, tls.X25519) {
					t.Errorf("the agent without fips=1 offered %v and key exchanges %v; want ChaCha20-Poly1305 and X25519 among them", suiteNames(h.CipherSuites), h.SupportedCurves)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no ClientHello from the agent without fips=1 within 60 s")
			}
			time.Sleep(200 * time.Millisecond)
		}
		if strings.Contains(a.Log(), fipsLogLine) {
			t.Errorf("the agent without fips=1 says it runs in FIPS mode")
		}
	})
}

func suiteNames(ids []uint16) []string {
	var out []string
	for _, id := range ids {
		out = append(out, tls.CipherSuiteName(id))
	}
	return out
}

// checkIronicTLSFIPS checks that agent a ran in FIPS mode and that its
// connection to Ironic (its "Ironic over TLS" debug line) used an approved
// protocol and suite.
func checkIronicTLSFIPS(t *testing.T, a *agentProc) {
	t.Helper()
	log := a.Log()
	if !strings.Contains(log, fipsLogLine) {
		t.Errorf("the agent did not run in FIPS mode")
	}
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, logtext.Msg(ironicclient.EventOverTLS)) {
			continue
		}
		ok := false
		for _, cs := range tls.CipherSuites() {
			ok = ok || fipsSuite(cs.ID) && strings.Contains(line, "cipher_suite="+cs.Name)
		}
		if !ok || !strings.Contains(line, "version=\"TLS 1.") {
			t.Errorf("the agent in FIPS mode reached Ironic with %s", line)
		}
		t.Logf("%s", line)
		return
	}
	t.Errorf("the agent's log has no \"Ironic over TLS\" line")
}
