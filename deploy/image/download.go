package image

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// IPA's download defaults (image_download_connection_timeout,
// image_download_connection_retries, image_download_connection_retry_interval).
const (
	DefaultConnectionTimeout = 60 * time.Second
	DefaultRetries           = 9
	DefaultRetryInterval     = 10 * time.Second
)

// DownloadOptions says how to reach image servers.
type DownloadOptions struct {
	// Client, when set, is used as is (its transport decides proxies and
	// TLS); otherwise one is built from TLS, Proxies and NoProxy.
	Client *http.Client
	// TLS is the client TLS configuration (the agent's insecure/cafile/
	// certfile settings toward Ironic apply to image downloads too).
	TLS *tls.Config
	// Proxies maps a URL scheme ("http", "https") to a proxy URL, as
	// image_info.proxies does.
	Proxies map[string]string
	// NoProxy is image_info.no_proxy: comma-separated hosts, domains
	// (".example.com" or "example.com"), IPs, CIDRs, or "*".
	NoProxy string
	// Header is added to every image request (e.g. Authorization).
	Header http.Header
	// ConnectionTimeout bounds connecting and any wait without data.
	ConnectionTimeout time.Duration
	// Retries is how many times a failed connection or a cut transfer is
	// retried (resumed), and how many times a whole attempt is repeated.
	Retries int
	// RetryInterval is the pause between retries.
	RetryInterval time.Duration
	// MaxDuration bounds one whole image download attempt, connecting and
	// resuming included (IPA's image_download_max_duration); 0: no bound.
	MaxDuration time.Duration
	Logger      *slog.Logger
}

func (o *DownloadOptions) withDefaults() DownloadOptions {
	c := *o
	if c.ConnectionTimeout <= 0 {
		c.ConnectionTimeout = DefaultConnectionTimeout
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.RetryInterval < 0 {
		c.RetryInterval = 0
	}
	c.Logger = logging.OrDiscard(c.Logger)
	if c.Client == nil {
		c.Client = newHTTPClient(c.TLS, c.Proxies, c.NoProxy, c.ConnectionTimeout)
	}
	return c
}

// NewDownloadOptions returns IPA's defaults.
func NewDownloadOptions() DownloadOptions {
	return DownloadOptions{ConnectionTimeout: DefaultConnectionTimeout, Retries: DefaultRetries, RetryInterval: DefaultRetryInterval}
}

func newHTTPClient(tlsConf *tls.Config, proxies map[string]string, noProxy string, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 proxyFunc(proxies, noProxy),
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		ForceAttemptHTTP2:     true,
		// A larger read buffer than the 4 KiB default cuts syscalls per MiB.
		ReadBufferSize: 256 << 10,
		// Images are usually already compressed; transparent gzip would
		// also change the bytes the checksum is computed over.
		DisableCompression: true,
	}
	return &http.Client{Transport: tr}
}

// proxyFunc picks the proxy by URL scheme unless the host matches no_proxy,
// as python-requests does with a proxies dict. Unlike net/http's
// environment proxies it also proxies loopback addresses when asked to.
func proxyFunc(proxies map[string]string, noProxy string) func(*http.Request) (*url.URL, error) {
	if len(proxies) == 0 {
		// python-requests honours the environment's proxies when none
		// are given; so does this.
		return http.ProxyFromEnvironment
	}
	return func(r *http.Request) (*url.URL, error) {
		p := proxies[r.URL.Scheme]
		if p == "" || bypassProxy(r.URL, noProxy) {
			return nil, nil
		}
		u, err := url.Parse(p)
		if err != nil || u.Host == "" {
			// "proxy.example:3128" without a scheme, as requests accepts.
			if u2, err2 := url.Parse("http://" + p); err2 == nil {
				return u2, nil
			}
			return nil, fmt.Errorf("invalid %s proxy %q: %v", r.URL.Scheme, p, err)
		}
		return u, nil
	}
}

