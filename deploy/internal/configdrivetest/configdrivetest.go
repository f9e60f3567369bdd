// Package configdrivetest builds and checks config drives for the tests of
// deploy/partition and deploy/image: an ISO9660 image labelled config-2
// holding openstack/latest/meta_data.json, and a check that a partition
// holds it.
package configdrivetest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// MetaData is the meta_data.json the test config drive holds.
const MetaData = `{"uuid": "2a8f4b2c-0000-4000-8000-000000000001", "hostname": "cd-test"}`

// MakeISO builds an ISO9660 image labelled config-2 holding
// openstack/latest/meta_data.json, with go-diskfs (no mkisofs needed).
func MakeISO(t testing.TB) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cd.iso")
	d, err := diskfs.Create(path, 4<<20, diskfs.SectorSizeDefault)
	if err != nil {
		t.Fatal(err)
	}
	d.LogicalBlocksize = 2048
	fs, err := d.CreateFilesystem(disk.FilesystemSpec{FSType: filesystem.TypeISO9660, VolumeLabel: "config-2", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Mkdir("/openstack/latest"); err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile("/openstack/latest/meta_data.json", os.O_CREATE|os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(MetaData)); err != nil {
		t.Fatal(err)
	}
	if err := fs.(*iso9660.FileSystem).Finalize(iso9660.FinalizeOptions{RockRidge: true, VolumeIdentifier: "config-2"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if blockdev.ISOVolumeID(b) != "config-2" {
		t.Fatalf("test ISO label is %q", blockdev.ISOVolumeID(b))
	}
	return b
}

// GzipBase64 is b gzipped and base64 encoded, as Ironic sends a config drive.
func GzipBase64(t testing.TB, b []byte) string {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// Check proves with blkid and a read-only mount that part holds
// the config-2 ISO with its files.
func Check(t testing.TB, part string) {
	t.Helper()
	out := looptest.Run(t, "blkid", "-p", "-o", "export", part)
	if !strings.Contains(out, "LABEL=config-2") || !strings.Contains(out, "TYPE=iso9660") {
		t.Errorf("blkid %s:\n%s", part, out)
	}
	mnt := t.TempDir()
	out2, err := exec.Command("mount", "-o", "ro", "-t", "iso9660", part, mnt).CombinedOutput()
	if err != nil && strings.Contains(string(out2), "unknown filesystem type") {
		// Some kernels (this project's CI VMs among them) lack iso9660;
		// read the file with go-diskfs' ISO reader instead.
		t.Logf("kernel cannot mount iso9660 (%s); reading %s with go-diskfs", strings.TrimSpace(string(out2)), part)
		// go-diskfs sizes block devices by stat (0): copy the partition
		// into a file first.
		src, err := os.ReadFile(part)
		if err != nil {
			t.Fatal(err)
		}
		copyPath := filepath.Join(t.TempDir(), "part.iso")
		if err := os.WriteFile(copyPath, src, 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := diskfs.Open(copyPath, diskfs.WithOpenMode(diskfs.ReadOnly), diskfs.WithSectorSize(2048))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		d.LogicalBlocksize = 2048
		fs, err := d.GetFilesystem(0)
		if err != nil {
			t.Fatalf("read ISO on %s: %v", part, err)
		}
		f, err := fs.OpenFile("/openstack/latest/meta_data.json", os.O_RDONLY)
		if err != nil {
			t.Fatalf("open meta_data.json on %s: %v", part, err)
		}
		b, err := io.ReadAll(f)
		if err != nil || string(b) != MetaData {
			t.Errorf("meta_data.json on %s: %q %v", part, b, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("mount %s: %v\n%s", part, err, out2)
	}
	defer func() { _ = exec.Command("umount", mnt).Run() }()
	b, err := os.ReadFile(filepath.Join(mnt, "openstack/latest/meta_data.json"))
	if err != nil || string(b) != MetaData {
		t.Errorf("meta_data.json on %s: %q %v", part, b, err)
	}
}
