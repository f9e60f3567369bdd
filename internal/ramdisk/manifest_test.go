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

	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod/kmodtest"
)

// TestManifest keeps the shipped manifests parsing and holding what the
// issue asks for, each module with the hardware it is for.
func TestManifest(t *testing.T) {
	m := Manifest()
	names := map[string]ManifestEntry{}
	var dirs []string
	for _, e := range m {
		switch {
		case e.Dir != "":
			dirs = append(dirs, e.Dir)
		case e.Exclude != "":
			if e.Comment == "" {
				t.Errorf("exclude %s: no reason", e.Exclude)
			}
		default:
			names[e.Name] = e
			if e.Comment == "" {
				t.Errorf("%s: no comment naming the hardware", e.Name)
			}
		}
		if e.Group == "" {
			t.Errorf("%+v: in no [group]", e)
		}
	}
	for _, want := range []string{"ice", "i40e", "iavf", "ixgbe", "igb", "igc", "e1000e", "bnxt_en", "tg3", "bnx2",
		"bnx2x", "mlx4_en", "mlx5_core", "qede", "be2net", "enic", "sfc", "nfp", "atlantic", "r8169", "ena", "gve",
		"hns3", "bonding", "8021q", "ahci", "nvme", "megaraid_sas", "mpt3sas", "mpi3mr", "smartpqi", "hpsa", "aacraid",
		"qla2xxx", "lpfc", "virtio_pci", "virtio_blk", "virtio_scsi", "virtio_net", "virtio_rng", "vmw_pvscsi",
		"sd_mod", "sr_mod", "sg", "xhci_pci", "usb_storage", "uas", "dm_mod", "dm_multipath", "dm_service_time", "dm_round_robin",
		"md_mod", "raid0", "raid1",
		"raid10", "raid456", "ipmi_si", "ipmi_ssif", "ipmi_devintf", "e1000", "efivarfs", "vfat", "nls_cp437",
		"nls_ascii",
		// What servers have that an inclusion list forgot.
		"xhci_pci", "ehci_pci", "ohci_pci", "uhci_hcd", "usbhid", "hid_generic", "xfs", "btrfs", "vmxnet3", "cxgb4",
		"pm80xx", "isci", "mvsas", "mptsas", "ata_piix", "cdc_ether", "hv_storvsc", "hv_netvsc", "hv_vmbus",
		"xen_blkfront", "xen_netfront", "mana"} {
		if _, ok := names[want]; !ok {
			t.Errorf("manifest lacks %s", want)
		}
	}
	for _, want := range []string{"kernel/drivers/scsi", "kernel/drivers/ata", "kernel/drivers/nvme", "kernel/drivers/net/ethernet",
		"kernel/drivers/usb/host", "kernel/drivers/usb/storage", "kernel/drivers/md", "kernel/drivers/block", "kernel/drivers/message/fusion"} {
		if !slices.Contains(dirs, want) {
			t.Errorf("manifest takes no subtree %s", want)
		}
	}
	// The arm64 section: the SoC NICs and SAS HBAs, the SSIF BMC's I2C
	// controllers; and x86's own parts marked amd64.
	for _, want := range []string{"hns3", "hclge", "hisi_sas_v3_hw", "nicvf", "thunder_bgx", "mvpp2", "mvneta",
		"xgene_enet", "ahci_xgene", "amd_xgbe", "ahci_platform", "virtio_mmio", "i2c_designware_platform"} {
		if e := names[want]; e.Arch != "arm64" {
			t.Errorf("%s is not in the arm64 section: %+v", want, e)
		}
	}
	for _, want := range []string{"vmw_pvscsi", "isci", "crc32c_intel", "i2c_i801", "uhci_hcd"} {
		if e := names[want]; e.Arch != "amd64" {
			t.Errorf("%s (x86 only) is not marked amd64: %+v", want, e)
		}
	}
	for _, a := range Arches() {
		arch := ManifestForArch(m, a.Name)
		if !slices.ContainsFunc(arch, func(e ManifestEntry) bool { return e.Name == "ipmi_ssif" }) ||
			!slices.ContainsFunc(arch, func(e ManifestEntry) bool { return e.Name == "virtio_blk" }) {
			t.Errorf("%s: the manifest lacks ipmi_ssif or virtio_blk", a.Name)
		}
		if i := slices.IndexFunc(arch, func(e ManifestEntry) bool { return e.Arch != "" && e.Arch != a.Name }); i >= 0 {
			t.Errorf("%s: ManifestForArch kept %+v", a.Name, arch[i])
		}
	}
	var fw []string
	for _, p := range FirmwarePackages() {
		fw = append(fw, p.Name)
	}
	if !slices.Contains(fw, "firmware-misc-nonfree") || !slices.Contains(fw, "firmware-bnx2x") || !slices.Contains(fw, "firmware-intel-misc") {
		t.Errorf("firmware packages: %v", fw)
	}
}

