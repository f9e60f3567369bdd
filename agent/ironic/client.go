// Package ironic is the agent's client of the Ironic API: version
// discovery, lookup and heartbeat, with IPA's headers, microversions, error
// parsing and retry rules.
package ironic

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/ironic-go/ironic-agent/internal/logging"
)

// Version is an Ironic API microversion.
type Version struct{ Major, Minor int }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less orders versions.
func (v Version) Less(o Version) bool {
	return v.Major < o.Major || v.Major == o.Major && v.Minor < o.Minor
}

// ParseVersion parses "X.Y".
func ParseVersion(s string) (Version, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ".")
	ma, err1 := strconv.Atoi(a)
	mi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || ma < 0 || mi < 0 {
		return Version{}, fmt.Errorf("bad API version %q: want X.Y", s)
	}
	return Version{ma, mi}, nil
}

// Microversions (all 1.x) that change what the agent sends.
const (
	// MinMinor is assumed when discovery fails (IPA's MIN_IRONIC_VERSION).
	MinMinor = 31
	// AgentVersionMinor adds agent_version to heartbeats.
	AgentVersionMinor = 36
	// TokenMinor issues agent_token on lookup.
	TokenMinor = 62
	// VerifyCAMinor accepts agent_verify_ca (and enables auto TLS).
	VerifyCAMinor = 68
)

// MinVersion is assumed when discovery fails.
func MinVersion() Version { return Version{1, MinMinor} }

// AtLeast tells whether v >= 1.minor.
func (v Version) AtLeast(minor int) bool { return !v.Less(Version{1, minor}) }

func minV(a, b Version) Version {
	if a.Less(b) {
		return a
	}
	return b
}

// Client talks to Ironic. Several base URLs are tried in order; the first
// that answers is moved to the front.
type Client struct {
	HTTP *http.Client
	// RequestID is sent as X-OpenStack-Request-ID when set.
	RequestID string
	Log       *slog.Logger
	// TrustedCAs names what HTTP verifies Ironic's certificate against
	// ("the CA file /etc/ca.pem"); a certificate error says it, since
	// the wrong CA file is the usual cause. Empty: not said.
	TrustedCAs string

	mu       sync.Mutex
	urls     []string
	version  *Version
	override *Version
	// tlsSaid: the TLS version and suite of a connection to Ironic were
	// logged (once: what an audit of FIPS mode asks for).
	tlsSaid bool
}

// NewClient returns a client of the given API URLs. override, when not
// empty, replaces version discovery (ipa-ironic-api-version).
func NewClient(urls []string, hc *http.Client, override string) (*Client, error) {
	if len(urls) == 0 {
		return nil, errors.New("no Ironic API URL")
	}
	c := &Client{HTTP: hc, urls: append([]string(nil), urls...)}
	for i, u := range c.urls {
		c.urls[i] = strings.TrimRight(u, "/")
	}
	if override != "" {
		v, err := ParseVersion(override)
		if err != nil {
			return nil, err
		}
		c.override = &v
	}
	return c, nil
}

func (c *Client) log() *slog.Logger {
	return logging.OrDiscard(c.Log)
}

// sayTLS logs, once, the protocol and cipher suite of a connection to
// Ironic.
func (c *Client) sayTLS(url string, st *tls.ConnectionState) {
	c.mu.Lock()
	said := c.tlsSaid
	c.tlsSaid = true
	c.mu.Unlock()
	if !said {
		c.log().Debug(EventOverTLS, "url", url, "version", tls.VersionName(st.Version), "cipher_suite", tls.CipherSuiteName(st.CipherSuite))
	}
}

// APIError is an error answer of Ironic, with the text taken from its
// envelope.
type APIError struct {
	Method, URL string
	Status      int
	Text        string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.URL, e.Status, e.Text)
}