// bypassProxy reports whether u's host matches an entry of noProxy.
func bypassProxy(u *url.URL, noProxy string) bool {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	ip := net.ParseIP(host)
	for _, e := range strings.Split(noProxy, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if e == "*" {
			return true
		}
		if _, cidr, err := net.ParseCIDR(e); err == nil {
			if ip != nil && cidr.Contains(ip) {
				return true
			}
			continue
		}
		if h, p, err := net.SplitHostPort(e); err == nil {
			if p != port {
				continue
			}
			e = h
		}
		e = strings.TrimPrefix(e, "*")
		if host == strings.TrimPrefix(e, ".") || strings.HasSuffix(host, "."+strings.TrimPrefix(e, ".")) {
			return true
		}
	}
	return false
}

// statusError is a non-success HTTP reply.
type statusError struct {
	url    string
	status int
	body   string
}

func (e *statusError) Error() string {
	msg := fmt.Sprintf("received status code %d from %s, expected 200", e.status, e.url)
	if e.body != "" {
		msg += ". Response body: " + e.body
	}
	return msg
}

// fatal reports whether retrying cannot help: a 4xx says the request itself
// is wrong (missing, forbidden, expired temporary URL).
func (e *statusError) fatal() bool { return e.status >= 400 && e.status < 500 }

// errChanged means the file on the server changed under a resumed download.
var errChanged = errors.New("the image changed on the server during the download (ETag or Last-Modified differs)")

// remoteFile is one image URL and what its first reply said about it.
type remoteFile struct {
	o       *DownloadOptions
	url     string
	size    int64 // -1 when the server sent no length
	etag    string
	lastMod string
	ranges  bool
}

// get issues a GET for [off, end) (end < 0: to the end of the file) and
// returns the reply, or an error saying what the server did.
func (f *remoteFile) get(ctx context.Context, off, end int64, validate bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range f.o.Header {
		req.Header[k] = v
	}
	if off > 0 || end >= 0 {
		r := "bytes=" + strconv.FormatInt(off, 10) + "-"
		if end >= 0 {
			r += strconv.FormatInt(end-1, 10)
		}
		req.Header.Set("Range", r)
		// If-Range makes a server whose file changed send the whole new
		// file (200) instead of a splice of two versions (206).
		switch {
		case f.etag != "" && !strings.HasPrefix(f.etag, "W/"):
			req.Header.Set("If-Range", f.etag)
		case f.lastMod != "":
			req.Header.Set("If-Range", f.lastMod)
		}
	}
	resp, err := f.o.Client.Do(req)
	if err != nil {
		return nil, err
	}
	want := http.StatusOK
	if off > 0 || end >= 0 {
		want = http.StatusPartialContent
	}
	if resp.StatusCode == want || resp.StatusCode == http.StatusOK {
		if validate && !f.sameFile(resp) {
			resp.Body.Close()
			return nil, errChanged
		}
		return resp, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	return nil, &statusError{url: f.url, status: resp.StatusCode, body: strings.TrimSpace(string(body))}
}

// sameFile compares a reply's validators with the first reply's.
func (f *remoteFile) sameFile(resp *http.Response) bool {
	if f.etag != "" && resp.Header.Get("ETag") != "" && resp.Header.Get("ETag") != f.etag {
		return false
	}
	if f.lastMod != "" && resp.Header.Get("Last-Modified") != "" && resp.Header.Get("Last-Modified") != f.lastMod {
		return false
	}
	if f.size >= 0 {
		if total := totalSize(resp); total >= 0 && total != f.size {
			return false
		}
	}
	return true
}

// totalSize is the full file size a reply states, -1 if it does not.
func totalSize(resp *http.Response) int64 {
	if resp.StatusCode == http.StatusPartialContent {
		cr := resp.Header.Get("Content-Range")
		if i := strings.LastIndexByte(cr, '/'); i >= 0 {
			if n, err := strconv.ParseInt(cr[i+1:], 10, 64); err == nil {
				return n
			}
		}
		return -1
	}
	return resp.ContentLength
}

// rangeStart is the first byte a 206 reply carries.
func rangeStart(resp *http.Response) (int64, bool) {
	cr := strings.TrimPrefix(resp.Header.Get("Content-Range"), "bytes ")
	i := strings.IndexByte(cr, '-')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(cr[:i], 10, 64)
	return n, err == nil
}

// openImage connects to the first URL that answers, retrying connection
// errors and 5xx replies; a 4xx is final and no other URL is tried (IPA's
// ImageDownloadFatalError). The returned cancel ends the reply's request.
func openImage(ctx context.Context, o *DownloadOptions, urls []string) (*remoteFile, *http.Response, context.CancelFunc, error) {
	var details []string
	for _, u := range urls {
		f := &remoteFile{o: o, url: u, size: -1}
		resp, cancel, err := f.connect(ctx)
		if err != nil {
			var se *statusError
			if ctx.Err() != nil || (errors.As(err, &se) && se.fatal()) {
				return nil, nil, nil, errors.Join(err, ctx.Err())
			}
			details = append(details, fmt.Sprintf("URL: %s; Error: %v", u, err))
			continue
		}
		f.size = resp.ContentLength
		f.etag = resp.Header.Get("ETag")
		f.lastMod = resp.Header.Get("Last-Modified")
		f.ranges = resp.Header.Get("Accept-Ranges") == "bytes"
		return f, resp, cancel, nil
	}
	return nil, nil, nil, errors.New(strings.Join(details, "\n "))
}

// connect GETs the whole file, with IPA's connection retries.
func (f *remoteFile) connect(ctx context.Context) (*http.Response, context.CancelFunc, error) {
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithCancel(ctx)
		resp, err := f.get(rctx, 0, -1, false)
		if err == nil {
			return resp, cancel, nil
		}
		cancel()
		var se *statusError
		if ctx.Err() != nil || (errors.As(err, &se) && se.fatal()) || attempt >= f.o.Retries {
			return nil, nil, err
		}
		f.o.Logger.Warn("unable to connect to the image server, retrying", "url", f.url, "attempt", attempt+1, "error", err)
		if err := clock.Sleep(ctx, f.o.RetryInterval); err != nil {
			return nil, nil, err
		}
	}
}

