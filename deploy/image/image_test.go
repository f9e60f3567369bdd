package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/ipaerror"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

func sha256hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// testImage returns n bytes of a disk-like image: random data with zero
// stretches (so zero runs are exercised) and an odd tail.
func testImage(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for off := 0; off < n; {
		k := min(n-off, 1<<20+r.IntN(3<<20))
		if r.IntN(3) != 0 {
			for i := off; i < off+k; i += 8 {
				v := r.Uint64()
				for j := 0; j < 8 && i+j < off+k; j++ {
					b[i+j] = byte(v >> (8 * j))
				}
			}
		}
		off += k
	}
	return b
}

// targetFile is a regular file standing in for a disk, filled with junk so
// that zero runs must really be zeroed.
func targetFile(t testing.TB, size int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(p, bytes.Repeat([]byte{0xa5}, size), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func testOptions(target string) WriteOptions {
	return WriteOptions{
		Download:   DownloadOptions{ConnectionTimeout: 2 * time.Second, Retries: 3, RetryInterval: 10 * time.Millisecond},
		MD5Enabled: true,
		Guard:      blockdev.NewGuard([]string{target}),
	}
}

func imageInfo(id string, urls []string, digest string) *ImageInfo {
	return &ImageInfo{ID: id, URLs: urls, OSHashAlgo: "sha256", OSHashValue: digest}
}

// checkTarget compares the target's first len(want) bytes with want.
func checkTarget(t *testing.T, target string, want []byte) {
	t.Helper()
	f, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(f, got); err != nil {
		t.Fatal(err)
	}
	if sha256hex(got) != sha256hex(want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("target differs from the image at byte %d (got %#x want %#x)", i, got[i], want[i])
			}
		}
	}
}

func TestWriteImageRawToFile(t *testing.T) {
	img := testImage(9<<20+12345, 1)
	srv := newImageServer(t)
	u := srv.put("disk.raw", img)
	target := targetFile(t, 16<<20)
	var progress []WriteProgress
	opts := testOptions(target)
	opts.Progress = func(p WriteProgress) { progress = append(progress, p) }
	res, err := WriteImage(context.Background(), imageInfo("img1", []string{u}, sha256hex(img)), target, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkTarget(t, target, img)
	if res.Digest != sha256hex(img) || res.FileBytes != int64(len(img)) || res.DiskBytes != int64(len(img)) || res.Format != FormatRaw {
		t.Errorf("result %+v", res)
	}
	if len(progress) == 0 || !progress[len(progress)-1].Done || progress[len(progress)-1].Written != int64(len(img)) {
		t.Errorf("progress %+v", progress)
	}
	if res.ZeroedBytes == 0 {
		t.Errorf("expected zero runs to be zeroed, result %+v", res)
	}
	// A raw image's stages: received, hashed by the writer, written;
	// nothing to decode.
	if st := res.Stages; st.Receive <= 0 || st.Reads <= 0 || st.Hash <= 0 || st.Write <= 0 || st.Decode != 0 || st.HashImpl == "" {
		t.Errorf("stages %+v", st)
	}
	t.Log(res.Summary(), "; ", res.Stages)
}

func TestWriteImageResumesAfterCuts(t *testing.T) {
	img := testImage(6<<20+777, 2)
	for _, tc := range []struct {
		name    string
		cutAt   int64
		cuts    int
		noRange bool
		noValid bool
	}{
		{"cut at byte 1", 1, 1, false, false},
		{"cut mid-file three times", 1<<20 + 5, 3, false, false},
		{"cut one byte before the end", int64(len(img)) - 1, 1, false, false},
		{"server without ranges", 2 << 20, 1, true, false},
		{"server without validators", 2<<20 + 3, 2, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newImageServer(t)
			u := srv.put("disk.raw", img)
			srv.set("disk.raw", func(f *servedFile) {
				f.faultCount, f.cutAt, f.noRange = tc.cuts, tc.cutAt, tc.noRange
				if tc.noValid {
					f.etag, f.modTime = "", time.Time{}
				}
			})
			target := targetFile(t, 8<<20)
			res, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(img)), target, testOptions(target))
			if err != nil {
				t.Fatal(err)
			}
			checkTarget(t, target, img)
			if res.Resumes != tc.cuts || res.Attempts != 1 {
				t.Errorf("resumes %d attempts %d, want %d resumes in one attempt", res.Resumes, res.Attempts, tc.cuts)
			}
			if !tc.noRange && srv.ranges.Load() != int64(tc.cuts) {
				t.Errorf("%d range requests, want %d", srv.ranges.Load(), tc.cuts)
			}
		})
	}
}

