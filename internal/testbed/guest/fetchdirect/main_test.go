package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRun: the step finds the disk by serial, fetches the image through
// the proxy it is given and writes all of it, a last partial block too,
// to the start of that disk (a regular file here, without O_DIRECT).
func TestRun(t *testing.T) {
	dir := t.TempDir()
	sys, dev := filepath.Join(dir, "sys"), filepath.Join(dir, "dev")
	for p, b := range map[string][]byte{
		"sys/sda/device/vpd_pg80": append([]byte{0, 0x80, 0, 13}, "LAB-SCSI-0001"...),
		"sys/sdb/device/vpd_pg80": append([]byte{0, 0x80, 0, 13}, "LAB-SCSI-0002"...),
		"dev/sda":                 nil,
		"dev/sdb":                 nil,
	} {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := bytes.Repeat([]byte("0123456789abcdef"), (2*blockSize+4096+100)/16)
	var proxied atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.RequestURI == "http://images.example/disk.raw" {
			proxied.Store(true)
		}
		_, _ = w.Write(img)
	}))
	defer srv.Close()
	in := fmt.Sprintf(`{"step": "fetch_direct", "node": {"properties": {"root_device": {"serial": "LAB-SCSI-0002"}}}, "args": {"url": "http://images.example/disk.raw", "proxy": %q}}`, srv.URL)
	res, err := run(strings.NewReader(in), sys, dev, os.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	if res.Device != filepath.Join(dev, "sdb") || res.Bytes != int64(len(img)) || !proxied.Load() {
		t.Errorf("result %+v (proxied %v), want %d bytes to sdb through the proxy", res, proxied.Load(), len(img))
	}
	if got, _ := os.ReadFile(filepath.Join(dev, "sdb")); !bytes.Equal(got, img) {
		t.Errorf("sdb holds %d bytes, not the image", len(got))
	}
	if got, _ := os.ReadFile(filepath.Join(dev, "sda")); len(got) != 0 {
		t.Errorf("sda was written")
	}
	if line := consoleLine(res); !strings.HasPrefix(line, fmt.Sprintf("fetchdirect: wrote %d bytes to %s in ", len(img), res.Device)) {
		t.Errorf("console line %q", line)
	}
}

// Input without the disk's serial or the url is refused.
func TestRunRefusesIncompleteInput(t *testing.T) {
	if _, err := run(strings.NewReader(`{"node": {}, "args": {"url": "http://x/"}}`), t.TempDir(), t.TempDir(), os.O_WRONLY); err == nil || !strings.Contains(err.Error(), "serial") {
		t.Errorf("err = %v", err)
	}
}