// streamReader reads a remoteFile from start to end, resuming with Range
// requests after a cut or a stall, and counts the bytes. The hash is fed
// by the caller's TeeReader, so every byte is hashed exactly once even
// when a resume has to skip bytes of a server's full reply.
type streamReader struct {
	ctx     context.Context
	f       *remoteFile
	resp    *http.Response
	cancel  context.CancelFunc
	stalled *atomic.Bool // set when the stall timer cancelled the request
	timer   *time.Timer
	off     int64
	resumes int
	eof     bool
	n       *atomic.Int64 // bytes received, for progress
}

func newStreamReader(ctx context.Context, f *remoteFile, resp *http.Response, cancel context.CancelFunc, counter *atomic.Int64) *streamReader {
	s := &streamReader{ctx: ctx, f: f, n: counter}
	s.attach(resp, cancel)
	return s
}

// attach adopts a reply whose request context cancel cancels; the stall
// timer cancels it when no byte arrives for ConnectionTimeout.
func (s *streamReader) attach(resp *http.Response, cancel context.CancelFunc) {
	if s.timer != nil {
		s.timer.Stop()
	}
	stalled := new(atomic.Bool)
	s.resp, s.cancel, s.stalled = resp, cancel, stalled
	s.timer = time.AfterFunc(s.f.o.ConnectionTimeout, func() { stalled.Store(true); cancel() })
}

func (s *streamReader) Read(p []byte) (int, error) {
	for {
		if s.eof {
			return 0, io.EOF
		}
		if s.resp == nil {
			if err := s.resume(); err != nil {
				return 0, err
			}
		}
		n, err := s.resp.Body.Read(p)
		if n > 0 {
			if s.timer != nil {
				s.timer.Reset(s.f.o.ConnectionTimeout)
			}
			s.off += int64(n)
			s.n.Add(int64(n))
		}
		if err == nil {
			return n, nil
		}
		if errors.Is(err, io.EOF) && (s.f.size < 0 || s.off == s.f.size) {
			s.eof = true
			s.close()
			return n, io.EOF
		}
		if s.ctx.Err() != nil {
			s.close()
			return n, s.ctx.Err()
		}
		reason := err
		if errors.Is(err, io.EOF) {
			reason = io.ErrUnexpectedEOF
		}
		if s.stalled != nil && s.stalled.Load() {
			reason = fmt.Errorf("no data for %s", s.f.o.ConnectionTimeout)
		}
		s.close()
		if s.resumes >= s.f.o.Retries {
			return n, fmt.Errorf("transfer from %s cut at byte %d (%v); gave up after %d resumes", s.f.url, s.off, reason, s.resumes)
		}
		s.f.o.Logger.Warn("image transfer cut, resuming", "url", s.f.url, "offset", s.off, "error", reason)
		if n > 0 {
			return n, nil
		}
	}
}