func TestWriteImageStallResumes(t *testing.T) {
	img := testImage(3<<20, 3)
	srv := newImageServer(t)
	u := srv.put("disk.raw", img)
	srv.set("disk.raw", func(f *servedFile) { f.faultCount, f.cutAt, f.stallAt, f.stallFor = 1, -1, 1<<20+1, 5*time.Second })
	target := targetFile(t, 4<<20)
	opts := testOptions(target)
	opts.Download.ConnectionTimeout = 300 * time.Millisecond
	res, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(img)), target, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkTarget(t, target, img)
	// At least the stall; a loaded machine may add a spurious one.
	if res.Resumes < 1 {
		t.Errorf("resumes %d, want the stall resumed", res.Resumes)
	}
}

// TestWriteImageMaxDuration: image_download_max_duration ends a transfer
// that stalls (IPA's ImageDownloadTimeoutError, 408, not retried), and
// does not touch one that finishes in time.
func TestWriteImageMaxDuration(t *testing.T) {
	img := testImage(3<<20, 4)
	srv := newImageServer(t)
	u := srv.put("disk.raw", img)
	srv.set("disk.raw", func(f *servedFile) { f.faultCount, f.cutAt, f.stallAt, f.stallFor = 1, -1, 1<<20+1, 5*time.Second })
	target := targetFile(t, 4<<20)
	opts := testOptions(target)
	opts.Download.ConnectionTimeout = 10 * time.Second
	opts.Download.MaxDuration = 200 * time.Millisecond
	_, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(img)), target, opts)
	var e *ipaerror.Error
	if !errors.As(err, &e) || e.Type != "ImageDownloadTimeoutError" || e.Code != 408 ||
		e.Details != "Download of image img failed: Download exceeded max allowed time (0 seconds)" {
		t.Fatalf("error %#v", err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("%d requests: a download timeout must not be retried", n)
	}

	srv.set("disk.raw", func(f *servedFile) { f.faultCount = 0 })
	opts.Download.MaxDuration = time.Hour
	if _, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(img)), target, opts); err != nil {
		t.Fatal(err)
	}
	checkTarget(t, target, img)
}

func TestWriteImageChangedFileIsNotSpliced(t *testing.T) {
	img := testImage(4<<20, 4)
	other := testImage(4<<20, 5)
	srv := newImageServer(t)
	u := srv.put("disk.raw", img)
	srv.set("disk.raw", func(f *servedFile) {
		f.faultCount, f.cutAt = 1, 1<<20
		f.onCut = func(f *servedFile) { f.data, f.etag, f.modTime = other, `"v2"`, time.Unix(1800000000, 0) }
	})
	target := targetFile(t, 4<<20)
	opts := testOptions(target)
	opts.Download.Retries = 1
	// The file changes while the first transfer is cut: the resume must
	// notice (If-Range with the old ETag brings the whole new file) and
	// give up on this attempt instead of splicing two versions; the next
	// attempt writes the new file, which fails the old file's checksum.
	var logs syncBuf
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	_, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(img)), target, opts)
	var e *ipaerror.Error
	if !errors.As(err, &e) || e.Type != "ImageChecksumError" {
		t.Fatalf("want ImageChecksumError after the retry, got %v", err)
	}
	if !strings.Contains(logs.String(), errChanged.Error()) {
		t.Errorf("the first attempt did not stop on the changed file; log:\n%s", logs.String())
	}
}

// syncBuf is a bytes.Buffer safe for a logger used from goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestWriteImageNotFoundIsNotRetried(t *testing.T) {
	srv := newImageServer(t)
	target := targetFile(t, 1<<20)
	_, err := WriteImage(context.Background(), imageInfo("img", []string{srv.base + "/missing", srv.base + "/other"}, strings.Repeat("0", 64)), target, testOptions(target))
	var e *ipaerror.Error
	if !errors.As(err, &e) || e.Type != "ImageDownloadError" || !strings.Contains(e.Details, "404") {
		t.Fatalf("want ImageDownloadError with 404, got %v", err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("%d requests for a 404, want 1 (no retries, no other URL)", n)
	}
}

func TestWriteImageServerErrorIsRetriedThenNextURL(t *testing.T) {
	img := testImage(1<<20, 6)
	srv := newImageServer(t)
	bad := srv.put("bad", img)
	srv.set("bad", func(f *servedFile) { f.status = 503 })
	good := srv.put("good", img)
	target := targetFile(t, 1<<20)
	opts := testOptions(target)
	if _, err := WriteImage(context.Background(), imageInfo("img", []string{bad, good}, sha256hex(img)), target, opts); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != int64(opts.Download.Retries)+2 {
		t.Errorf("%d requests, want %d retries of the 503 plus one good", n, opts.Download.Retries+2)
	}
}

