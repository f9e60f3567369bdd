package image

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/ipaerror"
)

func TestParseImageInfo(t *testing.T) {
	sha := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, json string
		md5        bool
		want       string // error details, "" for success
	}{
		{"ok os_hash", `{"id":"i","urls":["http://x/i"],"os_hash_algo":"sha512","os_hash_value":"abc"}`, true, ""},
		{"ok checksum url", `{"id":"i","urls":["http://x/i"],"checksum":"http://x/SHA256SUMS"}`, false, ""},
		{"ok md5", `{"id":"i","urls":["http://x/i"],"checksum":"` + strings.Repeat("b", 32) + `"}`, true, ""},
		{"md5 disabled", `{"id":"i","urls":["http://x/i"],"checksum":"` + strings.Repeat("b", 32) + `"}`, false,
			"Image checksum is not available, either the 'checksum' field or the 'os_hash_algo' and 'os_hash_value' fields pair must be set for image verification."},
		{"missing id", `{"urls":["http://x/i"],"checksum":"` + sha + `"}`, true, "Image is missing 'id' field."},
		{"missing urls", `{"id":"i","checksum":"` + sha + `"}`, true, "Image is missing 'urls' field."},
		{"urls not a list", `{"id":"i","urls":"http://x/i","checksum":"` + sha + `"}`, true, "Image 'urls' must be a list with at least one element."},
		{"urls empty", `{"id":"i","urls":[],"checksum":"` + sha + `"}`, true, "Image 'urls' must be a list with at least one element."},
		{"checksum empty", `{"id":"i","urls":["u"],"checksum":""}`, true, "Image 'checksum' must be a non-empty string."},
		{"checksum number", `{"id":"i","urls":["u"],"checksum":5}`, true, "Image 'checksum' must be a non-empty string."},
		{"algo without value", `{"id":"i","urls":["u"],"os_hash_algo":"sha256"}`, true, "Image 'os_hash_value' must be a non-empty string."},
		{"value without algo", `{"id":"i","urls":["u"],"os_hash_value":"ab"}`, true, "Image 'os_hash_algo' must be a non-empty string."},
		{"no checksum", `{"id":"i","urls":["u"]}`, true,
			"Image checksum is not available, either the 'checksum' field or the 'os_hash_algo' and 'os_hash_value' fields pair must be set for image verification."},
		{"null image_info", `null`, true, "Image is missing 'id' field."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal([]byte(tc.json), &m); err != nil {
				t.Fatal(err)
			}
			_, err := ParseImageInfo(m, tc.md5)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			var e *ipaerror.Error
			if !errors.As(err, &e) || e.Type != "InvalidCommandParamsError" || e.Code != 400 || e.Details != tc.want {
				t.Fatalf("got %#v, want InvalidCommandParamsError %q", err, tc.want)
			}
		})
	}
	info, err := ParseImageInfo(map[string]any{"id": "i", "urls": []any{"http://x/i"}, "checksum": sha,
		"proxies": map[string]any{"http": "http://proxy:3128", "https": ""}, "no_proxy": ".local", "disk_format": "qcow2",
		"image_request_authorization": "QmVhcmVyIHRva2Vu"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if info.Proxies["http"] != "http://proxy:3128" || len(info.Proxies) != 1 || info.NoProxy != ".local" || info.DiskFormat != "qcow2" || info.Authorization != "Bearer token" || !info.StreamRawImages {
		t.Errorf("decoded %+v", info)
	}
}

func TestParseChecksumFile(t *testing.T) {
	h32, h64, h128 := strings.Repeat("1", 32), strings.Repeat("2", 64), strings.Repeat("3", 128)
	other := strings.Repeat("f", 64)
	for _, tc := range []struct{ name, body, url, want, err string }{
		{"bare digest", h64 + "\n", "http://x/a.img", h64, ""},
		{"bare md5", "  " + h32 + "  \n\n", "http://x/a.img", h32, ""},
		{"bare garbage", "zz\n", "http://x/a.img", "", "Invalid checksum file (No valid checksum found)"},
		{"empty", "\n \n", "http://x/a.img", "", "Empty checksum file"},
		{"GNU", other + "  b.img\n" + h64 + "  a.img\n", "http://x/dir/a.img?temp=1", h64, ""},
		{"GNU binary", "# c\n" + h128 + " *a.img\n", "http://x/a.img", h128, ""},
		{"BSD", "SHA256 (b.img) = " + other + "\nSHA256 (a.img) = " + h64 + "\n", "http://x/a.img", h64, ""},
		{"comment naming the file", "# " + h64 + "  a.img\n" + other + "  b.img\n", "http://x/a.img", "", "Checksum file does not contain name a.img"},
		{"dot is literal", h64 + "  aximg\n" + other + "  b.img\n", "http://x/a.img", "", "Checksum file does not contain name a.img"},
		{"missing", other + "  b.img\n" + other + "  c.img\n", "http://x/a.img", "", "Checksum file does not contain name a.img"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseChecksumFile(tc.body, tc.url)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseChecksum(t *testing.T) {
	for in, want := range map[string]string{
		"sha256:" + strings.Repeat("A", 64):   "sha256 " + strings.Repeat("a", 64),
		strings.Repeat("b", 128):              "sha512 " + strings.Repeat("b", 128),
		"SHA-512:" + strings.Repeat("c", 128): "sha512 " + strings.Repeat("c", 128),
		"md5:" + strings.Repeat("d", 32):      "md5 " + strings.Repeat("d", 32),
		"sha256:abc":                          "error",
		"crc32:" + strings.Repeat("e", 8):     "error",
		strings.Repeat("f", 40):               "error",
	} {
		c, err := ParseChecksum(in)
		got := c.Algorithm + " " + c.Expected
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("ParseChecksum(%q) = %q, want %q (%v)", in, got, want, err)
		}
	}
}

func TestBypassProxy(t *testing.T) {
	for _, tc := range []struct {
		url, noProxy string
		want         bool
	}{
		{"http://images.example.com/x", "example.com", true},
		{"http://images.example.com/x", ".example.com", true},
		{"http://example.com/x", ".example.com", true},
		{"http://badexample.com/x", "example.com", false},
		{"http://10.1.2.3/x", "10.0.0.0/8", true},
		{"http://11.1.2.3/x", "10.0.0.0/8", false},
		{"http://h:8080/x", "h:8080", true},
		{"http://h:8081/x", "h:8080", false},
		{"http://h/x", "*", true},
		{"http://h/x", "", false},
		{"http://H.Example.com/x", " other , EXAMPLE.com ", true},
	} {
		u, _ := url.Parse(tc.url)
		if got := bypassProxy(u, tc.noProxy); got != tc.want {
			t.Errorf("bypassProxy(%s, %q) = %v", tc.url, tc.noProxy, got)
		}
	}
}

// Downloads go through image_info.proxies unless no_proxy matches, as
// IPA's requests call does; a loopback image server is proxied too.
func TestWriteImageThroughProxy(t *testing.T) {
	img := testImage(2<<20, 40)
	srv := newImageServer(t)
	u := srv.put("disk.raw", img)
	var proxied atomic.Int64
	proxyLn := listenInRange(t, 9300, 9400)
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: "http", Host: r.URL.Host}) }}
		rp.ServeHTTP(w, r)
	})}
	go proxy.Serve(proxyLn)
	t.Cleanup(func() { proxy.Close() })
	proxyURL := "http://" + proxyLn.Addr().String()

	for _, tc := range []struct {
		name    string
		noProxy string
		want    bool
	}{{"proxied", "", true}, {"no_proxy", "127.0.0.1", false}} {
		t.Run(tc.name, func(t *testing.T) {
			proxied.Store(0)
			target := targetFile(t, 2<<20)
			info := imageInfo("img", []string{u}, sha256hex(img))
			info.Proxies = map[string]string{"http": proxyURL}
			info.NoProxy = tc.noProxy
			if _, err := WriteImage(context.Background(), info, target, testOptions(target)); err != nil {
				t.Fatal(err)
			}
			checkTarget(t, target, img)
			if (proxied.Load() > 0) != tc.want {
				t.Errorf("%d requests through the proxy, want proxied=%v", proxied.Load(), tc.want)
			}
		})
	}
}

// HTTPS with the caller's TLS configuration: the server's CA is trusted
// through DownloadOptions.TLS, and refused without it.
func TestWriteImageHTTPS(t *testing.T) {
	img := testImage(1<<20, 41)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Unix(1700000000, 0), bytes.NewReader(img))
	}))
	srv.Listener.Close()
	srv.Listener = listenInRange(t, 9300, 9400)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	target := targetFile(t, 1<<20)
	opts := testOptions(target)
	opts.Download.Retries = 0
	info := imageInfo("img", []string{srv.URL + "/disk.raw"}, sha256hex(img))
	if _, err := WriteImage(context.Background(), info, target, opts); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted server: got %v, want a certificate error", err)
	}
	opts.Download.TLS = &tls.Config{RootCAs: pool}
	if _, err := WriteImage(context.Background(), info, target, opts); err != nil {
		t.Fatal(err)
	}
	checkTarget(t, target, img)
}
