package vm

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
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
}

var examineField = regexp.MustCompile(`(?m)^\s*(Raid Level|Raid Devices|Array UUID|Device Role|Data Offset) : (.*)$`)

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
		}
	}
	return m
}

// TestVMDeploySoftwareRAID10BIOS is a Metal3-style deploy onto the
// RAID-1 of metal3RAID10 under SeaBIOS: cleaning builds a RAID-1 and a
// RAID-1+0 over four disks, the deploy writes grubDiskImage onto
// /dev/md0 and installs GRUB on all four holders. The disk files then
// show what /proc/mdstat showed in the ramdisk (each disk's first
// partition a member of one four-device raid1, its second of one
// four-device raid10, every member with its own role), the image's
// partition table and root filesystem on the RAID-1's members, and the
// fourth disk alone boots.
func TestVMDeploySoftwareRAID10BIOS(t *testing.T) {
	if _, err := exec.LookPath("mdadm"); err != nil {
		t.Skip("SKIPPED: needs mdadm (in test.sh) to read the members' superblocks")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	img, rootUUID := grubDiskImage(t, ctx)
	l := metal3RAID10()
	m, deployed, _ := raidCleanAndDeploy(t, ctx, "bios", agentPortBase+7, [2]string{"52:54:00:6d:07:01", "52:54:00:6d:07:02"}, l, img,
		nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_rootfs_uuid", Value: rootUUID}})
	for _, d := range m.Disks {
		if _, ok := deployed.Find(`msg="installing GRUB2" device=/dev/` + d.ID); !ok {
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
	bootDisks(t, ctx, m, []string{"vdd"}, biosRAIDSays)
	t.Logf("clean, deploy, checks and a boot from the fourth disk: %.1fs", time.Since(start).Seconds())
}
