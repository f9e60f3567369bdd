package e2e

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/e2e/ironictest"
)

// deployImages builds a whole-disk raw image (GPT, ext4 in its partition,
// a file with known content) and its qcow2 conversion in dir.
func deployImages(t *testing.T, dir string) (raw, qcow2 string) {
	t.Helper()
	raw = filepath.Join(dir, "disk.raw")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run(t, "sgdisk", "--new=1:2048:0", "--typecode=1:8300", raw)
	run(t, "mkfs.ext4", "-q", "-F", "-E", "offset=1048576", "-L", "e2e-root", raw, "6M")
	qcow2 = filepath.Join(dir, "disk.qcow2")
	run(t, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, qcow2)
	return raw, qcow2
}

// TestDeployWrongChecksum: the image server's bytes do not match the
// checksum Ironic sends; write_image fails, the node lands in "deploy
// failed" with the agent's verification error in last_error.
func TestDeployWrongChecksum(t *testing.T) {
	s := need(t)
	ctx := t.Context()
	imgDir := t.TempDir()
	raw, _ := deployImages(t, imgDir)
	srv := httptest.NewServer(http.FileServer(http.Dir(imgDir)))
	t.Cleanup(srv.Close)
	dev := loopDevice(t, 5<<30)
	const mac = "52:54:e2:d0:00:03"
	bogus := sha256.Sum256([]byte("not the image"))
	bogusMD5 := md5.Sum([]byte("not the image"))
	no := false
	n := s.enroll(t, "e2e-deploy-bad-checksum", mac, ironictest.NodeSpec{
		AutomatedClean: &no,
		Properties:     map[string]any{"root_device": map[string]any{"name": dev}},
		InstanceInfo: map[string]any{
			"image_source":        srv.URL + "/" + filepath.Base(raw),
			"image_checksum":      hex.EncodeToString(bogusMD5[:]),
			"image_os_hash_algo":  "sha256",
			"image_os_hash_value": hex.EncodeToString(bogus[:]),
			"image_disk_format":   "raw",
			"root_gb":             1,
		},
	})
	if err := s.ironic.Provision(ctx, n.UUID, "provide"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, n.UUID, "available", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.ironic.Provision(ctx, n.UUID, "active"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, n.UUID, "wait call-back", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// The agent retries a write whose checksum fails, as IPA does
	// (image_download_connection_retries, 9 x 10 s by default); one retry
	// a second later keeps the test short.
	s.startAgent(t, agentOpts{MAC: mac, Devices: []string{dev}, Extra: []string{
		"--image-download-connection-retries", "1", "--image-download-connection-retry-interval", "1"}})
	got, err := s.ironic.WaitState(ctx, n.UUID, "deploy failed", stepTimeout)
	if err != nil {
		t.Fatal(err)
	}
	msg := strings.ToLower(deref(got.LastError))
	if !strings.Contains(msg, "write_image") || !strings.Contains(msg, "checksum") && !strings.Contains(msg, "hash") {
		t.Errorf("last_error = %q, want write_image's checksum failure", deref(got.LastError))
	}
	t.Logf("last_error: %s", deref(got.LastError))
}

func fileSums(t *testing.T, path string) (md5sum, sha string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := md5.Sum(b)
	s := sha256.Sum256(b)
	return hex.EncodeToString(m[:]), hex.EncodeToString(s[:])
}

// TestDeploy is the deploy scenario: direct deploy of a whole-disk image,
// raw and qcow2, served by an HTTP server of the test; the agent writes it
// to its loop device (root device hint by name), Ironic finishes the deploy
// steps and the node becomes active; the disk then holds the image's bytes.
func TestDeploy(t *testing.T) {
	s := need(t)
	imgDir := t.TempDir()
	raw, qcow2 := deployImages(t, imgDir)
	srv := httptest.NewServer(http.FileServer(http.Dir(imgDir)))
	t.Cleanup(srv.Close)
	want, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct{ name, path, format string }{
		{"raw", raw, "raw"},
		{"qcow2", qcow2, "qcow2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			start := time.Now()
			// Larger than IPA's 4 GiB minimum root disk; sparse, so free.
			dev := loopDevice(t, 5<<30)
			mac := []string{"52:54:e2:d0:00:01", "52:54:e2:d0:00:02"}[i]
			md5sum, sha := fileSums(t, tc.path)
			no := false
			n := s.enroll(t, "e2e-deploy-"+tc.name, mac, ironictest.NodeSpec{
				AutomatedClean: &no,
				Properties:     map[string]any{"root_device": map[string]any{"name": dev}},
				InstanceInfo: map[string]any{
					"image_source":        srv.URL + "/" + filepath.Base(tc.path),
					"image_checksum":      md5sum,
					"image_os_hash_algo":  "sha256",
					"image_os_hash_value": sha,
					"image_disk_format":   tc.format,
					"root_gb":             1,
				},
			})
			if err := s.ironic.Provision(ctx, n.UUID, "provide"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ironic.WaitState(ctx, n.UUID, "available", 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := s.ironic.Provision(ctx, n.UUID, "active"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ironic.WaitState(ctx, n.UUID, "wait call-back", 30*time.Second); err != nil {
				t.Fatal(err)
			}
			a := s.startAgent(t, agentOpts{MAC: mac, Devices: []string{dev}})
			if _, err := s.ironic.WaitState(ctx, n.UUID, "active", stepTimeout); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s deploy: %s from enrolment to active", tc.name, time.Since(start).Round(time.Millisecond))
			// Ironic ended the deploy with standby.power_off: the agent's
			// reboot(2) ended its PID namespace (and nothing else).
			deadline := time.Now().Add(20 * time.Second)
			for {
				if dead, _ := a.Exited(); dead {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("the agent still runs 20 s after the deploy ended with standby.power_off")
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			got := make([]byte, len(want))
			fh, err := os.Open(dev)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			if _, err := io.ReadFull(fh, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: the first %d bytes of %s differ from the raw image", tc.name, len(want), dev)
			}
		})
	}
}
