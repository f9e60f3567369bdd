package ironic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// LookupConfig is the "config" part of a lookup reply (Ironic 21.4.4 keys
// plus the newer ones IPA master understands).
type LookupConfig struct {
	HeartbeatTimeout            float64  `json:"heartbeat_timeout"`
	AgentToken                  *string  `json:"agent_token"`
	AgentTokenRequired          bool     `json:"agent_token_required"`
	DisableDeepImageInspection  *bool    `json:"disable_deep_image_inspection"`
	PermittedImageFormats       []string `json:"permitted_image_formats"`
	EnableBIOSBootloaderInstall *bool    `json:"enable_bios_bootloader_install"`
	AgentMD5ChecksumEnable      *bool    `json:"agent_md5_checksum_enable"`
	AgentSkipBMCDetect          *bool    `json:"agent_skip_bmc_detect"`
}

// LookupResult is a successful lookup.
type LookupResult struct {
	// Node is the node document (uuid, properties, instance_info,
	// driver_internal_info, links) as Ironic sent it.
	Node     map[string]any
	NodeUUID string
	Config   LookupConfig
	// RawConfig is the whole config object.
	RawConfig map[string]any
}

// ErrConflict marks a 409 answer (the node is locked).
var errConflict = errors.New("conflict")

// IsConflict tells whether err is a 409 from Ironic.
func IsConflict(err error) bool { return errors.Is(err, errConflict) }

type conflictError struct{ *APIError }

func (e conflictError) Unwrap() error { return errConflict }

// Lookup makes one lookup attempt: GET /v1/lookup?addresses=...[&node_uuid=]
// at min(server version, 1.62).
func (c *Client) Lookup(ctx context.Context, macs []string, nodeUUID string) (*LookupResult, error) {
	v := minV(c.APIVersion(ctx), Version{1, TokenMinor})
	q := url.Values{}
	q.Set("addresses", strings.Join(macs, ","))
	if nodeUUID != "" {
		q.Set("node_uuid", nodeUUID)
	}
	status, body, u, err := c.do(ctx, http.MethodGet, "/v1/lookup?"+q.Encode(), &v, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		e := &APIError{Method: http.MethodGet, URL: u, Status: status, Text: ErrorText(body)}
		if status == http.StatusConflict {
			return nil, conflictError{e}
		}
		return nil, e
	}
	return ParseLookup(body, u)
}