func TestWriteImageChecksumMismatch(t *testing.T) {
	img := testImage(2<<20, 7)
	srv := newImageServer(t)
	u := srv.put("disk.raw", img)
	target := targetFile(t, 4<<20)
	opts := testOptions(target)
	opts.Download.Retries = 1
	wrong := sha256hex(append([]byte{1}, img...))
	_, err := WriteImage(context.Background(), imageInfo("img", []string{u}, wrong), target, opts)
	var e *ipaerror.Error
	if !errors.As(err, &e) || e.Type != "ImageChecksumError" {
		t.Fatalf("want ImageChecksumError, got %v", err)
	}
	want := "Image failed to verify against checksum. location: " + u + "; image ID: img; image checksum: " + wrong + "; verification checksum: " + sha256hex(img)
	if e.Details != want {
		t.Errorf("details\n got %s\nwant %s", e.Details, want)
	}
	if n := srv.requests.Load(); n != 2 {
		t.Errorf("%d downloads, want 2 (one retry)", n)
	}
	// Upper-case digests fail too: IPA compares case-sensitively.
	_, err = WriteImage(context.Background(), imageInfo("img", []string{u}, strings.ToUpper(sha256hex(img))), target, opts)
	if !errors.As(err, &e) || e.Type != "ImageChecksumError" {
		t.Fatalf("upper-case digest: want ImageChecksumError, got %v", err)
	}
}

func TestWriteImageServedBytesCorrupted(t *testing.T) {
	img := testImage(2<<20, 8)
	bad := bytes.Clone(img)
	bad[1<<20+17] ^= 0x40
	srv := newImageServer(t)
	u := srv.put("disk.raw", bad)
	target := targetFile(t, 4<<20)
	opts := testOptions(target)
	opts.Download.Retries = 0
	_, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(img)), target, opts)
	var e *ipaerror.Error
	if !errors.As(err, &e) || e.Type != "ImageChecksumError" {
		t.Fatalf("want ImageChecksumError, got %v", err)
	}
}

func TestWriteImageLegacyChecksums(t *testing.T) {
	img := testImage(1<<20+5, 9)
	srv := newImageServer(t)
	u := srv.put("images/disk.img", img)
	m := md5.Sum(img)
	s5 := sha512.Sum512(img)
	md5hex, sha512hex := hex.EncodeToString(m[:]), hex.EncodeToString(s5[:])
	gnu := srv.put("SHA256SUMS", []byte("# comment\n"+sha256hex([]byte("x"))+"  other.img\n"+sha256hex(img)+" *disk.img\n"))
	bsd := srv.put("CHECKSUM", []byte("SHA512 (other.img) = "+sha512hex[:127]+"0\nSHA512 (disk.img) = "+sha512hex+"\n"))
	only := srv.put("disk.img.md5", []byte(md5hex+"\n"))
	for _, tc := range []struct{ name, checksum, algo string }{
		{"md5 digest", md5hex, "md5"},
		{"sha512 digest", sha512hex, "sha512"},
		{"GNU file", gnu, "sha256"},
		{"BSD file", bsd, "sha512"},
		{"digest-only file", only, "md5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := targetFile(t, 2<<20)
			res, err := WriteImage(context.Background(), &ImageInfo{ID: "img", URLs: []string{u}, Checksum: tc.checksum}, target, testOptions(target))
			if err != nil {
				t.Fatal(err)
			}
			if res.Algorithm != tc.algo {
				t.Errorf("algorithm %s, want %s", res.Algorithm, tc.algo)
			}
			checkTarget(t, target, img)
		})
	}
}

func TestWriteImageCompressed(t *testing.T) {
	img := testImage(3<<20+99, 10)
	var gz, zs, xzb bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(img)
	gw.Close()
	zw, _ := zstd.NewWriter(&zs)
	zw.Write(img)
	zw.Close()
	cases := map[string][]byte{"gzip": gz.Bytes(), "zstd": zs.Bytes()}
	// The C tools compress much faster than Go's xz encoder; bzip2 has
	// no Go encoder.
	for _, tool := range []string{"xz", "bzip2"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Logf("SKIPPED %s case: needs %s (in test.sh APT_PACKAGES)", tool, tool)
			continue
		}
		cmd := exec.Command(tool, "-1", "-c")
		cmd.Stdin = bytes.NewReader(img)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		cases[tool] = out
	}
	if _, ok := cases["xz"]; !ok {
		xw, _ := xz.NewWriter(&xzb)
		xw.Write(img)
		xw.Close()
		cases["xz"] = xzb.Bytes()
	}
	srv := newImageServer(t)
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			// A misleading name: detection must go by content.
			u := srv.put(name+"/disk.raw", data)
			target := targetFile(t, 8<<20)
			info := imageInfo("img", []string{u}, sha256hex(data))
			info.DiskFormat = "raw"
			res, err := WriteImage(context.Background(), info, target, testOptions(target))
			if err != nil {
				t.Fatal(err)
			}
			checkTarget(t, target, img)
			if string(res.Compression) != name || res.DiskBytes != int64(len(img)) || res.FileBytes != int64(len(data)) {
				t.Errorf("result %+v", res)
			}
		})
	}
	t.Run("truncated gzip", func(t *testing.T) {
		data := gz.Bytes()[:gz.Len()-100]
		u := srv.put("trunc.gz", data)
		target := targetFile(t, 8<<20)
		opts := testOptions(target)
		opts.Download.Retries = 0
		_, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(data)), target, opts)
		if err == nil {
			t.Fatal("a truncated gzip stream was accepted")
		}
	})
}

