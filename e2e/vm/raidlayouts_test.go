package vm

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/bootloader"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
)

// metal3RAID10 is the other layout Metal3 allows beside metal3SoftwareRAID:
// its softwareRAIDVolumes take levels 0, 1 and 1+0 only, the first volume
// RAID-1 (baremetal-operator's SoftwareRAIDVolume enum and
// buildTargetSoftwareRAIDCfg), so the second volume here is 1+0, which
// needs four disks. The RAID-1 names its four holders by deviceName hints
// as Metal3 writes them; the 1+0 takes the rest of every disk.
func metal3RAID10() raidLayout {
	one, no := 1, false
	var holders []any
	for _, d := range []string{"vda", "vdb", "vdc", "vdd"} {
		holders = append(holders, map[string]string{"name": "s== /dev/" + d})
	}
	return raidLayout{disks: 4, sizeMB: 1536, config: nodes.RAIDConfigOpts{LogicalDisks: []nodes.LogicalDisk{
		{SizeGB: &one, RAIDLevel: nodes.RAID1, Controller: "software", IsRootVolume: &no, PhysicalDisks: holders},
		{RAIDLevel: nodes.RAID10, Controller: "software", IsRootVolume: &no},
	}}}
}

// mdMember is what mdadm --examine says of one array member.
type mdMember struct {
	level, devices, uuid, role string
	dataOffset                 int64 // bytes from the start of the member
	arraySize                  int64 // bytes, the array's (0 for raid0)
}

var examineField = regexp.MustCompile(`(?m)^\s*(Raid Level|Raid Devices|Array UUID|Device Role|Data Offset|Array Size) : (.*)$`)

// examineMember runs mdadm --examine on a copy of the first 8 MiB of the
// partition (start, size bytes) of disk file path: the superblock of
// metadata 1.2 is 4 KiB in. A copy, because a loop device over a member
// would let the host's udev assemble the array.
func examineMember(t *testing.T, ctx context.Context, path string, start, size int64) mdMember {
	t.Helper()
	n := min(size, 8<<20)
	cp := filepath.Join(t.TempDir(), "member.img")
	if err := os.WriteFile(cp, readAt(t, path, start, int(n)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, "mdadm", "--examine", cp).CombinedOutput()
	if err != nil {
		t.Fatalf("mdadm --examine of %s at %d MiB: %v\n%s", filepath.Base(path), start>>20, err, out)
	}
	var m mdMember
	for _, f := range examineField.FindAllStringSubmatch(string(out), -1) {
		v := strings.TrimSpace(f[2])
		switch f[1] {
		case "Raid Level":
			m.level = v
		case "Raid Devices":
			m.devices = v
		case "Array UUID":
			m.uuid = v
		case "Device Role":
			m.role = v
		case "Data Offset":
			sectors, err := strconv.ParseInt(strings.TrimSuffix(v, " sectors"), 10, 64)
			if err != nil {
				t.Fatalf("mdadm --examine: Data Offset %q", v)
			}
			m.dataOffset = sectors * 512
		case "Array Size":
			// "1042432 (1018.00 MiB 1067.45 MB)": KiB first.
			kib, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				t.Fatalf("mdadm --examine: Array Size %q", v)
			}
			m.arraySize = kib << 10
		}
	}
	return m
}

