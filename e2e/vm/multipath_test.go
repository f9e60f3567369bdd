package vm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/deploy/multipath"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
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
//   - a deploy of internal/testbed/osimage's BIOS whole-disk image whose
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
	lunDisk := qemu.Disk{ID: "lun", Kind: qemu.DiskSCSI, SizeMB: 5 << 10, Serial: mpathSerial, WWN: mpathWWN,
		Vendor: "LABVEND", Model: "LAB-MPATH-LUN", SCSITarget: 0, Paths: 2, RotationRate: 1}
	m.Disks = []qemu.Disk{{ID: "vblk", Kind: qemu.DiskVirtioBlk, SizeMB: 64, Serial: "LAB-VBLK-0001"}, lunDisk}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	lun := m.DiskPath("lun")
	// Metadata for cleaning to remove at both ends of the LUN.
	writeAt(t, lun, 0, pattern(64<<10, 0xa5))
	writeAt(t, lun, -(64 << 10), pattern(64<<10, 0xa5))

	node := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: "vm-multipath", InspectInterface: s.inspectInterface(),
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs[:]...)
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"},
	}).Err; err != nil {
		t.Fatal(err)
	}

	// Inspection.
	m.Append = s.inspectionArgs() + " ironic_agent.dhcp=" + macs[0]
	l := kernelLifecycle(t, ctx, s.ironic, node.UUID, withKernelNotices(m))
	inspection := l.Inspect(5 * time.Minute)
	vm, inspectTime := inspection.VM, inspection.Took
	mapName := checkMultipathInventory(t, inspectedInventory(t, ctx, s, node.UUID))
	paths, err := lunPaths(ctx, vm, lunDisk)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := vm.Find(logtext.Msg(multipath.EventMapMade)); !ok || logField(l.Text, "paths") != pathNames(paths...) || logField(l.Text, "wwid") != mpathWWID {
		t.Errorf("the agent did not log the map over %s (found %v): %q", pathNames(paths...), ok, l.Text)
	}

	// The LUN's paths change under the running agent before cleaning, as
	// when a cable is pulled and plugged back: the agent's checker takes
	// the removed path out of the map, adds the path that comes back (a
	// new SCSI device), and after the other original path is removed too,
	// the cleaning erases the LUN through the returned path alone.
	m.Monitor = filepath.Join(m.Dir, "monitor.sock")
	m.Append = agentArgs(port) + " ironic_agent.dhcp=" + macs[0]
	l.machine = withKernelNotices(m)
	vm = l.BootAhead()
	pathsTime := changePaths(t, ctx, vm, lunDisk)

	// Automated cleaning: erase_devices_metadata, on the map only; the
	// agent booted ahead serves it.
	cleanTime := l.Provide(6 * time.Minute).Took
	erased := map[string]int{}
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, logtext.Msg(erase.EventDeviceEraseFinished)) {
			erased[logField(l.Text, "device")]++
		}
	}
	if erased[mapName] != 1 || erased["/dev/vda"] != 1 || len(erased) != 2 {
		t.Errorf("cleaning erased %v, want %s and /dev/vda once each and no path of the map", erased, mapName)
	}
	l.Stop()
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
	// A config drive, as Metal3 always sends one: Ironic builds the ISO,
	// the agent adds a partition for it on the map.
	cd := nodes.ConfigDrive{MetaData: map[string]any{"uuid": node.UUID, "hostname": "vm-multipath"}}
	l.machine = m
	deploy := l.To(nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: cd}, 6*time.Minute)
	vm, deployTime := deploy.VM, deploy.Took
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, logtext.Msg(agent.EventWritingImage)) {
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
	start := time.Now()
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

// withKernelNotices is m with the guest kernel's warnings and notices on
// the console (loglevel=6, after the harness's loglevel=4, prints the
// levels below 6: all but info and debug): the notices are where the
// guest says which sd name it gave to which SCSI device (lunPaths). The
// order in which the kernel probes SCSI devices, and so names them, is
// not fixed from one boot to the next.
func withKernelNotices(m qemu.Machine) qemu.Machine {
	m.Append += " loglevel=6"
	return m
}

// lunPath is one path of a multipath disk as the guest sees it.
type lunPath struct {
	HCTL         string // "2:0:1:0"
	Name         string // "sdb"
	Major, Minor int
}

// Dev is the path's device number as the agent logs it, "8:16".
func (p lunPath) Dev() string { return fmt.Sprintf("%d:%d", p.Major, p.Minor) }

// lunPaths waits for the guest kernel's notices (withKernelNotices) that
// name each path of d, and returns them in the order of d's paths. Path
// i is the SCSI device QEMU was given at target d.SCSITarget+i, LUN
// d.SCSILun (vmtest's pathDevice); the kernel names it in its lines
// "sd H:0:T:L: [sdX] ...", and its line "scsi H:0:T:L: Direct-Access ..."
// must hold the vendor and model QEMU was given, so that the host number
// H the guest chose is the virtio-scsi bus's.
func lunPaths(ctx context.Context, vm *qemu.VM, d qemu.Disk) ([]lunPath, error) {
	paths := make([]lunPath, d.Paths)
	for i := range paths {
		tl := fmt.Sprintf("0:%d:%d", d.SCSITarget+i, d.SCSILun)
		l, err := vm.WaitFor(ctx, ":"+tl+": [sd")
		if err != nil {
			return nil, fmt.Errorf("the guest kernel did not name path %d of %s (SCSI %s): %w", i, d.ID, tl, err)
		}
		m := regexp.MustCompile(`sd (\d+):` + tl + `: \[(sd[a-z]+)\]`).FindStringSubmatch(l.Text)
		if m == nil {
			return nil, fmt.Errorf("path %d of %s (SCSI %s): no sd name in %q", i, d.ID, tl, l.Text)
		}
		p := lunPath{HCTL: m[1] + ":" + tl, Name: m[2]}
		if p.Major, p.Minor, err = sdDev(p.Name); err != nil {
			return nil, err
		}
		scsi, err := vm.WaitFor(ctx, "scsi "+p.HCTL+": ")
		if err != nil {
			return nil, fmt.Errorf("path %d of %s: %w", i, d.ID, err)
		}
		if !strings.Contains(scsi.Text, d.Vendor) || !strings.Contains(scsi.Text, d.Model) {
			return nil, fmt.Errorf("path %d of %s: SCSI %s is not the %s %s QEMU was given: %q", i, d.ID, p.HCTL, d.Vendor, d.Model, scsi.Text)
		}
		paths[i] = p
	}
	return paths, nil
}

// pathNames is the agent's list of a map's paths: their names in device
// number order, comma-separated.
func pathNames(paths ...lunPath) string {
	paths = slices.Clone(paths)
	slices.SortFunc(paths, func(a, b lunPath) int {
		return cmp.Or(cmp.Compare(a.Major, b.Major), cmp.Compare(a.Minor, b.Minor))
	})
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = p.Name
	}
	return strings.Join(names, ",")
}

