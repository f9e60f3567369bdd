package ramdisk

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod/kmodtest"
)

// TestManifest keeps the shipped manifests parsing and holding what the
// issue asks for, each module with the hardware it is for.
func TestManifest(t *testing.T) {
	m := Manifest()
	names := map[string]ManifestEntry{}
	for _, e := range m {
		names[e.Name] = e
		if e.Comment == "" {
			t.Errorf("%s: no comment naming the hardware", e.Name)
		}
		if e.Group == "" {
			t.Errorf("%s: in no [group]", e.Name)
		}
	}
	for _, want := range []string{"ice", "i40e", "iavf", "ixgbe", "igb", "igc", "e1000e", "bnxt_en", "tg3", "bnx2",
		"bnx2x", "mlx4_en", "mlx5_core", "qede", "be2net", "enic", "sfc", "nfp", "atlantic", "r8169", "ena", "gve",
		"hns3", "bonding", "8021q", "ahci", "nvme", "megaraid_sas", "mpt3sas", "mpi3mr", "smartpqi", "hpsa", "aacraid",
		"qla2xxx", "lpfc", "virtio_pci", "virtio_blk", "virtio_scsi", "virtio_net", "virtio_rng", "vmw_pvscsi",
		"sd_mod", "sr_mod", "sg", "xhci_pci", "usb_storage", "uas", "dm_mod", "dm_multipath", "dm_service_time", "dm_round_robin",
		"md_mod", "raid0", "raid1",
		"raid10", "raid456", "ipmi_si", "ipmi_ssif", "ipmi_devintf", "e1000", "efivarfs", "vfat", "nls_cp437",
		"nls_ascii"} {
		if _, ok := names[want]; !ok {
			t.Errorf("manifest lacks %s", want)
		}
	}
	if e := names["hns3"]; !e.Optional || e.OptionalReason == "" {
		t.Errorf("hns3 (arm64 only) is not optional with a reason: %+v", e)
	}
	if p := FirmwarePackages(); !slices.Contains(p, "firmware-misc-nonfree") || !slices.Contains(p, "firmware-bnx2x") {
		t.Errorf("firmware packages: %v", p)
	}
}