func TestWriteImageGuardRefuses(t *testing.T) {
	target := targetFile(t, 1<<20)
	opts := testOptions(target)
	opts.Guard = blockdev.NewGuard([]string{"/dev/nonexistent-allowed"})
	_, err := WriteImage(context.Background(), imageInfo("img", []string{"http://127.0.0.1:1/x"}, strings.Repeat("0", 64)), target, opts)
	if !errors.Is(err, blockdev.ErrRefused) {
		t.Fatalf("want a guard refusal, got %v", err)
	}
}

func TestCheckFormat(t *testing.T) {
	for _, tc := range []struct {
		declared, detected string
		permitted          []string
		disable            bool
		want               string
	}{
		{"raw", "raw", nil, false, ""},
		{"raw", "gpt", nil, false, ""},
		{"raw", "qcow2", nil, false, "Security: Expected format was raw, but image was actually qcow2"},
		{"qcow2", "qcow2", nil, false, ""},
		{"qcow2", "raw", nil, false, "Security: Expected format was qcow2, but image was actually raw"},
		{"", "vmdk", nil, false, "Security: Detected image format was vmdk, but only raw, gpt, qcow2 are allowed"},
		{"", "gpt", []string{"raw", "qcow2", "iso"}, false, "Security: Detected image format was gpt, but only raw, qcow2, iso are allowed"},
		{"unknown", "qcow2", nil, false, ""},
		{"qcow2", "raw", nil, true, ""},
	} {
		err := checkFormat(&ImageInfo{DiskFormat: tc.declared}, tc.detected, &WriteOptions{PermittedFormats: tc.permitted, DisableDeepInspection: tc.disable})
		got := ""
		if err != nil {
			got = err.(*ipaerror.Error).Details
		}
		if got != tc.want {
			t.Errorf("declared %q detected %q: got %q want %q", tc.declared, tc.detected, got, tc.want)
		}
	}
}

func TestSummary(t *testing.T) {
	r := &WriteResult{Verified: true, Device: "/dev/sda", Algorithm: "sha256", Digest: "ab", FileBytes: 10, DiskBytes: 20, Format: "qcow2", Compression: CompressionZstd, Duration: 2 * time.Second}
	want := "verified sha256 ab of 10 bytes (zstd-compressed qcow2 image, 20 bytes on disk) written to /dev/sda in 2.0s, 0 MB/s"
	if got := r.Summary(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	_ = fmt.Sprint
}

func TestStageTimesString(t *testing.T) {
	st := StageTimes{Receive: 61 * time.Second, Reads: 300, Decode: 2 * time.Second, Hash: 70 * time.Second, HashImpl: "crypto/sha256",
		BufferWait: 10 * time.Second, Write: 40 * time.Second, Sync: 300 * time.Millisecond}
	want := "receive 61.0s (300 reads), decode 2.0s, hash 70.0s (crypto/sha256), waiting on the disk or the hash 10.0s, device writes 40.0s (2 at once), fsync 0.3s"
	if got := st.String(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	st.CPU = processCPU{User: 2500 * time.Millisecond, System: 700 * time.Millisecond, Switches: 1234}
	want += "; agent CPU 2.5s user, 0.7s system, 1234 context switches"
	if got := st.String(); got != want {
		t.Errorf("with CPU: got %q\nwant %q", got, want)
	}
}

// A compressed image that turns out larger than the device fails as a
// write error, at once: downloading it again cannot help.
func TestWriteImageCompressedLargerThanDevice(t *testing.T) {
	dev := looptest.Attach(t, 4<<20, "--partscan")
	img := testImage(12<<20, 11)
	var zs bytes.Buffer
	zw, _ := zstd.NewWriter(&zs)
	zw.Write(img)
	zw.Close()
	srv := newImageServer(t)
	u := srv.put("big.zst", zs.Bytes())
	_, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(zs.Bytes())), dev, testOptions(dev))
	var e *ipaerror.Error
	if !errors.As(err, &e) || e.Type != "ImageWriteError" || !strings.Contains(e.Details, "larger than") {
		t.Fatalf("want ImageWriteError naming the size, got %v", err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("%d downloads, want 1 (a full device is not retried)", n)
	}
}
