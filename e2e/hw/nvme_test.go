package hw

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/deploy/nvme"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

var update = flag.Bool("update", false, "write the recorded exchanges to deploy/nvme/testdata")

// recording is where -update writes the exchanges with QEMU's controller.
const recording = "../testdata/qemu-7.2-nvme.json"

// TestNativeNVMeInQEMU sends deploy/nvme's admin commands to QEMU's
// emulated NVMe controller through the guest kernel's NVME_IOCTL_ADMIN_CMD
// (internal/testbed/guest/nvme), then runs the agent's erase_devices on the
// namespace, and reads the disk file afterwards: every byte the host and
// the guest wrote must be gone. QEMU 7.2 offers Format NVM without
// cryptographic erase and no Sanitize: the guest records the controller's
// refusals of both, and erase_devices must take IPA's user-data erase
// (SES 1).
func TestNativeNVMeInQEMU(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine (about a minute under TCG)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("SKIPPED: needs qemu-system-x86_64 (./test.sh installs qemu-system-x86)")
	}
	ctx := t.Context()
	rd, err := qemu.BuildGuestRamdisk(ctx, "./internal/testbed/guest/nvme", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-nvme"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.MemoryMB = 512
	m.NICs = m.NICs[:1]
	m.Disks = []qemu.Disk{{ID: "nvme", Kind: qemu.DiskNVMe, SizeMB: 64, Serial: "LAB-NVME-0001"}}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	disk := m.DiskPath("nvme")
	size := int64(m.Disks[0].SizeMB) << 20
	fill := bytes.Repeat([]byte("host pattern "), int(size+12)/13)[:size]
	if err := os.WriteFile(disk, fill, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	vm, tgz, err := qemu.RunUpload(ctx, m, "nvme", "/run/nvme", qemu.Options{})
	if vm != nil {
		t.Cleanup(vm.Kill)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("VM ran %v", time.Since(start).Round(time.Second))
	dir := t.TempDir()
	if err := qemu.ExtractTarGz(bytes.NewReader(tgz), dir); err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile(filepath.Join(dir, "exchanges.json"))
	if err != nil {
		t.Fatal(err)
	}
	xs, err := nvme.ParseExchanges(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xs {
		t.Logf("%-34s status %#04x %s", x.What, x.Status, x.Errno)
	}
	var rep struct {
		Controller                                                      nvme.Controller
		NSID                                                            uint32
		Namespace                                                       nvme.Namespace
		SanitizeLogErr, SanitizeErr, CryptoFormatErr, UserDataFormatErr string
		CryptoFormatAccepted                                            bool
	}
	qemu.ReadJSON(t, filepath.Join(dir, "controller.json"), &rep)
	t.Logf("controller %+v, nsid %d, namespace %+v", rep.Controller, rep.NSID, rep.Namespace)
	c := rep.Controller
	if c.SerialNumber != "LAB-NVME-0001" || c.VendorID != 0x1b36 || c.OACS&nvme.OACSFormatNVM == 0 {
		t.Errorf("Identify Controller: %+v, want QEMU's (vendor 0x1b36) with the serial given and Format NVM", c)
	}
	if rep.NSID != 1 || rep.Namespace.Size != uint64(size)/uint64(rep.Namespace.BlockSize) {
		t.Errorf("namespace %d %+v, want nsid 1 with %d bytes", rep.NSID, rep.Namespace, size)
	}
	if c.SANICAP == 0 && !strings.Contains(rep.SanitizeErr, "Sanitize (SANACT 4) on /dev/nvme0n1: NVMe status") {
		t.Errorf("a Sanitize on a controller without SANICAP: %q, want its refusal", rep.SanitizeErr)
	}
	if c.FNA&nvme.FNACryptoErase == 0 && rep.CryptoFormatAccepted {
		// QEMU 7.2 does: its Format NVM ignores SES and zeroes the
		// namespace whatever it asks for. IPA's table never sends SES 2
		// without the FNA bit, so nothing here depends on it.
		t.Logf("the controller accepted a cryptographic erase it does not report (fna %#x)", c.FNA)
	}
	if rep.UserDataFormatErr != "" {
		t.Errorf("Format NVM with SES 1: %s", rep.UserDataFormatErr)
	}
	t.Logf("sanitize log: %s; sanitize: %s; crypto format: %s", rep.SanitizeLogErr, rep.SanitizeErr, rep.CryptoFormatErr)

	var er struct {
		Results map[string]erase.DeviceResult
		Seconds float64
		Error   string
	}
	qemu.ReadJSON(t, filepath.Join(dir, "erase_devices.json"), &er)
	want := erase.MethodNVMeUserData
	if c.FNA&nvme.FNACryptoErase != 0 {
		want = erase.MethodNVMeCrypto
	}
	if r := er.Results["/dev/nvme0n1"]; er.Error != "" || r.Method != want {
		t.Errorf("erase_devices in the guest: %+v %q, want %q", er.Results, er.Error, want)
	}
	t.Logf("erase_devices: %+v in %.2fs", er.Results, er.Seconds)

	// The disk file once QEMU has exited: nothing of the host's pattern
	// nor of the guest's marker is left.
	vm.Kill()
	got, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(got, func(r rune) bool { return r != 0 }); i >= 0 {
		t.Errorf("the namespace holds data at byte %d after erase_devices: %q", i, got[i:min(len(got), i+32)])
	}

	if *update {
		if err := os.WriteFile(recording, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", recording)
	}
}
