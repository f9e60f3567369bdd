package e2e

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
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

// deployNode enrolls a node whose instance_info points at the image url
// (checksums of the file at sumsOf) and whose root device hint names dev,
// and provides it (no cleaning): the node is available for a deploy.
func (s *suite) deployNode(t *testing.T, name, mac, dev, url, format, sumsOf string) *nodes.Node {
	t.Helper()
	md5sum, sha := fileSums(t, sumsOf)
	return s.deployNodeWith(t, name, mac, dev, map[string]any{
		"image_source":        url,
		"image_checksum":      md5sum,
		"image_os_hash_algo":  "sha256",
		"image_os_hash_value": sha,
		"image_disk_format":   format,
		"root_gb":             1,
	})
}

// deployNodeWith is deployNode with the node's instance_info given whole.
func (s *suite) deployNodeWith(t *testing.T, name, mac, dev string, instanceInfo map[string]any) *nodes.Node {
	t.Helper()
	no := false
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: name,
		AutomatedClean: &no,
		Properties:     map[string]any{"root_device": map[string]any{"name": dev}},
		InstanceInfo:   instanceInfo,
	}, mac)
	s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac}).Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, 30*time.Second)
	return n
}

// assertDiskHolds checks that dev starts with the bytes of the file image.
// Like IPA (sgdisk -e), the agent moves a GPT's backup header to the end of
// the larger disk, which rewrites the protective MBR entry (bytes 446-461)
// and the primary GPT header (LBA 1); everything else must be identical.
func assertDiskHolds(t *testing.T, dev, image string) {
	t.Helper()
	want, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(fh, got); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{0, 446}, {462, 512}, {1024, len(want)}} {
		if !bytes.Equal(got[r[0]:r[1]], want[r[0]:r[1]]) {
			t.Errorf("bytes %d-%d of %s differ from %s", r[0], r[1], dev, image)
		}
	}
}

// deployDisk is a loop device larger than IPA's 4 GiB minimum root disk;
// sparse, so it costs nothing.
func deployDisk(t *testing.T) string { return loopDevice(t, 5<<30) }

// TestDeployWrongChecksum: the image server's bytes do not match the
// checksum Ironic sends; write_image fails, the node lands in "deploy
// failed" with the agent's verification error in last_error.
func TestDeployWrongChecksum(t *testing.T) {
	s := need(t)
	imgDir := t.TempDir()
	raw, _ := deployImages(t, imgDir)
	srv := httptest.NewServer(http.FileServer(http.Dir(imgDir)))
	t.Cleanup(srv.Close)
	dev := deployDisk(t)
	// Checksums of other bytes than the server sends.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(other, []byte("not the image"), 0o644); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:e2:d0:00:03"
	n := s.deployNode(t, "e2e-deploy-bad-checksum", mac, dev, srv.URL+"/"+filepath.Base(raw), "raw", other)
	// The agent retries a write whose checksum fails, as IPA does
	// (image_download_connection_retries, 9 x 10 s by default); one retry
	// a second later keeps the test short.
	got := s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, Devices: []string{dev}, Extra: []string{
		"--image-download-connection-retries", "1", "--image-download-connection-retry-interval", "1"}}).
		Until(nodes.ProvisionStateOpts{Target: nodes.TargetActive}, "deploy failed", stepTimeout).Node
	msg := strings.ToLower(got.LastError)
	if !strings.Contains(msg, "write_image") || !strings.Contains(msg, "checksum") && !strings.Contains(msg, "hash") {
		t.Errorf("last_error = %q, want write_image's checksum failure", got.LastError)
	}
	t.Logf("last_error: %s", got.LastError)
}

// cuttingServer serves dir's files; the first request for each file
// without a Range header gets only the first cut bytes before the
// connection is dropped, as a flaky image server or proxy would.
func cuttingServer(t *testing.T, dir string, cut int64) (*httptest.Server, *cutStats) {
	t.Helper()
	var mu sync.Mutex
	cutDone := map[string]bool{}
	stats := &cutStats{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := filepath.Join(dir, filepath.Base(r.URL.Path))
		f, err := os.Open(path)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		st, _ := f.Stat()
		mu.Lock()
		first := !cutDone[path] && r.Header.Get("Range") == "" && r.Method == http.MethodGet
		cutDone[path] = cutDone[path] || first
		switch {
		case first:
			stats.cuts++
		case r.Header.Get("Range") != "":
			stats.ranges = append(stats.ranges, r.Header.Get("Range"))
		default:
			stats.full++
		}
		mu.Unlock()
		if !first {
			http.ServeContent(w, r, st.Name(), st.ModTime(), f)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
		w.Header().Set("Accept-Ranges", "bytes")
		w.WriteHeader(http.StatusOK)
		_, _ = io.CopyN(w, f, cut)
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	stats.mu = &mu
	return srv, stats
}

// cutStats counts what cuttingServer saw.
type cutStats struct {
	mu     *sync.Mutex
	cuts   int
	full   int
	ranges []string
}

func (c *cutStats) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d cut, %d full, ranges %v", c.cuts, c.full, c.ranges)
}

// TestDeployCutTransfer: the image server drops the connection after 3 MiB
// of the raw image; the agent resumes the transfer and the deploy reaches
// active with the right bytes on the disk.
func TestDeployCutTransfer(t *testing.T) {
	s := need(t)
	imgDir := t.TempDir()
	raw, _ := deployImages(t, imgDir)
	srv, stats := cuttingServer(t, imgDir, 3<<20)
	dev := deployDisk(t)
	const mac = "52:54:e2:d0:00:04"
	n := s.deployNode(t, "e2e-deploy-cut", mac, dev, srv.URL+"/"+filepath.Base(raw), "raw", raw)
	s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, Devices: []string{dev}, Extra: []string{"--image-download-connection-retry-interval", "1"}}).
		Deploy(stepTimeout)
	assertDiskHolds(t, dev, raw)
	t.Logf("image server: %s", stats)
	stats.mu.Lock()
	defer stats.mu.Unlock()
	if stats.cuts != 1 || len(stats.ranges) == 0 {
		t.Errorf("image server saw %d cut transfers and range requests %v; want the cut resumed with a Range request", stats.cuts, stats.ranges)
	}
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
	for i, tc := range []struct{ name, path, format string }{
		{"raw", raw, "raw"},
		{"qcow2", qcow2, "qcow2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			dev := deployDisk(t)
			mac := []string{"52:54:e2:d0:00:01", "52:54:e2:d0:00:02"}[i]
			n := s.deployNode(t, "e2e-deploy-"+tc.name, mac, dev, srv.URL+"/"+filepath.Base(tc.path), tc.format, tc.path)
			a := s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, Devices: []string{dev}}).Deploy(stepTimeout).Ramdisk
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
			assertDiskHolds(t, dev, raw)
		})
	}
}
