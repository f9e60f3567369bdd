// Package faildisk boots the agent ramdisk in QEMU with disks that fail:
// device-mapper error ranges, a disk turned to error while a write runs,
// and a dm-delay slow disk, under write_image (raw, qcow2, with a config
// drive, a partition image) and the erase clean steps. Device-mapper is
// not usable on every test host (a sandboxed kernel has no dm_mod), and
// the ramdisk's own kernel is the one that matters, so the scenarios run
// inside the VM (guest/) against the agent in that process and a fake
// Ironic there; this side builds the images, boots, and reads the
// verdicts from the console.
package faildisk

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// scenarios the guest runs, in order (guest/main.go).
var scenarios = []string{
	"write_image_raw_error_range",
	"write_image_qcow2_error_range",
	"write_image_disk_vanishes",
	"write_image_slow_disk",
	"write_image_stuck_disk",
	"erase_devices_metadata_error_at_start",
	"erase_devices_metadata_error_at_end",
	"erase_devices_metadata_unreadable_probe",
	"erase_devices_unreadable_probe",
	"erase_devices_error_range",
	"erase_devices_disk_vanishes",
	"erase_devices_flakey_disk",
	"erase_devices_express_error_at_end",
	"erase_devices_slow_disk",
	"erase_devices_stuck_disk",
	"configdrive_error_in_partition",
	"partition_table_error_at_start",
	"partition_image_error_in_root",
	"write_image_after_failures",
	// Not an agent command: the multipath path checker against the
	// kernel's dm-multipath (guest/multipath.go).
	"multipath_path_checker",
}

// TestFailingDisks boots one VM that carries every scenario (one boot:
// QEMU runs under TCG on shared cores) and fails naming each scenario the
// guest reports failed or never reported.
func TestFailingDisks(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine (several minutes under TCG)")
	}
	for _, p := range []string{"qemu-system-x86_64", "qemu-img"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (./test.sh installs it): %v", p, err)
		}
	}
	ctx := t.Context()
	work := t.TempDir()
	files := map[string]string{}
	put := func(name string, data []byte) string {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files["faildisk/"+name] = p
		return p
	}
	raw := put("disk.raw", mbrImage(12<<20, 0xfa11d15c))
	qcow := filepath.Join(work, "disk.qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, qcow).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	files["faildisk/disk.qcow2"] = qcow
	// For the disk that vanishes mid-write: more writes than the two in
	// flight when it goes (12 MiB of data, then 36 MiB of zeros the
	// writer sends as zero-outs), so one always meets the error table.
	put("big.raw", append(mbrImage(12<<20, 0xfa11b16), make([]byte, 36<<20)...))
	put("part.img", pattern(4<<20, 3))
	put("configdrive.iso", pattern(1<<20, 5))

	start := time.Now()
	rd, err := qemu.BuildGuestRamdisk(ctx, "./internal/testbed/guest/faildisk", files)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest ramdisk ready in %s", time.Since(start).Round(time.Second))
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-faildisk"
	m.Dir = filepath.Join(work, "vm")
	m.MemoryMB = 768
	m.Disks = []qemu.Disk{{ID: "vblk", Kind: qemu.DiskVirtioBlk, SizeMB: 192, Serial: "FAILDISK-0001"}}
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: "52:54:00:fa:11:01", Backend: qemu.NICIsolated}}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "ironic_agent.cmd=check ironic_agent.dhcp=none ironic_agent.exit=poweroff ironic_agent.modules=dm_mod,dm_flakey,dm_delay,loop,dm_multipath,dm_service_time"
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	err = vm.Wait(ctx)
	if keep := os.Getenv("FAILDISK_CONSOLE"); keep != "" {
		// The agent's whole log is on the console; the temporary
		// directory holding it goes with the test.
		if data, rerr := os.ReadFile(vm.LogPath); rerr == nil {
			_ = os.WriteFile(keep, data, 0o644)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("VM ran %s", vm.Elapsed().Round(time.Second))

	got := map[string]string{}
	done := false
	for _, l := range vm.Lines() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l.Text), "faildisk: ")
		if !ok {
			continue
		}
		verdict, more, _ := strings.Cut(rest, " ")
		switch verdict {
		case "done":
			done = true
		case "ok", "fail":
			name, _, _ := strings.Cut(more, " ")
			got[name] = rest
		default:
			t.Logf("guest: %s", rest)
		}
	}
	if !done {
		t.Fatalf("the guest did not finish (serial console in %s):\n%s", vm.LogPath, tail(vm.Lines(), 80))
	}
	for _, s := range scenarios {
		r := got[s]
		switch {
		case r == "":
			t.Errorf("%s: the guest said nothing about it", s)
		case strings.HasPrefix(r, "fail "):
			t.Errorf("%s", r)
		default:
			t.Logf("%s", r)
		}
	}
}

func tail(lines []qemu.Line, n int) string {
	var b strings.Builder
	for _, l := range lines[max(0, len(lines)-n):] {
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}

// pattern is n bytes with no 512-byte run of zeros, so the writer sends
// every byte to the disk.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i>>13) ^ seed | 1
	}
	return b
}

// mbrImage is a pattern with an MBR (disk signature sig) holding one
// Linux partition, as prepare_image wants partitions on the written disk.
func mbrImage(n int, sig uint32) []byte {
	img := pattern(n, 0)
	clear(img[440:512])
	binary.LittleEndian.PutUint32(img[440:], sig)
	img[446+4] = 0x83
	binary.LittleEndian.PutUint32(img[446+8:], 2048)
	binary.LittleEndian.PutUint32(img[446+12:], uint32(n/512-2048))
	img[510], img[511] = 0x55, 0xaa
	return img
}
