package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/qcow2"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// qemuImg runs qemu-img, the oracle for qcow2 tests.
func qemuImg(t testing.TB, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skipf("SKIPPED: needs qemu-img (qemu-utils, in test.sh APT_PACKAGES): %v", err)
	}
	out, err := exec.Command("qemu-img", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// makeQcow2 converts raw bytes into a qcow2 file with the given extra
// qemu-img convert options and returns its bytes.
func makeQcow2(t testing.TB, raw []byte, opts ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.raw"), filepath.Join(dir, "out.qcow2")
	if err := os.WriteFile(in, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	qemuImg(t, append(append([]string{"convert", "-f", "raw", "-O", "qcow2"}, opts...), in, out)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteImageQcow2(t *testing.T) {
	looptest.RequireTools(t, "qemu-img")
	// A size that is not a multiple of the cluster size.
	raw := testImage(13<<20+4096, 20)
	srv := newImageServer(t)
	for _, tc := range []struct {
		name string
		opts []string
	}{
		{"plain", nil},
		{"v2 (compat 0.10)", []string{"-o", "compat=0.10"}},
		{"zlib compressed", []string{"-c"}},
		{"zstd compressed", []string{"-c", "-o", "compression_type=zstd"}},
		{"512-byte clusters", []string{"-o", "cluster_size=512"}},
		{"2 MiB clusters compressed", []string{"-c", "-o", "cluster_size=2M"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := makeQcow2(t, raw, tc.opts...)
			u := srv.put(strings.ReplaceAll(tc.name, " ", "_"), img)
			target := targetFile(t, 16<<20)
			info := imageInfo("img", []string{u}, sha256hex(img))
			info.DiskFormat = "qcow2"
			before := srv.ranges.Load()
			res, err := WriteImage(context.Background(), info, target, testOptions(target))
			if err != nil {
				t.Fatal(err)
			}
			checkTarget(t, target, raw)
			if res.Format != FormatQcow2 || res.DiskBytes != int64(len(raw)) || res.FileBytes != int64(len(img)) {
				t.Errorf("result %+v", res)
			}
			// qemu-img writes metadata before data: one pass, no Range.
			if n := srv.ranges.Load() - before; n != 0 || res.Refetched != 0 {
				t.Errorf("%d range requests, %d bytes fetched again; want a single pass", n, res.Refetched)
			}
			// The file's bytes are hashed beside the conversion.
			if st := res.Stages; st.Receive <= 0 || st.Hash <= 0 || st.Write <= 0 {
				t.Errorf("stages %+v", st)
			}
			t.Log(res.Summary(), "; ", res.Stages)
		})
	}
}

func TestWriteImageQcow2ResumesAndLocalFile(t *testing.T) {
	looptest.RequireTools(t, "qemu-img")
	raw := testImage(8<<20, 21)
	img := makeQcow2(t, raw, "-c")
	srv := newImageServer(t)
	u := srv.put("disk.qcow2", img)
	srv.set("disk.qcow2", func(f *servedFile) { f.faultCount, f.cutAt = 2, int64(len(img)/3) })
	target := targetFile(t, 8<<20)
	res, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(img)), target, testOptions(target))
	if err != nil {
		t.Fatal(err)
	}
	checkTarget(t, target, raw)
	if res.Resumes != 2 {
		t.Errorf("resumes %d, want 2", res.Resumes)
	}

	local := filepath.Join(t.TempDir(), "disk.qcow2")
	if err := os.WriteFile(local, img, 0o600); err != nil {
		t.Fatal(err)
	}
	target2 := targetFile(t, 8<<20)
	opts := testOptions(target2)
	if _, err := WriteImage(context.Background(), imageInfo("img", []string{local}, sha256hex(img)), target2, opts); err == nil || !strings.Contains(err.Error(), "only http and https") {
		t.Fatalf("a local path was accepted without AllowLocalFiles: %v", err)
	}
	opts.AllowLocalFiles = true
	if _, err := WriteImage(context.Background(), imageInfo("img", []string{local}, sha256hex(img)), target2, opts); err != nil {
		t.Fatal(err)
	}
	checkTarget(t, target2, raw)
}

// A qcow2 whose data precede its L2 tables needs Range requests; the
// checksum still covers every byte exactly once.
func TestWriteImageQcow2OutOfOrder(t *testing.T) {
	looptest.RequireTools(t, "qemu-img")
	dir := t.TempDir()
	p := filepath.Join(dir, "ooo.qcow2")
	qemuImg(t, "create", "-f", "qcow2", p, "16M")
	// Writing the end of the disk first puts its L2 table and data early
	// in the file, the start of the disk after them.
	qemuIO := func(args ...string) {
		if _, err := exec.LookPath("qemu-io"); err != nil {
			t.Skip("SKIPPED: needs qemu-io (qemu-utils)")
		}
		out, err := exec.Command("qemu-io", append([]string{"-f", "qcow2"}, append(args, p)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("qemu-io %v: %v\n%s", args, err, out)
		}
	}
	qemuIO("-c", "write -P 0x11 8M 6M")
	qemuIO("-c", "write -P 0x22 0 2M")
	qemuIO("-c", "write -P 0x33 3M 64k")
	img, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	rawPath := filepath.Join(dir, "ooo.raw")
	qemuImg(t, "convert", "-f", "qcow2", "-O", "raw", p, rawPath)
	raw, err := os.ReadFile(rawPath)
	if err != nil {
		t.Fatal(err)
	}
	srv := newImageServer(t)
	u := srv.put("ooo.qcow2", img)
	target := targetFile(t, 16<<20)
	res, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(img)), target, testOptions(target))
	if err != nil {
		t.Fatal(err)
	}
	checkTarget(t, target, raw)
	if res.Refetched == 0 || srv.ranges.Load() == 0 {
		t.Errorf("expected Range requests for data behind the stream")
	}
	t.Logf("refetched %d bytes with %d range requests", res.Refetched, srv.ranges.Load())
}

func TestWriteImageQcow2Refused(t *testing.T) {
	looptest.RequireTools(t, "qemu-img")
	dir := t.TempDir()
	base := filepath.Join(dir, "base.raw")
	if err := os.WriteFile(base, testImage(1<<20, 22), 0o600); err != nil {
		t.Fatal(err)
	}
	backed := filepath.Join(dir, "backed.qcow2")
	qemuImg(t, "create", "-f", "qcow2", "-b", base, "-F", "raw", backed)
	datafile := filepath.Join(dir, "datafile.qcow2")
	qemuImg(t, "create", "-f", "qcow2", "-o", "data_file="+filepath.Join(dir, "data.raw"), datafile, "1M")
	srv := newImageServer(t)
	for name, p := range map[string]string{"backing file": backed, "external data file": datafile} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			u := srv.put(filepath.Base(p), b)
			target := targetFile(t, 2<<20)
			_, err = WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(b)), target, testOptions(target))
			var e *ipaerror.Error
			if !errors.As(err, &e) || e.Type != "InvalidImage" || !errors.Is(err, qcow2.ErrUnsupported) || !strings.Contains(err.Error(), name) {
				t.Fatalf("want InvalidImage naming the %s, got %v", name, err)
			}
		})
	}
}

// A qcow2 inside gzip streams too (no Range possible): qemu-img puts the
// metadata first, so the forward reader never needs to go back far.
func TestWriteImageGzippedQcow2(t *testing.T) {
	raw := testImage(6<<20, 23)
	img := makeQcow2(t, raw, "-c")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(img)
	zw.Close()
	srv := newImageServer(t)
	u := srv.put("disk.qcow2.gz", gz.Bytes())
	target := targetFile(t, 8<<20)
	res, err := WriteImage(context.Background(), imageInfo("img", []string{u}, sha256hex(gz.Bytes())), target, testOptions(target))
	if err != nil {
		t.Fatal(err)
	}
	checkTarget(t, target, raw)
	if res.Compression != CompressionGzip || res.Format != FormatQcow2 {
		t.Errorf("result %+v", res)
	}
}