// TestVMDeploySoftwareRAID10BIOS is a Metal3-style deploy onto the
// RAID-1 of metal3RAID10 under SeaBIOS: cleaning builds a RAID-1 and a
// RAID-1+0 over four disks, the deploy writes softwareRAIDImage
// (internal/testbed/osimage's OS) onto /dev/md0 and installs GRUB on all four
// holders. The disk files then show what /proc/mdstat showed in the
// ramdisk (each disk's first partition a member of one four-device
// raid1, its second of one four-device raid10, every member with its own
// role), the image's partition table and root filesystem on the RAID-1's
// members; the deployed OS boots from the fourth disk alone, the other
// three removed from the VM.
func TestVMDeploySoftwareRAID10BIOS(t *testing.T) {
	// The default run deploys onto software RAID under UEFI
	// (TestVMDeploySoftwareRAIDUEFI); this one, the longest of them,
	// keeps the run within its time.
	slowScenario(t)
	seriesIndependent(t) // the agent's software RAID, alike in every series
	if _, err := exec.LookPath("mdadm"); err != nil {
		t.Skip("SKIPPED: needs mdadm (in test.sh) to read the members' superblocks")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	o, dir := deployedOS(t, ctx)
	img, rootUUID := softwareRAIDImage(t, ctx, o, dir)
	l := metal3RAID10()
	m, deployed, _ := raidCleanAndDeploy(t, ctx, "bios", newAgentPort(t), newMACs(t), l, img, rootfsUUID(rootUUID))
	for _, d := range m.Disks {
		if _, ok := deployed.Find(logtext.Msg(bootloader.EventInstallingGRUB2) + ` device=/dev/` + d.ID); !ok {
			t.Errorf("the agent did not install GRUB on /dev/%s", d.ID)
		}
	}

	// The image's root filesystem UUID as ext4 stores it (superblock at
	// 1 KiB, UUID at 0x68), the filesystem at 1 MiB into the image.
	fsUUID := img[1<<20+1024+0x68 : 1<<20+1024+0x68+16]
	want := []struct{ level, devices string }{{"raid1", "4"}, {"raid10", "4"}}
	uuids := [2]map[string]bool{{}, {}}
	roles := [2]map[string]bool{{}, {}}
	for _, d := range m.Disks {
		pt, err := blockdev.ReadPartTable(m.DiskPath(d.ID), 512)
		if err != nil {
			t.Fatal(err)
		}
		if len(pt.Partitions) != 2 {
			t.Errorf("%s: partitions %+v, want the two RAID members", d.ID, pt.Partitions)
			continue
		}
		for i, p := range pt.Partitions {
			mm := examineMember(t, ctx, m.DiskPath(d.ID), p.Start, p.Size)
			t.Logf("%s partition %d: %s of %s devices, array %s, %s, data at %d KiB", d.ID, i+1, mm.level, mm.devices, mm.uuid, mm.role, mm.dataOffset>>10)
			if mm.level != want[i].level || mm.devices != want[i].devices {
				t.Errorf("%s partition %d: %s of %s devices, want %s of %s", d.ID, i+1, mm.level, mm.devices, want[i].level, want[i].devices)
			}
			uuids[i][mm.uuid] = true
			roles[i][mm.role] = true
			if i != 0 {
				continue
			}
			data := p.Start + mm.dataOffset
			if got := readAt(t, m.DiskPath(d.ID), data+440, 72); !bytes.Equal(got, img[440:512]) {
				t.Errorf("%s: the RAID-1 member does not start with the image's partition table", d.ID)
			}
			if got := readAt(t, m.DiskPath(d.ID), data+1<<20+1024+0x68, 16); !bytes.Equal(got, fsUUID) {
				t.Errorf("%s: the RAID-1 member does not hold the image's root filesystem (UUID %x, want %x)", d.ID, got, fsUUID)
			}
		}
	}
	for i, name := range []string{"RAID-1", "RAID-1+0"} {
		if len(uuids[i]) != 1 || len(roles[i]) != len(m.Disks) {
			t.Errorf("%s: members in arrays %v with roles %v, want one array, %d roles", name, uuids[i], roles[i], len(m.Disks))
		}
	}
	if maps.Equal(uuids[0], uuids[1]) {
		t.Errorf("the RAID-1 and the RAID-1+0 are one array: %v", uuids[0])
	}
	// One boot, from the fourth disk alone (three of the four failed):
	// TestVMDeploySoftwareRAIDUEFI boots the mirror whole and then
	// degraded, and a boot here costs 30-60 s under TCG at load.
	bootDisks(t, ctx, m, []string{"vdd"}, osimage.Booted)
	reportSeconds(t, time.Since(start), "clean_deploy_boot_s")
}

// raidParityConfig is a target_raid_config whose second volume has a
// parity level: the RAID-1 root every software RAID configuration starts
// with (1 GiB, on vda and vdb, volume name root), then a volume of level
// over the rest of the disks named (all of them when none is), volume
// name data.
func raidParityConfig(level nodes.RAIDLevel, disks ...string) nodes.RAIDConfigOpts {
	one := 1
	var holders []any
	for _, d := range disks {
		holders = append(holders, map[string]string{"name": "/dev/" + d})
	}
	return nodes.RAIDConfigOpts{LogicalDisks: []nodes.LogicalDisk{
		{SizeGB: &one, RAIDLevel: nodes.RAID1, Controller: "software", VolumeName: "root",
			PhysicalDisks: []any{map[string]string{"name": "/dev/vda"}, map[string]string{"name": "/dev/vdb"}}},
		{RAIDLevel: level, Controller: "software", VolumeName: "data", PhysicalDisks: holders},
	}}
}

// TestVMSoftwareRAIDParity takes RAID-5 and RAID-6 through Ironic under
// SeaBIOS on four 1.5 GiB disks: a manual cleaning with Metal3's steps
// builds a RAID-1 root and a RAID-5 over three of the disks
// (physical_disks); Ironic stores the agent's raid_config, the disk
// files hold one three-device raid5 with two members' worth of space
// (mdadm --examine), and an inspection (the agent assembles the arrays at
// start, as IPA's initialize) lists both arrays as disks, of the sizes
// their superblocks give, beside their members. A second cleaning (delete_configuration,
// create_configuration) replaces it with a RAID-6 over all four disks,
// checked the same way; a last one (delete_configuration,
// erase_devices_metadata) leaves no md superblock anywhere. Five boots of
// the ramdisk: a slow scenario.
func TestVMSoftwareRAIDParity(t *testing.T) {
	seriesIndependent(t) // the agent's software RAID, alike in every series
	slowScenario(t)
	if _, err := exec.LookPath("mdadm"); err != nil {
		t.Skip("SKIPPED: needs mdadm (in test.sh) to read the members' superblocks")
	}
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	began := time.Now()
	macs := newMACs(t)
	l := raidLayout{disks: 4, sizeMB: 1536, config: raidParityConfig(nodes.RAID5, "vda", "vdb", "vdc")}
	m := raidMachine(t, "bios", newAgentPort(t), macs, l)
	agentAppend := m.Append
	lc := raidNode(t, ctx, m, macs, ironic.NodeSpec{Name: "vm-raid-parity", InspectInterface: s.inspectInterface()})
	uuid := lc.node

	var regions []mdRegion
	for _, c := range []struct {
		level   string // mdadm's and Ironic's
		config  nodes.RAIDConfigOpts
		holders []string
		steps   []nodes.CleanStep
	}{
		{"5", l.config, []string{"vda", "vdb", "vdc"}, metal3CleanSteps()},
		{"6", raidParityConfig(nodes.RAID6), []string{"vda", "vdb", "vdc", "vdd"}, []nodes.CleanStep{
			{Interface: nodes.InterfaceRAID, Step: "delete_configuration"},
			{Interface: nodes.InterfaceRAID, Step: "create_configuration"},
		}},
	} {
		lc.machine.Append = agentAppend
		cleaning := raidCleaning(lc, &c.config, c.steps...)
		n, vm := cleaning.Node, cleaning.VM
		var levels []string
		lds, _ := n.RAIDConfig["logical_disks"].([]any)
		for _, ld := range lds {
			d, _ := ld.(map[string]any)
			levels = append(levels, fmt.Sprint(d["raid_level"]))
		}
		if strings.Join(levels, ",") != "1,"+c.level {
			t.Errorf("RAID-%s: Ironic's raid_config after cleaning has levels %v, want 1 and %s (%v)", c.level, levels, c.level, n.RAIDConfig)
		}
		if _, ok := vm.Find(logtext.Msg(raid.EventCreatingMD) + ` device=/dev/md1`); !ok {
			t.Errorf("RAID-%s: the agent's log has no creation of /dev/md1", c.level)
		}

		// On the disk files: the arrays' sizes as their superblocks give
		// them (the root's from vda's first partition); the data volume's
		// members are the last partition of each of its holders.
		pt, err := blockdev.ReadPartTable(m.DiskPath("vda"), 512)
		if err != nil || len(pt.Partitions) == 0 {
			t.Fatalf("RAID-%s: vda: partitions %v (%v)", c.level, pt, err)
		}
		rootSize := examineMember(t, ctx, m.DiskPath("vda"), pt.Partitions[0].Start, pt.Partitions[0].Size).arraySize
		var dataSize int64
		var uuids []string
		for _, id := range c.holders {
			pt, err := blockdev.ReadPartTable(m.DiskPath(id), 512)
			if err != nil || len(pt.Partitions) == 0 {
				t.Fatalf("RAID-%s: %s: partitions %v (%v)", c.level, id, pt, err)
			}
			p := pt.Partitions[len(pt.Partitions)-1]
			mm := examineMember(t, ctx, m.DiskPath(id), p.Start, p.Size)
			t.Logf("RAID-%s: %s partition %d: %s of %s devices, array %s, %s", c.level, id, len(pt.Partitions), mm.level, mm.devices, mm.uuid, mm.role)
			if mm.level != "raid"+c.level || mm.devices != strconv.Itoa(len(c.holders)) {
				t.Errorf("RAID-%s: %s's member is %s of %s devices, want raid%s of %d", c.level, id, mm.level, mm.devices, c.level, len(c.holders))
			}
			if !slices.Contains(uuids, mm.uuid) {
				uuids = append(uuids, mm.uuid)
			}
			dataSize = mm.arraySize
		}
		if len(uuids) != 1 {
			t.Errorf("RAID-%s: the members belong to arrays %v, want one", c.level, uuids)
		}
		// The last configuration's partitions: where the final cleaning
		// must leave no superblock.
		regions = mdRegions(t, m)

		// The data array holds two members' worth: the smallest member
		// (vda's and vdb's second partition, 1 GiB to the end) is a
		// little under 512 MiB.
		if dataSize < 2*480<<20 || dataSize > 2*512<<20 {
			t.Errorf("RAID-%s: the data array is %d bytes, want two members of a little under 512 MiB", c.level, dataSize)
		}

		// What an inspection reports: both arrays as disks (the agent
		// assembles them at start, as IPA's initialize; mdadm names them
		// md127 and md126 then, with no mdadm.conf), and their members.
		lc.machine.Append = s.inspectionArgs() + " ipa-disk-wait-attempts=1 no_timer_check ironic_agent.dhcp=" + macs[0]
		reportSeconds(t, lc.Inspect(5*time.Minute).Took, "raid", c.level, "inspection_s")
		lc.Stop()
		sizes := map[string]int64{}
		disks, _ := inspectedInventory(t, ctx, s, uuid)["disks"].([]any)
		for _, d := range disks {
			dm, _ := d.(map[string]any)
			name, _ := dm["name"].(string)
			size, _ := dm["size"].(float64)
			sizes[name] = int64(size)
		}
		t.Logf("RAID-%s: inventory disks %v; arrays of %d (root) and %d (data) bytes", c.level, sizes, rootSize, dataSize)
		var mds []int64
		for name, size := range sizes {
			if strings.HasPrefix(name, "/dev/md") {
				mds = append(mds, size)
			}
		}
		slices.Sort(mds)
		want := []int64{min(rootSize, dataSize), max(rootSize, dataSize)}
		if !slices.Equal(mds, want) {
			t.Errorf("RAID-%s: the inventory's md devices have sizes %v, want the root's and the data array's %v (disks %v)", c.level, mds, want, sizes)
		}
		for _, d := range []string{"/dev/vda", "/dev/vdb", "/dev/vdc", "/dev/vdd"} {
			if _, ok := sizes[d]; !ok {
				t.Errorf("RAID-%s: the inventory lists no %s: %v", c.level, d, sizes)
			}
		}
	}
	lc.machine.Append = agentAppend
	raidCleaning(lc, nil,
		nodes.CleanStep{Interface: nodes.InterfaceRAID, Step: "delete_configuration"},
		nodes.CleanStep{Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"})
	noMDSuperblocks(t, ctx, m, regions)
	reportSeconds(t, time.Since(began), "whole_test_s")
}