// ErrorText extracts the message of an Ironic error body. Ironic wraps
// {"faultcode", "faultstring", "debuginfo"} as a JSON string inside
// {"error_message": ...}; the agent also accepts it already decoded, and the
// newer {"code", "title", "description"} form (IPA's _error_from_response).
func ErrorText(body []byte) string {
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(body, &outer); err != nil {
		return strings.TrimSpace(string(body))
	}
	if em, ok := outer["error_message"]; ok {
		var inner map[string]any
		var s string
		if json.Unmarshal(em, &s) == nil {
			if json.Unmarshal([]byte(s), &inner) != nil {
				return s
			}
		} else {
			_ = json.Unmarshal(em, &inner)
		}
		if fs, ok := inner["faultstring"].(string); ok {
			return fs
		}
	}
	for _, k := range []string{"faultstring", "title", "description"} {
		var s string
		if v, ok := outer[k]; ok && json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return strings.TrimSpace(string(body))
}

// do sends one request to the base URLs in order until one does not give a
// connection error.
func (c *Client) do(ctx context.Context, method, path string, version *Version, body any) (int, []byte, string, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, nil, "", err
		}
	}
	c.mu.Lock()
	urls := append([]string(nil), c.urls...)
	c.mu.Unlock()
	var lastErr error
	for i, base := range urls {
		u := base + path
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(payload))
		if err != nil {
			return 0, nil, u, err
		}
		if payload == nil {
			req.Body = http.NoBody
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if c.RequestID != "" {
			req.Header.Set("X-OpenStack-Request-ID", c.RequestID)
		}
		if version != nil {
			req.Header.Set("X-OpenStack-Ironic-API-Version", version.String())
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			lastErr = fmt.Errorf("%s %s: %w", method, u, c.transportError(err))
			if ctx.Err() != nil {
				return 0, nil, u, lastErr
			}
			continue
		}
		if resp.TLS != nil {
			c.sayTLS(u, resp.TLS)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if err != nil {
			lastErr = fmt.Errorf("%s %s: reading reply: %w", method, u, err)
			continue
		}
		if i > 0 {
			c.mu.Lock()
			c.urls = append([]string{base}, without(c.urls, base)...)
			c.mu.Unlock()
		}
		return resp.StatusCode, data, u, nil
	}
	return 0, nil, "", lastErr
}

// transportError drops the method and URL that a *url.Error repeats (the
// caller names them) and, when Ironic's certificate did not verify, adds
// what it was verified against.
func (c *Client) transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var cv *tls.CertificateVerificationError
	if c.TrustedCAs != "" && errors.As(err, &cv) {
		return fmt.Errorf("%w (Ironic's certificate was verified against %s)", err, c.TrustedCAs)
	}
	return err
}

func without(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// APIVersion returns the server's default (maximum) microversion,
// discovered once with GET /. On failure it returns MinVersion, as IPA does,
// and tries again next time.
func (c *Client) APIVersion(ctx context.Context) Version {
	v, err := c.DiscoverVersion(ctx)
	if err != nil {
		c.log().Warn("Ironic API version discovery failed; assuming the minimum", "error", err, "assumed", MinVersion().String())
		return MinVersion()
	}
	return v
}

// DiscoverVersion is APIVersion that fails when Ironic could not be asked:
// no answer (a refused connection, a TLS handshake that timed out) or a
// 5xx. An answer without a usable version document still gives
// MinVersion, as IPA assumes for an Ironic that old.
func (c *Client) DiscoverVersion(ctx context.Context) (Version, error) {
	c.mu.Lock()
	if c.override != nil {
		v := *c.override
		c.mu.Unlock()
		return v, nil
	}
	if c.version != nil {
		v := *c.version
		c.mu.Unlock()
		return v, nil
	}
	c.mu.Unlock()
	status, body, u, err := c.do(ctx, http.MethodGet, "/", nil, nil)
	if err != nil {
		return Version{}, fmt.Errorf("version discovery (GET / of Ironic): %w", err)
	}
	if status >= 500 {
		return Version{}, &APIError{Method: http.MethodGet, URL: u, Status: status, Text: ErrorText(body)}
	}
	if status != http.StatusOK {
		c.log().Warn("Ironic API version discovery failed; assuming the minimum", "url", u, "status", status, "assumed", MinVersion().String())
		return MinVersion(), nil
	}
	var doc struct {
		DefaultVersion struct {
			Version string `json:"version"`
		} `json:"default_version"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		c.log().Warn("Ironic root document is not JSON; assuming the minimum API version", "url", u, "error", err)
		return MinVersion(), nil
	}
	v, err := ParseVersion(doc.DefaultVersion.Version)
	if err != nil {
		c.log().Warn("Ironic root document has no usable default_version", "url", u, "error", err)
		return MinVersion(), nil
	}
	c.mu.Lock()
	c.version = &v
	c.mu.Unlock()
	return v, nil
}
