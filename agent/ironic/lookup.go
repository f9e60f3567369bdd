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
	"sort"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/clock"
)

// LookupConfig is the "config" part of a lookup reply: the keys Ironic
// 21.4.4 to 35 send that this agent applies, each decoded on its own so
// that one key of an unexpected type is ignored (and reported in Ignored)
// rather than failing the lookup, as IPA ignores what it cannot apply.
type LookupConfig struct {
	HeartbeatTimeout            float64
	AgentToken                  *string
	AgentTokenRequired          bool
	DisableDeepImageInspection  *bool
	PermittedImageFormats       []string
	EnableBIOSBootloaderInstall *bool
	AgentMD5ChecksumEnable      *bool
	AgentSkipBMCDetect          *bool
	// TLSMinVersion and TLSCipherSuites are Ironic 2026.x's agent TLS
	// settings; "" when unset or null.
	TLSMinVersion, TLSCipherSuites string

	// Ignored lists the keys this agent knows but could not use (a wrong
	// type), with the reason. Unused lists the keys sent that this agent
	// has no use for (metrics, agent_containers, keys of a newer Ironic).
	Ignored []string
	Unused  []string
}

// decodeFormats reads permitted_image_formats: a list, or the
// comma-separated string an oslo ListOpt also accepts.
func decodeFormats(c *LookupConfig, r json.RawMessage) error {
	var s string
	if json.Unmarshal(r, &s) == nil {
		c.PermittedImageFormats = []string{}
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				c.PermittedImageFormats = append(c.PermittedImageFormats, f)
			}
		}
		return nil
	}
	var l []string
	if err := json.Unmarshal(r, &l); err != nil {
		return err
	}
	if l == nil {
		return nil // null: Ironic's default applies
	}
	c.PermittedImageFormats = l
	return nil
}

// decodeInto sets *dst only when r decodes whole: a value of the wrong
// type leaves the field as it was.
func decodeInto[T any](r json.RawMessage, dst *T) error {
	var v T
	if err := json.Unmarshal(r, &v); err != nil {
		return err
	}
	*dst = v
	return nil
}

func decodeOptionalString(r json.RawMessage, dst *string) error {
	var p *string
	if err := json.Unmarshal(r, &p); err != nil {
		return err
	}
	if p != nil {
		*dst = *p
	}
	return nil
}

// ParseLookupConfig decodes each key of a lookup config (or of
// set_node_info's config) on its own.
func ParseLookupConfig(raw json.RawMessage) (LookupConfig, error) {
	var c LookupConfig
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return c, err
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := keys[k]
		var err error
		switch k {
		case "heartbeat_timeout":
			if err = decodeInto(v, &c.HeartbeatTimeout); err != nil {
				return c, fmt.Errorf("heartbeat_timeout: %w", err)
			}
		case "agent_token":
			err = decodeInto(v, &c.AgentToken)
		case "agent_token_required":
			err = decodeInto(v, &c.AgentTokenRequired)
		case "disable_deep_image_inspection":
			err = decodeInto(v, &c.DisableDeepImageInspection)
		case "permitted_image_formats":
			err = decodeFormats(&c, v)
		case "enable_bios_bootloader_install":
			err = decodeInto(v, &c.EnableBIOSBootloaderInstall)
		case "agent_md5_checksum_enable":
			err = decodeInto(v, &c.AgentMD5ChecksumEnable)
		case "agent_skip_bmc_detect":
			err = decodeInto(v, &c.AgentSkipBMCDetect)
		case "tls_min_version":
			err = decodeOptionalString(v, &c.TLSMinVersion)
		case "tls_cipher_suites":
			err = decodeOptionalString(v, &c.TLSCipherSuites)
		default:
			c.Unused = append(c.Unused, k)
		}
		if err != nil {
			c.Ignored = append(c.Ignored, fmt.Sprintf("%s: %v", k, err))
		}
	}
	return c, nil
}

// LookupResult is a successful lookup.
type LookupResult struct {
	// Node is the node document (uuid, properties, instance_info,
	// driver_internal_info, links) as Ironic sent it.
	Node     map[string]any
	NodeUUID string
	Config   LookupConfig
}

// ErrConflict marks a 409 answer (the node is locked).
var errConflict = errors.New("conflict")

// IsConflict tells whether err is a 409 from Ironic.
func IsConflict(err error) bool { return errors.Is(err, errConflict) }

type conflictError struct{ *APIError }

func (e conflictError) Unwrap() error { return errConflict }

// Lookup makes one lookup attempt: GET /v1/lookup?addresses=...[&node_uuid=]
// at min(server version, 1.62). When the version could not be discovered
// (no answer), the attempt fails and the caller's loop tries again: a
// lookup at the minimum version gets no agent token from an Ironic that
// requires one, and every heartbeat after it would be refused.
func (c *Client) Lookup(ctx context.Context, macs []string, nodeUUID string) (*LookupResult, error) {
	sv, err := c.DiscoverVersion(ctx)
	if err != nil {
		return nil, err
	}
	v := minV(sv, Version{1, TokenMinor})
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
		cfg, err := ParseLookupConfig(doc.Config)
		if err != nil {
			return nil, fmt.Errorf("lookup reply from %s: bad config: %w", u, err)
		}
		res.Config = cfg
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
	return clock.SleepOn(ctx, clock.Real{}, d)
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
		c.log().Warn(EventLookupRetrying, "attempt", n, "error", err)
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