func TestParseManifest(t *testing.T) {
	got, err := ParseManifest("# head\n\n[nic]\nice   # Intel E810\nhns3 optional: arm64 only # HiSilicon\n[x]\nfoo\nbonding ondemand\n8021q ondemand optional: y # VLAN\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []ManifestEntry{
		{Name: "ice", Group: "nic", Comment: "Intel E810"},
		{Name: "hns3", Group: "nic", Optional: true, OptionalReason: "arm64 only", Comment: "HiSilicon"},
		{Name: "foo", Group: "x"},
		{Name: "bonding", Group: "x", OnDemand: true},
		{Name: "8021q", Group: "x", OnDemand: true, Optional: true, OptionalReason: "y", Comment: "VLAN"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"a\na\n", "a b\n", "a ondemand b\n", "a optional:\n", "[\n", "[]\n"} {
		if _, err := ParseManifest(bad); err == nil {
			t.Errorf("ParseManifest(%q) accepted", bad)
		}
	}
}

func TestHostDebianSources(t *testing.T) {
	etc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(etc, "sources.list.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"sources.list": "# c\ndeb http://m.example/debian bookworm main contrib\ndeb-src http://m.example/debian bookworm main\n" +
			"deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm-updates main\ndeb http://other.example/x stable extra\n",
		"sources.list.d/debian.sources": "Types: deb\n# note\nURIs: http://m.example/debian\nSuites: bookworm bookworm-updates\n" +
			"Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n" +
			"Types: deb\nURIs: http://s.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n" +
			"Types: deb\nURIs: http://off.example\nSuites: x\nComponents: main\nEnabled: no\n",
		"sources.list.d/other.sources.disabled": "Types: deb\nURIs: http://no.example\nSuites: x\nComponents: main\n",
	}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(etc, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := HostDebianSources(etc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"deb http://m.example/debian bookworm",
		"deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm-updates",
		"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://m.example/debian bookworm",
		"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://m.example/debian bookworm-updates",
		"deb http://s.example/debian-security bookworm-security",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := HostDebianSources(t.TempDir()); err == nil {
		t.Error("no sources: no error")
	}
}

// TestBuildFirmwareAndReport builds with a module naming firmware, an
// optional module the kernel lacks and a built-in one: the firmware the
// packages have goes in below lib/firmware (an .xz one as such), the rest
// is reported, and a package's absolute symlink (which would point at the
// build host's firmware) is not followed.
func TestBuildFirmwareAndReport(t *testing.T) {
	dir := t.TempDir()
	k := &Kernel{Package: "linux-image-test", Version: "6.1.0-test", Vmlinuz: filepath.Join(dir, "vmlinuz"),
		ModulesDir: filepath.Join(dir, "lib/modules/6.1.0-test")}
	write := func(p string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(k.Vmlinuz, []byte("bzImage stand-in"))
	write(filepath.Join(k.ModulesDir, "kernel/fwmod.ko"), kmodtest.Module("license=GPL", "alias=pci:v00001234d*",
		"firmware=vendor/a.bin", "firmware=b.bin", "firmware=gone.bin", "firmware=../../etc/passwd", "firmware=vendor/a.bin"))
	write(filepath.Join(k.ModulesDir, "modules.builtin"), []byte("kernel/drivers/x/inkernel.ko\n"))
	pa := FirmwarePackage{Name: "fw-a", Dir: filepath.Join(dir, "pa")}
	pb := FirmwarePackage{Name: "fw-b", Dir: filepath.Join(dir, "pb")}
	write(filepath.Join(pa.Dir, "lib/firmware/vendor/a.bin"), []byte("AAAA"))
	write(filepath.Join(pb.Dir, "lib/firmware/vendor/a.bin"), []byte("not this one"))
	write(filepath.Join(pb.Dir, "usr/lib/firmware/b.bin.xz"), []byte("XZ"))
	if err := os.Symlink("/etc/passwd", filepath.Join(pb.Dir, "lib/firmware/gone.bin")); err != nil {
		t.Fatal(err)
	}
	res, err := Build(context.Background(), Options{Kernel: k, Agent: staticBinary(t), Modules: []string{"fwmod", "hns3", "inkernel"},
		Firmware: []FirmwarePackage{pa, pb}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A file Debian ships in a package the build was not given fails it.
	_, err = Build(context.Background(), Options{Kernel: k, Agent: staticBinary(t), Modules: []string{"fwmod"},
		Firmware: []FirmwarePackage{pa, pb}, FirmwareIndex: map[string][]string{"gone.bin.xz": {"fw-c"}}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "gone.bin (for fwmod, in fw-c)") {
		t.Errorf("firmware in an unlisted package: %v", err)
	}
	wantFW := []FirmwareFile{{Name: "vendor/a.bin", Package: "fw-a", Size: 4}, {Name: "b.bin.xz", Package: "fw-b", Size: 2}}
	if !reflect.DeepEqual(res.Firmware, wantFW) {
		t.Errorf("firmware %+v, want %+v", res.Firmware, wantFW)
	}
	wantMissing := []FirmwareRef{{"fwmod", "gone.bin"}, {"fwmod", "../../etc/passwd"}}
	if !reflect.DeepEqual(res.FirmwareMissing, wantMissing) {
		t.Errorf("missing %+v, want %+v", res.FirmwareMissing, wantMissing)
	}
	if !reflect.DeepEqual(res.Builtin, []string{"inkernel"}) || len(res.Absent) != 1 || !strings.HasPrefix(res.Absent[0], "hns3: ") {
		t.Errorf("builtin %v absent %v", res.Builtin, res.Absent)
	}
	var gz, unpacked int64
	items := map[string]bool{}
	for _, s := range res.Sizes {
		gz += s.Gzip
		unpacked += s.Bytes
		items[s.Item] = true
	}
	if unpacked != res.Uncompressed {
		t.Errorf("pieces add up to %d unpacked bytes, the archive is %d", unpacked, res.Uncompressed)
	}
	if st, err := os.Stat(res.Initramfs); err != nil || gz > st.Size() || gz < st.Size()-64 {
		t.Errorf("pieces add up to %d gzip bytes, the file is %v (%v)", gz, st.Size(), err)
	}
	for _, want := range []string{"agent", "modules (not in the manifest)", "firmware fw-a", "firmware fw-b"} {
		if !items[want] {
			t.Errorf("no size item %q: %+v", want, res.Sizes)
		}
	}
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("SKIPPED (archive listing): needs cpio (in test.sh)")
	}
	raw := gunzipFile(t, res.Initramfs)
	cmd := exec.Command("cpio", "-it", "--quiet")
	cmd.Stdin = bytes.NewReader(raw)
	list, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lib/firmware/vendor/a.bin\n", "lib/firmware/b.bin.xz\n"} {
		if !strings.Contains(string(list), want) {
			t.Errorf("initramfs lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(string(list), "gone.bin") || strings.Contains(string(list), "passwd") {
		t.Errorf("initramfs has a file from outside the packages:\n%s", list)
	}
}

// gunzipFile returns the decompressed content of the gzip file at p.
func gunzipFile(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzSources feeds apt source files (the build host's, outside bytes) and
// manifests to their parsers: no panic, and every source line found is a
// "deb" line with a URI and a suite.
func FuzzSources(f *testing.F) {
	f.Add("deb [signed-by=/k.gpg] http://m.example/debian bookworm main\n")
	f.Add("deb [ arch=amd64 ] http://m.example/debian bookworm main\ndeb [x\n")
	f.Add("Types: deb\nURIs: http://m.example/debian\nSuites: a b\nComponents: main\nSigned-By:\n -----BEGIN PGP\n .\n\n")
	f.Add("[nic]\nice optional: x # y\n")
	f.Add("lib/firmware/a.bin kernel/p,x/q\nlib/firmware/ \t\nlib/firmware/ x\nlib/firmware/b ,\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, l := range append(parseOneLineSources(s), parseDeb822Sources(s)...) {
			if !strings.HasPrefix(l, "deb ") || len(strings.Fields(l)) < 3 {
				t.Errorf("source line %q", l)
			}
		}
		_, _ = ParseManifest(s)
		for name, pkgs := range parseContents(s) {
			if name == "" || len(pkgs) == 0 {
				t.Errorf("contents entry %q %q", name, pkgs)
			}
		}
	})
}

func TestParseContents(t *testing.T) {
	got := parseContents("etc/default/x    non-free-firmware/misc/x\n" +
		"lib/firmware/intel/ice/ddp/ice.pkg     non-free-firmware/kernel/firmware-misc-nonfree\n" +
		"usr/lib/firmware/a b.bin\tkernel/p1,non-free-firmware/kernel/p2\n\nbad\n")
	want := map[string][]string{"intel/ice/ddp/ice.pkg": {"firmware-misc-nonfree"}, "a b.bin": {"p1", "p2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
