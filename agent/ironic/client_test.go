package ironic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
)

// fakeBackoff records the sleeps and advances a fake clock.
type fakeBackoff struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (f *fakeBackoff) backoff(u float64) Backoff {
	return Backoff{
		Now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now },
		Sleep: func(_ context.Context, d time.Duration) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.sleeps = append(f.sleeps, d)
			f.now = f.now.Add(d)
			return nil
		},
		Float64: func() float64 { return u },
	}
}

func TestLookupWait(t *testing.T) {
	b := Backoff{Float64: func() float64 { return 1 }}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second, 7: 60 * time.Second, 50: 60 * time.Second} {
		if got := LookupWait(b, n, time.Second); got != want {
			t.Errorf("n=%d max wait %v, want %v", n, got, want)
		}
	}
	b.Float64 = func() float64 { return 0 }
	if got := LookupWait(b, 5, 3*time.Second); got != 3*time.Second {
		t.Errorf("min wait %v, want lookup_interval", got)
	}
	if got := LookupWait(Backoff{Float64: func() float64 { return 1 }}, 1, 90*time.Second); got != 90*time.Second {
		t.Errorf("interval above 60 s: %v", got)
	}
}

// The node and token of the recorded lookup.
const (
	recordedNode  = "ff890ff6-6023-4f5f-9d87-4a3f87f7e551"
	recordedToken = "tiFtwpghhKF8HV0FrSMOh3aAsw31mpadirCo2f7hKu0"
)