// TestSelectModules resolves a manifest with subtrees and exclusions
// against a kernel tree: what each dir takes, what the exclusions leave
// out (paths and name globs, never a named module), the groups, and the
// dependency closure and per-group sizes of the build.
func TestSelectModules(t *testing.T) {
	dir := t.TempDir()
	k := &Kernel{Package: "linux-image-test", Version: "6.12.0-test", Vmlinuz: filepath.Join(dir, "vmlinuz"),
		ModulesDir: filepath.Join(dir, "lib/modules/6.12.0-test")}
	write := func(rel string, data []byte) {
		t.Helper()
		p := filepath.Join(k.ModulesDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(k.Vmlinuz, []byte("bzImage stand-in"), 0o644); err != nil {
		t.Fatal(err)
	}
	mod := func(kv ...string) []byte { return kmodtest.Module(append([]string{"license=GPL"}, kv...)...) }
	write("kernel/drivers/scsi/hba.ko", mod("alias=pci:v00001000d*", "depends=scsi_lib"))
	write("kernel/drivers/scsi/scsi_lib.ko", mod())
	write("kernel/drivers/scsi/scsi_debug.ko", mod())
	write("kernel/drivers/scsi/pcmcia/card_cs.ko", mod())
	write("kernel/drivers/scsi/old_cs.ko", mod())
	write("kernel/drivers/net/ethernet/a/nic-a.ko", mod("alias=pci:v00008086d*", "depends=libnic"))
	write("kernel/lib/libnic.ko", mod(strings.Repeat("x", 4000)))
	write("kernel/drivers/net/wireless/wifi.ko", mod("alias=pci:v0000168cd*"))
	write("kernel/drivers/input/kbd.ko", mod("alias=hid:b0003*"))
	write("kernel/fs/xfs/xfs.ko", mod("depends=libcrc32c"))
	write("kernel/lib/libcrc32c.ko", mod("softdep=pre: crc32c"))
	write("modules.builtin", []byte("kernel/crypto/crc32c.ko\n"))
	manifest := `
[x]
exclude kernel/drivers/net/wireless # Wi-Fi
exclude kernel/drivers/input # input
exclude kernel/drivers/scsi/pcmcia # PC Card
exclude *_cs # PC Card
exclude scsi_debug # fake disk
[storage]
dir kernel/drivers/scsi
[nic]
dir kernel/drivers/net/ethernet
[fs]
dir kernel/fs/xfs
kbd # the BMC keyboard, excluded subtree or not
`
	entries, err := ParseManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := kmod.Open(k.ModulesDir)
	if err != nil {
		t.Fatal(err)
	}
	names, group, rep, err := SelectModules(tree, entries, k.Version)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"hba", "scsi_lib", "nic_a", "xfs", "kbd"}; !slices.Equal(names, want) {
		t.Errorf("selected %v, want %v", names, want)
	}
	if want := map[string]string{"hba": "storage", "scsi_lib": "storage", "nic_a": "nic", "xfs": "fs", "kbd": "fs"}; !reflect.DeepEqual(group, want) {
		t.Errorf("groups %v, want %v", group, want)
	}
	wantExcl := []Exclusion{{"kernel/drivers/net/wireless", "Wi-Fi", 1}, {"kernel/drivers/input", "input", 1},
		{"kernel/drivers/scsi/pcmcia", "PC Card", 1}, {"*_cs", "PC Card", 1}, {"scsi_debug", "fake disk", 1}}
	if !reflect.DeepEqual(rep.Excluded, wantExcl) {
		t.Errorf("exclusions %+v, want %+v", rep.Excluded, wantExcl)
	}
	// A dir with nothing below it is a mistake, unless optional.
	bad, _ := ParseManifest("[x]\ndir kernel/drivers/nosuch\n")
	if _, _, _, err := SelectModules(tree, bad, k.Version); err == nil || !strings.Contains(err.Error(), "kernel/drivers/nosuch has no module") {
		t.Errorf("empty dir: %v", err)
	}
	// The build closes over the dependencies and books each group.
	res, err := Build(context.Background(), Options{Kernel: k, Agent: staticBinary(t), Manifest: entries}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range res.Modules {
		got = append(got, m.Name)
	}
	if want := []string{"scsi_lib", "hba", "libnic", "nic_a", "libcrc32c", "xfs", "kbd"}; !slices.Equal(got, want) {
		t.Errorf("modules %v, want %v (dependencies first)", got, want)
	}
	files := map[string]int{}
	for _, s := range res.Sizes {
		if strings.HasPrefix(s.Item, "modules ") {
			files[s.Item] = s.Files
			if s.Bytes <= 0 || s.Gzip <= 0 {
				t.Errorf("%s: %d bytes, %d gzip", s.Item, s.Bytes, s.Gzip)
			}
		}
	}
	if want := map[string]int{"modules storage": 2, "modules (dependencies)": 2, "modules nic": 1, "modules fs": 2}; !reflect.DeepEqual(files, want) {
		t.Errorf("size pieces %v, want %v", files, want)
	}
}

func TestParseManifest(t *testing.T) {
	got, err := ParseManifest("# head\n\n[nic]\nice   # Intel E810\nhns3 optional: arm64 only # HiSilicon\n[x]\nfoo\nbonding ondemand\n8021q ondemand optional: y # VLAN\n" +
		"nicvf [arm64] # ThunderX\nisci [amd64] ondemand optional: z\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []ManifestEntry{
		{Name: "ice", Group: "nic", Comment: "Intel E810"},
		{Name: "hns3", Group: "nic", Optional: true, OptionalReason: "arm64 only", Comment: "HiSilicon"},
		{Name: "foo", Group: "x"},
		{Name: "bonding", Group: "x", OnDemand: true},
		{Name: "8021q", Group: "x", OnDemand: true, Optional: true, OptionalReason: "y", Comment: "VLAN"},
		{Name: "nicvf", Group: "x", Arch: "arm64", Comment: "ThunderX"},
		{Name: "isci", Group: "x", Arch: "amd64", OnDemand: true, Optional: true, OptionalReason: "z"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"a\na\n", "a b\n", "a ondemand b\n", "a optional:\n", "[\n", "[]\n",
		"a [x86]\n", "a []\n", "a [arm64\n", "a ondemand [arm64]\n", "dir x [arm64]\n"} {
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
	man := []ManifestEntry{{Name: "absentmod", Optional: true, OptionalReason: "a part some kernels lack"}}
	res, err := Build(context.Background(), Options{Kernel: k, Agent: staticBinary(t), Modules: []string{"fwmod", "absentmod", "inkernel"},
		Manifest: man, Firmware: []FirmwarePackage{pa, pb}}, t.TempDir())
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
	if !reflect.DeepEqual(res.Builtin, []string{"inkernel"}) || len(res.Absent) != 1 || !strings.HasPrefix(res.Absent[0], "absentmod: ") {
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
