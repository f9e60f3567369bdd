package downloader

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func ipaTarball(t *testing.T, stem string) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, ext := range []string{".kernel", ".initramfs"} {
		body := []byte(stem + ext + " content")
		tw.WriteHeader(&tar.Header{Name: stem + ext, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write(body)
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

func quick(t *testing.T) Options {
	return Options{Attempts: 3, Backoff: time.Millisecond}
}

func readServed(t *testing.T, shared, name string) string {
	b, err := os.ReadFile(filepath.Join(shared, "html", "images", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A server that fails twice with 503, has no .sha256, and sends no ETag:
// the run retries, installs unverified (as get-resource.sh does) into a
// directory named by content.
func TestRunRetriesAndUnverified(t *testing.T) {
	tb := ipaTarball(t, "ipa-goagent-master")
	var mu sync.Mutex
	fails := 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/dib/ipa-goagent-master.tar.gz":
			if fails > 0 {
				fails--
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			w.Write(tb)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	shared := t.TempDir()
	cfg, err := FromEnv(envOf("SHARED_DIR="+shared, "IPA_BASEURI="+srv.URL+"/dib"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), cfg, quick(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := "ipa-goagent-master.tar.gz-sha256-" + hexSum(tb)[:16]; res.Dir != want || !res.Installed {
		t.Errorf("result %+v, want dir %s", res, want)
	}
	if got := readServed(t, shared, "ironic-python-agent.kernel"); got != "ipa-goagent-master.kernel content" {
		t.Errorf("kernel %q", got)
	}
	// The tarball is kept in the cache directory, as get-resource.sh keeps it.
	if _, err := os.Stat(filepath.Join(shared, "html", "images", res.Dir, "ipa-goagent-master.tar.gz")); err != nil {
		t.Error(err)
	}
}

// A 304 for a volume that lacks the files goes to CACHEURL's
// <stem>-<etag>/<file>, as get-resource.sh does; the ETag comes from the
// cache's .headers.
func TestRunCacheURL(t *testing.T) {
	tb := ipaTarball(t, "ipa-goagent-master")
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case "/base/ipa-goagent-master.tar.gz":
			if r.Header.Get("If-None-Match") == `"e1"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			t.Errorf("base asked without the cache's ETag")
		case "/base/ipa-goagent-master.tar.gz.sha256":
			w.Write([]byte(hexSum(tb) + "  ipa-goagent-master.tar.gz\n"))
		case "/cache/ipa-goagent-master.tar.gz.headers":
			w.Write([]byte("HTTP/1.1 200 OK\r\nETag: \"e1\"\r\n\r\n"))
		case "/cache/ipa-goagent-master-e1/ipa-goagent-master.tar.gz":
			w.Write(tb)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	shared := t.TempDir()
	cfg, err := FromEnv(envOf("SHARED_DIR="+shared, "IPA_BASEURI="+srv.URL+"/base", "CACHEURL="+srv.URL+"/cache"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), cfg, quick(t))
	if err != nil {
		t.Fatalf("%v (requests %v)", err, paths)
	}
	if res.Dir != "ipa-goagent-master.tar.gz-e1" || !strings.Contains(res.Source, "/cache/ipa-goagent-master-e1/") {
		t.Errorf("result %+v", res)
	}
	if got := readServed(t, shared, "ironic-python-agent.initramfs"); got != "ipa-goagent-master.initramfs content" {
		t.Errorf("initramfs %q", got)
	}
	if etag := ETag([]byte(readServed(t, shared, "ironic-python-agent.headers"))); etag != `"e1"` {
		t.Errorf("headers carry ETag %q", etag)
	}
}

func TestRunErrorsNameTheURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/forbidden/ipa-goagent-master.tar.gz" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		if r.URL.Path == "/wrong/ipa-goagent-master.tar.gz" {
			w.Write(ipaTarball(t, "something-else"))
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	for _, tc := range []struct{ base, want string }{
		{srv.URL + "/missing", "/missing/ipa-goagent-master.tar.gz: the server answered 404"},
		{srv.URL + "/forbidden", "/forbidden/ipa-goagent-master.tar.gz: the server answered 403"},
		{srv.URL + "/wrong", "holds no ipa-goagent-master.kernel nor ipa-goagent-master.initramfs"},
		{"http://127.0.0.1:1", "127.0.0.1:1/ipa-goagent-master.tar.gz"},
	} {
		shared := t.TempDir()
		cfg, err := FromEnv(envOf("SHARED_DIR="+shared, "IPA_BASEURI="+tc.base))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(context.Background(), cfg, quick(t))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one naming %q", tc.base, err, tc.want)
		}
		if left, _ := os.ReadDir(filepath.Join(shared, "tmp")); len(left) != 0 {
			t.Errorf("%s: left %v in tmp", tc.base, left)
		}
	}
}

// A file:// IPA_BASEURI reads the tarball from a local directory, as curl
// does; a damaged embedded file is refused.
func TestRunFileAndEmbedded(t *testing.T) {
	dib := t.TempDir()
	tb := ipaTarball(t, "ipa-goagent-master")
	os.WriteFile(filepath.Join(dib, "ipa-goagent-master.tar.gz"), tb, 0o644)
	shared := t.TempDir()
	cfg, err := FromEnv(envOf("SHARED_DIR="+shared, "IPA_BASEURI=file://"+dib))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), cfg, quick(t)); err != nil {
		t.Fatal(err)
	}
	if got := readServed(t, shared, "ironic-python-agent.kernel"); got != "ipa-goagent-master.kernel content" {
		t.Errorf("kernel %q", got)
	}

	emb := t.TempDir()
	files := filepath.Join(emb, "files")
	os.MkdirAll(files, 0o755)
	for _, ext := range []string{".kernel", ".initramfs"} {
		os.WriteFile(filepath.Join(files, "ipa-goagent-master"+ext), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(files, "ipa-goagent-master"+ext+".sha256"), []byte(hexSum([]byte("y"))+"  ipa-goagent-master"+ext+"\n"), 0o644)
	}
	cfg, _ = FromEnv(envOf("SHARED_DIR=" + t.TempDir()))
	cfg.EmbeddedDir = emb
	if _, err := Run(context.Background(), cfg, quick(t)); err == nil || !strings.Contains(err.Error(), "the image is damaged") {
		t.Errorf("damaged embedded file: %v", err)
	}
}
