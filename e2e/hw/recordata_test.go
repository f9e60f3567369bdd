package hw

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/ata"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestATAEraseInVM shows the native ATA path on QEMU's SATA disk: in the
// agent ramdisk, ataguest sends IDENTIFY DEVICE through SG_IO to an
// ide-hd on the q35 AHCI, parses it (QEMU's model and serial, no Security
// feature set), and runs erase_devices' per-device erase with IPA's
// defaults (ATA secure erase enabled, no fallback on failure): security
// not supported, so IPA's fallback overwrites the disk, with no secure
// erase error. The host then finds the disk file all zeros. The security
// commands' refusals are recorded in the same boot and must be aborts.
func TestATAEraseInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine (about a minute under TCG)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("SKIPPED: needs qemu-system-x86_64 (./test.sh installs qemu-system-x86)")
	}
	start := time.Now()
	ctx := t.Context()
	rd, err := qemu.BuildGuestRamdisk(ctx, "./internal/testbed/guest/ata", nil)
	if err != nil {
		t.Fatal(err)
	}
	built := time.Since(start)
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-ata"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.MemoryMB = 512
	m.NICs = m.NICs[:1]
	// One small SATA disk: the overwrite under TCG stays short.
	sata := m.Disks[len(m.Disks)-1]
	sata.SizeMB = 8
	m.Disks = []qemu.Disk{sata}
	m.Kernel, m.Initrd = rd.Kernel, rd.Initrd
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Something to erase: a pattern over the whole disk.
	if err := os.WriteFile(m.DiskPath(sata.ID), bytes.Repeat([]byte("tenant data! "), sata.SizeMB<<20/13+1)[:sata.SizeMB<<20], 0o644); err != nil {
		t.Fatal(err)
	}
	vm, tgz, err := qemu.RunUpload(ctx, m, "erase", "/run/ata", qemu.Options{})
	if vm != nil {
		t.Cleanup(vm.Kill)
		t.Logf("VM: %s from start to power-off (ramdisk %s before); serial console in %s", vm.Elapsed().Round(time.Second), built.Round(time.Second), vm.LogPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(t.TempDir(), "got")
	if err := qemu.ExtractTarGz(bytes.NewReader(tgz), got); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(got, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	id, err := ata.ParseIdentify(read("sda.identify"))
	if err != nil {
		t.Fatal(err)
	}
	if id.Model() != sata.Model || id.Serial() != sata.Serial || id.Security().Supported {
		t.Errorf("IDENTIFY: model %q serial %q security %s", id.Model(), id.Serial(), id.Security())
	}
	for _, c := range []struct {
		name string
		op   byte
	}{{"erase-prepare", ata.OpSecurityErasePrepare}, {"unlock", ata.OpSecurityUnlock}} {
		var hdr struct {
			Status       byte   `json:"status"`
			HostStatus   uint16 `json:"host_status"`
			DriverStatus uint16 `json:"driver_status"`
		}
		if err := json.Unmarshal(read("sda."+c.name+".json"), &hdr); err != nil {
			t.Fatal(err)
		}
		r := ata.Reply{Status: hdr.Status, HostStatus: hdr.HostStatus, DriverStatus: hdr.DriverStatus, Sense: read("sda." + c.name + ".sense")}
		err := ata.Check("/dev/sda", c.op, r)
		if ce := (*ata.CommandError)(nil); !errors.As(err, &ce) || !ce.Aborted() {
			t.Errorf("%s: %v, want an abort", c.name, err)
		}
	}
	var res struct {
		erase.DeviceResult
		Error string `json:"error"`
	}
	if err := json.Unmarshal(read("sda.erase.json"), &res); err != nil {
		t.Fatal(err)
	}
	if res.Error != "" || res.Method != erase.MethodOverwrite || strings.Contains(res.Detail, "secure erase failed") || res.Bytes != 2*int64(sata.SizeMB)<<20 {
		t.Errorf("erase result %+v", res)
	}
	if l, ok := vm.Find(logtext.Msg(erase.EventATASecurityState)); !ok || !strings.Contains(l.Text, "not supported") {
		t.Errorf("no log of the security state read through IDENTIFY (%q)", l.Text)
	}
	disk, err := os.ReadFile(m.DiskPath(sata.ID))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk, make([]byte, len(disk))) {
		t.Error("the SATA disk is not all zeros after the overwrite's zero pass")
	}
	t.Logf("%s in all", time.Since(start).Round(time.Second))
}