// ParseLookup parses a lookup reply from u; it needs node.uuid and a
// heartbeat_timeout.
func ParseLookup(body []byte, u string) (*LookupResult, error) {
	var doc struct {
		Node             map[string]any  `json:"node"`
		Config           json.RawMessage `json:"config"`
		HeartbeatTimeout *float64        `json:"heartbeat_timeout"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("lookup reply from %s is not JSON: %w", u, err)
	}
	uuid, _ := doc.Node["uuid"].(string)
	if uuid == "" {
		return nil, fmt.Errorf("lookup reply from %s has no node.uuid", u)
	}
	res := &LookupResult{Node: doc.Node, NodeUUID: uuid}
	if len(doc.Config) > 0 && string(doc.Config) != "null" {
		if err := json.Unmarshal(doc.Config, &res.Config); err != nil {
			return nil, fmt.Errorf("lookup reply from %s: bad config: %w", u, err)
		}
		_ = json.Unmarshal(doc.Config, &res.RawConfig)
	} else if doc.HeartbeatTimeout != nil {
		// Legacy reply without config.
		res.Config.HeartbeatTimeout = *doc.HeartbeatTimeout
	}
	if res.Config.HeartbeatTimeout <= 0 || math.IsNaN(res.Config.HeartbeatTimeout) {
		return nil, fmt.Errorf("lookup reply from %s: no usable heartbeat_timeout", u)
	}
	return res, nil
}

// Backoff holds the injected time and randomness of the retry loops, so
// tests can check the maths without sleeping.
type Backoff struct {
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Float64 returns a uniform number in [0, 1).
	Float64 func() float64
}

// NowOrReal returns the injected time, else time.Now.
func (b Backoff) NowOrReal() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// SleepOrReal sleeps d (injected or real), ending early with ctx.
func (b Backoff) SleepOrReal(ctx context.Context, d time.Duration) error {
	if b.Sleep != nil {
		return b.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Float returns the injected random number, else a uniform one in [0, 1).
func (b Backoff) Float() float64 {
	if b.Float64 != nil {
		return b.Float64()
	}
	return rand.Float64()
}

// uniform returns a duration uniformly in [lo, hi].
func (b Backoff) uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(b.Float()*float64(hi-lo))
}

// LookupWait is the sleep before lookup attempt n+1 (n >= 1 failed
// attempts so far): uniform in [interval, min(max(2^(n-1), interval), 60)]
// seconds (tenacity's wait_random_exponential, as IPA uses).
func LookupWait(b Backoff, n int, interval time.Duration) time.Duration {
	exp := 60 * time.Second
	if n-1 < 6 {
		exp = time.Duration(1<<(n-1)) * time.Second
	}
	hi := max(exp, interval)
	hi = min(hi, 60*time.Second)
	return b.uniform(interval, max(hi, interval))
}

// conflictWait is the extra sleep after the n-th 409 (0-based): 5, 10,
// then 30 s for good.
func conflictWait(n int) time.Duration {
	switch n {
	case 0:
		return 5 * time.Second
	case 1:
		return 10 * time.Second
	}
	return 30 * time.Second
}

// LookupNode retries Lookup until it succeeds or timeout has passed
// (ipa-lookup-timeout), sleeping LookupWait between attempts and 5, 10,
// then 30 s more after each 409.
func (c *Client) LookupNode(ctx context.Context, b Backoff, macs []string, nodeUUID string, timeout, interval time.Duration) (*LookupResult, error) {
	deadline := b.NowOrReal().Add(timeout)
	conflicts := 0
	for n := 1; ; n++ {
		res, err := c.Lookup(ctx, macs, nodeUUID)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.log().Warn("lookup failed; retrying", "attempt", n, "error", err)
		wait := LookupWait(b, n, interval)
		if IsConflict(err) {
			wait += conflictWait(conflicts)
			conflicts++
		}
		if !b.NowOrReal().Add(wait).Before(deadline) {
			return nil, fmt.Errorf("lookup of %s gave up after %d attempts in %s: %w", strings.Join(macs, ","), n, timeout, err)
		}
		if err := b.SleepOrReal(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// Heartbeat is the body of POST /v1/heartbeat/{uuid}.
type Heartbeat struct {
	CallbackURL string
	// Token is sent from 1.62 on (JSON null when empty).
	Token string
	// AgentVersion is sent from 1.36 on.
	AgentVersion string
	// VerifyCA is the auto-TLS certificate, sent from 1.68 on when set.
	VerifyCA string
}

// SendHeartbeat posts one heartbeat at min(server version, 1.68). Success
// is exactly HTTP 202.
func (c *Client) SendHeartbeat(ctx context.Context, nodeUUID string, hb Heartbeat) error {
	v := minV(c.APIVersion(ctx), Version{1, VerifyCAMinor})
	body := map[string]any{"callback_url": hb.CallbackURL}
	if v.AtLeast(TokenMinor) {
		if hb.Token != "" {
			body["agent_token"] = hb.Token
		} else {
			body["agent_token"] = nil
		}
	}
	if v.AtLeast(AgentVersionMinor) {
		body["agent_version"] = hb.AgentVersion
	}
	if v.AtLeast(VerifyCAMinor) && hb.VerifyCA != "" {
		body["agent_verify_ca"] = hb.VerifyCA
	}
	status, data, u, err := c.do(ctx, http.MethodPost, "/v1/heartbeat/"+url.PathEscape(nodeUUID), &v, body)
	if err != nil {
		return err
	}
	if status == http.StatusAccepted {
		return nil
	}
	e := &APIError{Method: http.MethodPost, URL: u, Status: status, Text: ErrorText(data)}
	if status == http.StatusConflict {
		return conflictError{e}
	}
	return e
}