func (s *streamReader) close() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.resp != nil {
		s.resp.Body.Close()
		s.resp = nil
	}
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
}

// resume reconnects at s.off. A server without range support sends the
// whole file again; its first s.off bytes are skipped (they were hashed
// already) provided its validators show it is the same file.
func (s *streamReader) resume() error {
	for {
		s.resumes++
		if err := clock.Sleep(s.ctx, s.f.o.RetryInterval); err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(s.ctx)
		timer := time.AfterFunc(s.f.o.ConnectionTimeout, cancel)
		resp, err := s.f.get(ctx, s.off, -1, true)
		timer.Stop()
		if err == nil && resp.StatusCode == http.StatusPartialContent {
			if start, ok := rangeStart(resp); !ok || start != s.off {
				resp.Body.Close()
				err = fmt.Errorf("server answered a resume at byte %d with Content-Range %q", s.off, resp.Header.Get("Content-Range"))
			}
		}
		if err == nil && resp.StatusCode == http.StatusOK {
			if s.f.etag == "" && s.f.lastMod == "" && resp.ContentLength != s.f.size {
				resp.Body.Close()
				err = errChanged
			} else {
				s.attach(resp, cancel)
				if _, cerr := io.CopyN(io.Discard, resp.Body, s.off); cerr != nil {
					s.close()
					err = fmt.Errorf("skipping %d bytes already received: %w", s.off, cerr)
				} else {
					s.f.o.Logger.Info("image transfer resumed without range support", "url", s.f.url, "offset", s.off)
					return nil
				}
			}
		} else if err == nil {
			s.attach(resp, cancel)
			s.f.o.Logger.Info("image transfer resumed", "url", s.f.url, "offset", s.off)
			return nil
		}
		cancel()
		if errors.Is(err, errChanged) || s.ctx.Err() != nil {
			return errors.Join(err, s.ctx.Err())
		}
		var se *statusError
		if errors.As(err, &se) && se.fatal() {
			return fmt.Errorf("resuming at byte %d: %w", s.off, err)
		}
		if s.resumes >= s.f.o.Retries {
			return fmt.Errorf("resuming %s at byte %d: %w (gave up after %d attempts)", s.f.url, s.off, err, s.resumes)
		}
		s.f.o.Logger.Warn("resuming the image transfer failed, retrying", "url", s.f.url, "offset", s.off, "error", err)
	}
}

// ReadAt reads p at off with a Range request, for random access into
// qcow2 images. Cut transfers are resumed from where they stopped.
func (f *remoteFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if f.size >= 0 && off >= f.size {
		return 0, io.EOF
	}
	want := int64(len(p))
	if f.size >= 0 {
		want = min(want, f.size-off)
	}
	got := int64(0)
	for tries := 0; got < want; tries++ {
		if tries > f.o.Retries {
			return int(got), fmt.Errorf("range read of %s at byte %d failed %d times", f.url, off+got, tries)
		}
		rctx, cancel := context.WithTimeout(ctx, 4*f.o.ConnectionTimeout)
		resp, err := f.get(rctx, off+got, off+want, true)
		if err == nil && resp.StatusCode != http.StatusPartialContent {
			resp.Body.Close()
			err = fmt.Errorf("%s does not support range requests (status %d); this qcow2 image needs random access", f.url, resp.StatusCode)
			cancel()
			return int(got), err
		}
		if err != nil {
			cancel()
			var se *statusError
			if errors.Is(err, errChanged) || ctx.Err() != nil || (errors.As(err, &se) && se.fatal()) {
				return int(got), errors.Join(err, ctx.Err())
			}
			if err := clock.Sleep(ctx, f.o.RetryInterval); err != nil {
				return int(got), err
			}
			continue
		}
		n, err := io.ReadFull(resp.Body, p[got:want])
		resp.Body.Close()
		cancel()
		got += int64(n)
		if err != nil && got < want {
			if err := clock.Sleep(ctx, f.o.RetryInterval); err != nil {
				return int(got), err
			}
		}
	}
	if got < int64(len(p)) {
		return int(got), io.EOF
	}
	return int(got), nil
}
