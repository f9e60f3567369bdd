package vm

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// The LUN of TestVMMultipath: one image behind two SCSI paths.
const (
	mpathSerial = "LAB-MPATH-0001"
	mpathWWN    = "0x5000c500aa55aa01"
	// mpathWWID is what scsi_id (udev's ID_SERIAL) makes of that WWN: the
	// map's name, the serial IPA reports for it (DM_SERIAL).
	mpathWWID = "35000c500aa55aa01"
)

// TestVMMultipath is issue 15's multipath scenario through Ironic under
// SeaBIOS: a VM whose 5 GiB LUN is reached over two virtio-scsi paths (one
// image, two scsi-hd devices with the same serial and WWN) beside a
// virtio disk. The agent makes the multipath map at start, as IPA does
// with multipathd; then
//   - inspection reports the LUN once, as a device-mapper disk with IPA's
//     serial and wwn for a map, and neither path;
//   - automated cleaning (erase_devices_metadata) erases the map once and
//     no path;
//   - a deploy of internal/osimage's BIOS whole-disk image whose
//     root-device hints name the LUN's wwn and serial chooses the map and
//     writes the image to it, and the host reads the image back from the
//     one file behind both paths; the config drive goes into a partition
//     the agent adds to the map's table and writes through its partition
//     map (kpartx's <map>-part2);
//   - the deployed OS boots from the LUN and reads that config drive.
func TestVMMultipath(t *testing.T) {
	seriesIndependent(t) // the agent's multipath, alike in every series
	rd := ramdisk(t)
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	began := time.Now()
	img := deployedOSImage(t, ctx, (*osimage.OS).BIOSDisk)
	macs := [2]string{"52:54:00:6d:0f:01", "52:54:00:6d:0f:02"}
	port := agentPortBase + 16
	m := serviceMachine(t, rd, "bios", port, macs)
	m.Name = "ironic-agent-multipath"
	m.MemoryMB = 768
	m.Disks = []qemu.Disk{
		{ID: "vblk", Kind: qemu.DiskVirtioBlk, SizeMB: 64, Serial: "LAB-VBLK-0001"},
		{ID: "lun", Kind: qemu.DiskSCSI, SizeMB: 5 << 10, Serial: mpathSerial, WWN: mpathWWN,
			Vendor: "LABVEND", Model: "LAB-MPATH-LUN", SCSITarget: 0, Paths: 2, RotationRate: 1},
	}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	lun := m.DiskPath("lun")
	// Metadata for cleaning to remove at both ends of the LUN.
	writeAt(t, lun, 0, pattern(64<<10, 0xa5))
	writeAt(t, lun, -(64 << 10), pattern(64<<10, 0xa5))

	node := enroll(t, ctx, s, ironic.NodeSpec{Name: "vm-multipath", InspectInterface: s.inspectInterface(),
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs)
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"},
	}).Err; err != nil {
		t.Fatal(err)
	}

	// Inspection.
	start := time.Now()
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetInspect}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "inspect wait", time.Minute); err != nil {
		t.Fatal(err)
	}
	m.Append = s.inspectionArgs() + " ironic_agent.dhcp=" + macs[0]
	vm := boot(t, ctx, m, qemu.Options{})
	if _, err := s.ironic.WaitState(ctx, node.UUID, "manageable", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	inspectTime := time.Since(start)
	mapName := checkMultipathInventory(t, inspectedInventory(t, ctx, s, node.UUID))
	if l, ok := vm.Find(`msg="multipath map made"`); !ok || logField(l.Text, "paths") != "sda,sdb" || logField(l.Text, "wwid") != mpathWWID {
		t.Errorf("the agent did not log the map over sda and sdb (found %v): %q", ok, l.Text)
	}
	vm.Kill()

	// The LUN's paths change under the running agent before cleaning, as
	// when a cable is pulled and plugged back: the agent's checker takes
	// the removed path out of the map, adds the path that comes back (a
	// new SCSI device), and after the other original path is removed too,
	// the cleaning erases the LUN through the returned path alone.
	m.Monitor = filepath.Join(m.Dir, "monitor.sock")
	m.Append = agentArgs(port) + " ironic_agent.dhcp=" + macs[0]
	vm = boot(t, ctx, m, qemu.Options{})
	pathsTime := changePaths(t, ctx, vm)

	// Automated cleaning: erase_devices_metadata, on the map only.
	start = time.Now()
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "available", 6*time.Minute); err != nil {
		t.Fatal(err)
	}
	cleanTime := time.Since(start)
	erased := map[string]int{}
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, `msg="device erase finished"`) {
			erased[logField(l.Text, "device")]++
		}
	}
	if erased[mapName] != 1 || erased["/dev/vda"] != 1 || len(erased) != 2 {
		t.Errorf("cleaning erased %v, want %s and /dev/vda once each and no path of the map", erased, mapName)
	}
	vm.Kill()
	if b := readAt(t, lun, 0, 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
		t.Error("the start of the LUN was not erased")
	}
	if b := readAt(t, lun, -(64 << 10), 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
		t.Error("the end of the LUN was not erased")
	}

	// Deploy, the LUN named by wwn and serial, with a config drive.
	ops := append(serveImage(t, &m, img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"wwn": mpathWWN, "serial": mpathWWID}},
	)
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	// A config drive, as Metal3 always sends one: Ironic builds the ISO,
	// the agent adds a partition for it on the map.
	cd := nodes.ConfigDrive{MetaData: map[string]any{"uuid": node.UUID, "hostname": "vm-multipath"}}
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: cd}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "wait call-back", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	vm = boot(t, ctx, m, qemu.Options{})
	if _, err := s.ironic.WaitState(ctx, node.UUID, "active", 6*time.Minute); err != nil {
		t.Fatal(err)
	}
	deployTime := time.Since(start)
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, `msg="writing image"`) {
			if dev := logField(l.Text, "device"); dev != mapName {
				t.Errorf("the image went to %s, want the map %s: %s", dev, mapName, l.Text)
			}
		}
		if strings.Contains(l.Text, "partition maps of") {
			t.Errorf("the map's partitions: %s", l.Text)
		}
	}
	// The image, but for the MBR entry the config drive partition took.
	got := readAt(t, lun, 0, len(img))
	for _, r := range [][2]int{{0, 462}, {478, len(img)}} {
		if a, b := got[r[0]:r[1]], img[r[0]:r[1]]; !bytes.Equal(a, b) {
			n := 0
			for n < len(a) && a[n] == b[n] {
				n++
			}
			t.Errorf("the LUN's file does not hold the image: first difference at byte %d", r[0]+n)
		}
	}
	// The image's boot code and GRUB's core image, never zero.
	if b := readAt(t, m.DiskPath("vblk"), 0, 64<<10); bytes.Equal(b[:440], img[:440]) || bytes.Equal(b[512:], img[512:64<<10]) {
		t.Error("the image also went to the virtio disk")
	}
	checkConfigDrivePartition(t, lun)

	// The deployed OS boots from the LUN (its first path is the firmware's
	// boot disk) and reads the config drive on the map's partition 2.
	m.Kernel, m.Initrd, m.Append = "", "", ""
	for i := range m.Disks {
		m.Disks[i].BootFirst = m.Disks[i].ID == "lun"
	}
	start = time.Now()
	vm = boot(t, ctx, m, qemu.Options{})
	octx, ocancel := context.WithTimeout(ctx, 4*time.Minute)
	defer ocancel()
	r, err := osimage.WaitReport(octx, vm)
	if err != nil {
		t.Fatal(err)
	}
	if r.Hostname != "vm-multipath" {
		t.Errorf("the deployed OS read hostname %q from the config drive %s, want vm-multipath", r.Hostname, r.Drive)
	}
	booted, _ := vm.Find(osimage.Booted)
	t.Logf("the deployed OS booted from the LUN: /init at %.1fs, %.1fs to the config drive's report (%s)", booted.At.Seconds(), time.Since(start).Seconds(), r.Drive)
	vm.Kill()
	t.Logf("multipath through Ironic: inspection %.1fs, paths changed %.1fs, cleaning %.1fs, deploy %.1fs; %.1fs in all",
		inspectTime.Seconds(), pathsTime.Seconds(), cleanTime.Seconds(), deployTime.Seconds(), time.Since(began).Seconds())
}