// ironic214 serves Ironic 21.4's recorded answers for the recorded node,
// its token masked after the first lookup, lookups failing with the
// statuses of failures first.
func ironic214(t *testing.T, failures ...int) (*fakeironic.Server, *httptest.Server) {
	f := &fakeironic.Server{NodeUUID: recordedNode, Token: recordedToken, MaskToken: true, LookupFailures: failures}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func TestLookupRetriesAndToken(t *testing.T) {
	f, srv := ironic214(t, 404, 500, 409, 404)
	c, err := NewClient([]string{srv.URL + "/"}, srv.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBackoff{now: time.Unix(0, 0)}
	res, err := c.LookupNode(context.Background(), fb.backoff(1), []string{"52:54:a9:7e:01:01", "52:54:a9:7e:01:02"}, "", 300*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.NodeUUID != recordedNode || *res.Config.AgentToken != recordedToken || res.Config.HeartbeatTimeout != 10 {
		t.Errorf("lookup result %+v", res)
	}
	if res.Config.PermittedImageFormats[2] != "iso" || !*res.Config.EnableBIOSBootloaderInstall {
		t.Errorf("Debian 21.4.4 config keys lost: %+v", res.Config)
	}
	// Sleeps: 1, 2, 4+5 (409), 8 s with the maximum jitter.
	want := []time.Duration{time.Second, 2 * time.Second, 9 * time.Second, 8 * time.Second}
	if len(fb.sleeps) != len(want) {
		t.Fatalf("sleeps %v, want %v", fb.sleeps, want)
	}
	for i := range want {
		if fb.sleeps[i] != want[i] {
			t.Errorf("sleeps %v, want %v", fb.sleeps, want)
		}
	}
	calls := f.Requests()
	if calls[0].URI != "/" {
		t.Errorf("first call %s, want version discovery", calls[0].URI)
	}
	for _, r := range calls[1:] {
		if r.URI != "/v1/lookup?addresses=52%3A54%3Aa9%3A7e%3A01%3A01%2C52%3A54%3Aa9%3A7e%3A01%3A02" ||
			r.Version != "1.62" || r.Header.Get("Accept") != "application/json" {
			t.Errorf("lookup request %s %v", r.URI, r.Header)
		}
	}
	// A second lookup gets the mask; the caller keeps its token (agent
	// tests check that); here the reply must still parse.
	res2, err := c.Lookup(context.Background(), []string{"52:54:a9:7e:01:01"}, res.NodeUUID)
	if err != nil || *res2.Config.AgentToken != fakeironic.MaskedToken {
		t.Fatalf("%v %+v", err, res2)
	}
	calls = f.Requests()
	if got := calls[len(calls)-1].URI; !strings.HasSuffix(got, "&node_uuid="+res.NodeUUID) {
		t.Errorf("lookup %q, want node_uuid", got)
	}
}

func TestLookupTimeout(t *testing.T) {
	failures := make([]int, 1000)
	for i := range failures {
		failures[i] = 404
	}
	f, srv := ironic214(t, failures...)
	c, _ := NewClient([]string{srv.URL}, srv.Client(), "1.82")
	fb := &fakeBackoff{now: time.Unix(0, 0)}
	_, err := c.LookupNode(context.Background(), fb.backoff(0.5), []string{"aa:bb:cc:dd:ee:ff"}, "", 100*time.Second, time.Second)
	if err == nil || !strings.Contains(err.Error(), "HTTP 404: Resource could not be found.") || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("error %v", err)
	}
	var total time.Duration
	for _, s := range fb.sleeps {
		total += s
	}
	if total > 100*time.Second {
		t.Errorf("slept %v beyond the lookup timeout", total)
	}
	if f.Requests()[0].Path == "/" {
		t.Errorf("version discovery despite ipa-ironic-api-version")
	}
}

func TestHeartbeatBodies(t *testing.T) {
	f := &fakeironic.Server{NodeUUID: "uuid-1", Token: "good-token"}
	srv := httptest.NewServer(f)
	defer srv.Close()
	cases := []struct {
		version string
		want    string
	}{
		{"1.82", `{"agent_token":"good-token","agent_verify_ca":"PEM","agent_version":"0.1.0","callback_url":"https://192.0.2.1:9999"}`},
		{"1.62", `{"agent_token":"good-token","agent_version":"0.1.0","callback_url":"https://192.0.2.1:9999"}`},
		{"1.36", `{"agent_version":"0.1.0","callback_url":"https://192.0.2.1:9999"}`},
	}
	for _, c := range cases {
		cl, _ := NewClient([]string{srv.URL}, srv.Client(), c.version)
		_ = cl.SendHeartbeat(context.Background(), "uuid-1", Heartbeat{CallbackURL: "https://192.0.2.1:9999", Token: "good-token", AgentVersion: "0.1.0", VerifyCA: "PEM"})
		calls := f.Requests()
		last := calls[len(calls)-1]
		var body map[string]any
		_ = json.Unmarshal(last.Body, &body)
		got, _ := json.Marshal(body) // keys sorted
		hv := last.Version
		if string(got) != c.want {
			t.Errorf("at %s: %s, want %s", c.version, got, c.want)
		}
		wantV := c.version
		if wantV == "1.82" {
			wantV = "1.68"
		}
		if hv != wantV {
			t.Errorf("heartbeat version header %s, want %s", hv, wantV)
		}
	}
	cl, _ := NewClient([]string{srv.URL}, srv.Client(), "")
	err := cl.SendHeartbeat(context.Background(), "uuid-1", Heartbeat{Token: "stale"})
	if err == nil || !strings.HasSuffix(err.Error(), "HTTP 400: Invalid or missing agent token received.") {
		t.Errorf("error %v", err)
	}
}

func TestErrorText(t *testing.T) {
	cases := map[string]string{
		`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"Node x could not be found.\", \"debuginfo\": null}"}`: "Node x could not be found.",
		`{"error_message": {"faultcode": "Client", "faultstring": "decoded", "debuginfo": null}}`:                                "decoded",
		`{"code": 404, "title": "Not Found", "description": "gone"}`:                                                             "Not Found",
		`plain text`: "plain text",
	}
	for in, want := range cases {
		if got := ErrorText([]byte(in)); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

func TestVersionDiscoveryFallback(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	c, _ := NewClient([]string{srv.URL}, srv.Client(), "")
	if v := c.APIVersion(context.Background()); v != (Version{1, 31}) {
		t.Errorf("fallback %v, want 1.31", v)
	}
}

func TestMultipleURLs(t *testing.T) {
	_, srv := ironic214(t)
	c, _ := NewClient([]string{"http://127.0.0.1:1", srv.URL}, srv.Client(), "")
	if v := c.APIVersion(context.Background()); v != (Version{1, 82}) {
		t.Fatalf("version %v", v)
	}
	if c.urls[0] != srv.URL {
		t.Errorf("the answering URL was not moved to the front: %v", c.urls)
	}
}

// TestCertificateErrorText: when Ironic's certificate does not verify, the
// lookup error names the URL once, the certificate problem and what the
// certificate was verified against.
func TestCertificateErrorText(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	// The server's side of the refused handshake is expected.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	// A client that trusts none of the server's issuers, as with a wrong
	// cafile.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}
	c, err := NewClient([]string{srv.URL}, hc, "1.82")
	if err != nil {
		t.Fatal(err)
	}
	c.TrustedCAs = "the CA file /etc/ironic-python-agent/wrong.pem"
	_, err = c.Lookup(context.Background(), []string{"52:54:00:12:34:56"}, "")
	if err == nil {
		t.Fatal("lookup against an untrusted certificate succeeded")
	}
	msg := err.Error()
	for _, want := range []string{
		"GET " + srv.URL + "/v1/lookup?addresses=52%3A54%3A00%3A12%3A34%3A56: ",
		"x509: certificate signed by unknown authority",
		"verified against the CA file /etc/ironic-python-agent/wrong.pem",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if n := strings.Count(msg, srv.URL); n != 1 {
		t.Errorf("error %q names the URL %d times, want once", msg, n)
	}
	var cv *tls.CertificateVerificationError
	if !errors.As(err, &cv) {
		t.Errorf("error %q does not wrap the certificate error", msg)
	}
}

// TestLookupWaitsForVersion: while Ironic's root document cannot be read
// (a 503 here; a timed-out TLS handshake under load did it in the suite),
// a lookup attempt fails and the loop tries again, rather than looking up
// at the minimum version, whose reply carries no agent token: every
// heartbeat would then be refused with "Agent token is required".
func TestLookupWaitsForVersion(t *testing.T) {
	f := &fakeironic.Server{NodeUUID: recordedNode, Token: recordedToken, MaskToken: true}
	var roots atomic.Int32
	var lookupVersions []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && roots.Add(1) <= 2 {
			http.Error(w, "the API is starting", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/v1/lookup" {
			mu.Lock()
			lookupVersions = append(lookupVersions, r.Header.Get("X-OpenStack-Ironic-API-Version"))
			mu.Unlock()
		}
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient([]string{srv.URL}, srv.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBackoff{now: time.Unix(0, 0)}
	res, err := c.LookupNode(context.Background(), fb.backoff(1), []string{"52:54:a9:7e:01:01"}, "", 300*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Config.AgentToken == nil || *res.Config.AgentToken != recordedToken {
		t.Errorf("no agent token: %+v", res.Config)
	}
	if len(fb.sleeps) != 2 {
		t.Errorf("sleeps %v, want two retries while the root document failed", fb.sleeps)
	}
	if !slices.Equal(lookupVersions, []string{"1.62"}) {
		t.Errorf("lookups at versions %q, want one at 1.62", lookupVersions)
	}
}
