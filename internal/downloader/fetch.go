package downloader

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/clock"
)

// fetcher gets URLs the way get-resource.sh's curl does (proxies from the
// environment, CURL_INSECURE, file:// URLs), and retries what a retry can
// mend: a refused or cut connection, a 5xx or 429 reply.
type fetcher struct {
	client   *http.Client
	log      *slog.Logger
	verbose  bool
	attempts int
	backoff  time.Duration
}

func newFetcher(cfg Config, log *slog.Logger, attempts int, backoff time.Duration) *fetcher {
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		ForceAttemptHTTP2:     true,
	}
	if cfg.Insecure {
		// CURL_INSECURE=true is curl's --insecure: the operator's choice.
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	}
	return &fetcher{client: &http.Client{Transport: tr}, log: log, verbose: cfg.Verbose, attempts: attempts, backoff: backoff}
}

// reply is what a GET got: the status and headers of the last response.
type reply struct {
	status int
	proto  string
	header http.Header
}

// retryable marks a failure another attempt may not meet.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// toFile GETs u into f (truncated first, and again before each retry),
// sending If-None-Match when etag is set. The body is kept only for a
// 200; the digest is that of the body written.
func (f *fetcher) toFile(ctx context.Context, u, etag string, out *os.File) (reply, string, error) {
	var rep reply
	var sum string
	err := f.retry(ctx, u, func() error {
		if err := out.Truncate(0); err != nil {
			return err
		}
		if _, err := out.Seek(0, io.SeekStart); err != nil {
			return err
		}
		var body io.ReadCloser
		var err error
		rep, body, err = f.get(ctx, u, etag)
		if err != nil {
			return err
		}
		defer body.Close()
		if rep.status != http.StatusOK {
			return nil
		}
		h := sha256.New()
		w := &fileWriter{f: out}
		if _, err := io.Copy(io.MultiWriter(w, h), body); err != nil {
			if w.err != nil {
				return fmt.Errorf("writing %s: %w", out.Name(), w.err)
			}
			return retryable{fmt.Errorf("reading the body: %w", err)}
		}
		sum = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	return rep, sum, err
}

// small GETs a small document (a checksum or header file) whole.
func (f *fetcher) small(ctx context.Context, u string) (reply, []byte, error) {
	var rep reply
	var data []byte
	err := f.retry(ctx, u, func() error {
		var body io.ReadCloser
		var err error
		rep, body, err = f.get(ctx, u, "")
		if err != nil {
			return err
		}
		defer body.Close()
		data, err = io.ReadAll(io.LimitReader(body, 1<<20+1))
		if err != nil {
			return retryable{fmt.Errorf("reading the body: %w", err)}
		}
		if len(data) > 1<<20 {
			return fmt.Errorf("more than 1 MiB: not a checksum or header file")
		}
		return nil
	})
	return rep, data, err
}

func (f *fetcher) retry(ctx context.Context, u string, attempt func() error) error {
	delay := f.backoff
	for n := 1; ; n++ {
		err := attempt()
		var r retryable
		if err == nil || !errors.As(err, &r) || n >= f.attempts || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("GET %s: %w", u, err)
			}
			return nil
		}
		f.log.Warn("download failed; retrying", "url", u, "attempt", n, "of", f.attempts, "in", delay, "err", err)
		if err := clock.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("GET %s: %w (giving up: %v)", u, r.err, err)
		}
		delay *= 2
	}
}

// get issues one request. A status other than 200, 304 and 404 is an
// error; 5xx and 429 are retryable ones.
func (f *fetcher) get(ctx context.Context, u, etag string) (reply, io.ReadCloser, error) {
	if strings.HasPrefix(u, "file://") {
		return getFile(u)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return reply{}, nil, err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if f.verbose {
		f.log.Info("request", "method", req.Method, "url", u, "if_none_match", etag)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return reply{}, nil, err
		}
		return reply{}, nil, retryable{err}
	}
	rep := reply{status: resp.StatusCode, proto: resp.Proto, header: resp.Header}
	if f.verbose {
		f.log.Info("response", "url", u, "status", resp.Status, "headers", dumpHeaders(rep))
	}
	switch {
	case resp.StatusCode == http.StatusOK, resp.StatusCode == http.StatusNotModified, resp.StatusCode == http.StatusNotFound:
		return rep, resp.Body, nil
	}
	resp.Body.Close()
	err = fmt.Errorf("the server answered %s", resp.Status)
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return rep, nil, retryable{err}
	}
	return rep, nil, err
}

// getFile reads a file:// URL as curl does: a missing file is a 404.
func getFile(u string) (reply, io.ReadCloser, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return reply{}, nil, err
	}
	fh, err := os.Open(pu.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return reply{status: http.StatusNotFound, proto: "FILE", header: http.Header{}}, io.NopCloser(strings.NewReader("")), nil
	}
	if err != nil {
		return reply{}, nil, err
	}
	return reply{status: http.StatusOK, proto: "FILE", header: http.Header{}}, fh, nil
}

// dumpHeaders writes a reply as curl's --dump-header does: the status
// line, then one header a line. ETag keeps the spelling get-resource.sh's
// awk looks for, so the original reads the file this one writes.
func dumpHeaders(r reply) string {
	var b strings.Builder
	proto := r.proto
	if proto == "" || proto == "FILE" {
		proto = "HTTP/1.1"
	}
	fmt.Fprintf(&b, "%s %d %s\r\n", proto, r.status, http.StatusText(r.status))
	names := make([]string, 0, len(r.header))
	for k := range r.header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		name := k
		if strings.EqualFold(k, "etag") {
			name = "ETag"
		}
		for _, v := range r.header[k] {
			fmt.Fprintf(&b, "%s: %s\r\n", name, v)
		}
	}
	b.WriteString("\r\n")
	return b.String()
}

// fileWriter keeps the file's own write error apart from the body's read
// errors: a full disk is not retried, a cut connection is.
type fileWriter struct {
	f   *os.File
	err error
}

func (w *fileWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		w.err = err
	}
	return n, err
}