// sdDev is the device number the kernel's sd driver gives the disk name
// ("sdb" is 8:16): the name's letters count the disk's index in bijective
// base 26 (sda 0, sdz 25, sdaa 26), each index has 16 minors, and the
// index's bits 4-7 choose one of the 16 SCSI disk majors.
func sdDev(name string) (major, minor int, err error) {
	letters, ok := strings.CutPrefix(name, "sd")
	if !ok || letters == "" || len(letters) > 4 {
		return 0, 0, fmt.Errorf("%q is not a SCSI disk name", name)
	}
	index := 0
	for _, c := range letters {
		if c < 'a' || c > 'z' {
			return 0, 0, fmt.Errorf("%q is not a SCSI disk name", name)
		}
		index = index*26 + int(c-'a') + 1
	}
	index--
	majors := [16]int{8, 65, 66, 67, 68, 69, 70, 71, 128, 129, 130, 131, 132, 133, 134, 135}
	return majors[index>>4&0xf], index&0xf<<4 | index&0xfff00, nil
}

// changePaths, on the agent's VM of TestVMMultipath whose map is over
// both paths of the LUN lun: unplugs the second path and waits for the
// agent to take its device out of the map, plugs it back and waits for
// the new SCSI device to join the map, then unplugs the first path and
// waits for its device to leave, so only the path that came back is
// left. Each path's device is the one the guest kernel named for the
// SCSI device QEMU was given (lunPaths), whichever the kernel probed
// first. It returns how long that took.
func changePaths(t *testing.T, ctx context.Context, vm *qemu.VM, lun qemu.Disk) time.Duration {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	made, err := vm.WaitFor(wctx, logtext.Msg(multipath.EventMapMade))
	if err != nil {
		t.Fatal(err)
	}
	paths, err := lunPaths(wctx, vm, lun)
	if err != nil {
		t.Fatal(err)
	}
	first, second := paths[0], paths[1]
	t.Logf("the LUN's paths: SCSI %s is %s (%s), SCSI %s is %s (%s)", first.HCTL, first.Name, first.Dev(), second.HCTL, second.Name, second.Dev())
	if got, want := logField(made.Text, "paths"), pathNames(first, second); got != want {
		t.Fatalf("the map was made over %q, want both paths %q: %s", got, want, made.Text)
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
	gone := step("second path unplugged", func() error { return vm.UnplugPath(wctx, lun.ID, 1) }, "gone="+second.Dev()+" ")
	if got := logField(gone.Text, "paths"); got != first.Name {
		t.Errorf("the map's paths after %s left: %q, want %q", second.Name, got, first.Name)
	}
	added := step("second path plugged back", func() error { return vm.PlugPath(wctx, lun.ID, 1) }, logtext.Msg(multipath.EventPathAdded))
	back := lunPath{Name: logField(added.Text, "added")}
	if back.Major, back.Minor, err = sdDev(back.Name); err != nil {
		t.Fatalf("the path that came back: %v: %s", err, added.Text)
	}
	if back.Name == first.Name || logField(added.Text, "paths") != pathNames(first, back) {
		t.Errorf("the path that came back: %s, want %s added beside %s", added.Text, back.Name, first.Name)
	}
	gone = step("first path unplugged", func() error { return vm.UnplugPath(wctx, lun.ID, 0) }, "gone="+first.Dev()+" ")
	if got := logField(gone.Text, "paths"); got != back.Name {
		t.Errorf("the map's paths after %s left: %q, want %q", first.Name, got, back.Name)
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