// changePaths, on the agent's VM of TestVMMultipath whose map is over
// sda (8:0) and sdb (8:16): unplugs the second path and waits for the
// agent to take 8:16 out of the map, plugs it back and waits for the new
// SCSI device to join the map, then unplugs the first path and waits for
// 8:0 to leave, so only the path that came back is left. It returns how
// long that took.
func changePaths(t *testing.T, ctx context.Context, vm *qemu.VM) time.Duration {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := vm.WaitFor(wctx, `msg="multipath map made"`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	step := func(what string, act func() error, want string) qemu.Line {
		t.Helper()
		if err := act(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		l, err := vm.WaitFor(wctx, want)
		if err != nil {
			t.Fatalf("%s: the agent did not say %q: %v", what, want, err)
		}
		t.Logf("%s: %s", what, logFields(l.Text))
		return l
	}
	step("second path unplugged", func() error { return vm.UnplugPath(wctx, "lun", 1) }, "gone=8:16 ")
	added := step("second path plugged back", func() error { return vm.PlugPath(wctx, "lun", 1) }, `msg="multipath path added to its map"`)
	back := logField(added.Text, "added")
	if !strings.HasPrefix(back, "sd") || strings.Contains(back, ",") || logField(added.Text, "paths") != "sda,"+back {
		t.Errorf("the path that came back: %s", added.Text)
	}
	gone := step("first path unplugged", func() error { return vm.UnplugPath(wctx, "lun", 0) }, "gone=8:0 ")
	if got := logField(gone.Text, "paths"); got != back {
		t.Errorf("the map's paths after sda left: %q, want %q", got, back)
	}
	return time.Since(start)
}

// checkMultipathInventory checks the inspected disks: the virtio disk and
// one device-mapper disk for the LUN, with IPA's values for a multipath
// map (serial DM_SERIAL, the WWID; wwn DM_WWN; no vendor, hctl or
// by-path), and no path of it. It returns the map's name (/dev/dm-N).
func checkMultipathInventory(t *testing.T, inv map[string]any) string {
	t.Helper()
	disks, _ := inv["disks"].([]any)
	var names []string
	var mp map[string]any
	for _, d := range disks {
		dm, _ := d.(map[string]any)
		name, _ := dm["name"].(string)
		names = append(names, fmt.Sprintf("%s (serial %v, wwn %v)", name, dm["serial"], dm["wwn"]))
		if strings.HasPrefix(name, "/dev/sd") {
			t.Errorf("a path of the LUN is in the inventory: %v", dm)
		}
		if strings.HasPrefix(name, "/dev/dm-") {
			mp = dm
		}
	}
	if len(disks) != 2 || mp == nil {
		t.Fatalf("inventory disks %v, want /dev/vda and one /dev/dm-N", names)
	}
	want := map[string]any{"serial": mpathWWID, "wwn": mpathWWN, "size": float64(5 << 30), "vendor": nil, "hctl": nil, "by_path": nil}
	for k, v := range want {
		if fmt.Sprint(mp[k]) != fmt.Sprint(v) {
			t.Errorf("the map's %s = %v, want %v", k, mp[k], v)
		}
	}
	return mp["name"].(string)
}

// checkConfigDrivePartition finds, in the disk file's MBR, the config
// drive partition the agent added after the image's partition 1, and the
// ISO9660 volume labelled config-2 in it.
func checkConfigDrivePartition(t *testing.T, disk string) {
	t.Helper()
	mbr := readAt(t, disk, 0, 512)
	e := mbr[446+16 : 446+32]
	start := int64(binary.LittleEndian.Uint32(e[8:12]))
	if e[4] == 0 || start == 0 {
		t.Errorf("no second partition in the MBR of %s: % x", disk, e)
		return
	}
	// The primary volume descriptor: sector 16 of 2 KiB, "\x01CD001",
	// the volume identifier at byte 40.
	pvd := readAt(t, disk, start*512+16*2048, 2048)
	if string(pvd[1:6]) != "CD001" || strings.TrimRight(string(pvd[40:72]), " ") != "config-2" {
		t.Errorf("partition 2 of %s (sector %d) holds no ISO9660 volume config-2: % x", disk, start, pvd[:48])
	}
}
