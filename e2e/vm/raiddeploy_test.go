package vm

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/bootloader"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage/grubimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// metal3SoftwareRAID is target_raid_config as Metal3's baremetal-operator
// builds it from a BareMetalHost's softwareRAIDVolumes
// (buildTargetSoftwareRAIDCfg): controller software, is_root_volume
// always sent (rootVolume defaults to false), physical_disks as
// devicehints.MakeHintMap writes deviceName ("s== <name>"), size_gb nil
// for "the rest of the disk", which gophercloud sends as "MAX". Here: a
// RAID-1 of rootGB GiB over both disks, then a RAID-0 over the rest of
// them.
func metal3SoftwareRAID(rootGB int) nodes.RAIDConfigOpts {
	no := false
	return nodes.RAIDConfigOpts{LogicalDisks: []nodes.LogicalDisk{
		{SizeGB: &rootGB, RAIDLevel: nodes.RAID1, Controller: "software", IsRootVolume: &no,
			PhysicalDisks: []any{map[string]string{"name": "s== /dev/vda"}, map[string]string{"name": "s== /dev/vdb"}}},
		{RAIDLevel: nodes.RAID0, Controller: "software", IsRootVolume: &no},
	}}
}

// raidLayout is what the RAID deploy tests vary: the holder disks (virtio
// vda, vdb, ...) and the target_raid_config built on them.
type raidLayout struct {
	disks  int
	sizeMB int
	config nodes.RAIDConfigOpts
}

// twoDiskRAID is metal3SoftwareRAID with a 1 GiB RAID-1 on two 2 GiB
// disks.
func twoDiskRAID() raidLayout {
	return raidLayout{disks: 2, sizeMB: 2 << 10, config: metal3SoftwareRAID(1)}
}

// raidMachine is a VM of the RAID deploy tests: the layout's virtio
// disks, the holders of the arrays.
func raidMachine(t *testing.T, fw string, port int, macs [2]string, l raidLayout) qemu.Machine {
	m := serviceMachine(t, ramdisk(t), fw, port, macs)
	m.Name = "ironic-agent-raid-" + fw
	m.MemoryMB = 768
	m.Disks = nil
	for i := range l.disks {
		m.Disks = append(m.Disks, qemu.Disk{ID: "vd" + string(rune('a'+i)), Kind: qemu.DiskVirtioBlk, SizeMB: l.sizeMB,
			Serial: "RAID-HOLDER-" + string(rune('A'+i))})
	}
	// No disk is the 4 GiB a root disk without hints needs: one look.
	// no_timer_check: under TCG on a loaded host the kernel's check of
	// the IO-APIC timer can fail and panic the guest.
	m.Append = agentArgs(port) + " ipa-disk-wait-attempts=1 no_timer_check ironic_agent.dhcp=" + macs[0]
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	return m
}

// raidNode enrolls the node of a RAID test for machine m: raid_interface
// agent, automated cleaning off, and (BIOS) the noop management
// interface; spec names it and may ask for an inspect interface. It
// returns the node's lifecycle, fake power booting m.
func raidNode(t *testing.T, ctx context.Context, m qemu.Machine, macs [2]string, spec ironic.NodeSpec) *lifecycle {
	s := services(t)
	noClean := false
	spec.AutomatedClean = &noClean
	spec.Properties = map[string]any{"capabilities": "boot_mode:" + string(m.Firmware)}
	node := ironic.Enroll(t, ctx, s.ironic, spec, macs[:]...)
	ifaces := nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/raid_interface", Value: "agent"}}
	if m.Firmware == qemu.BIOS {
		// At the end of a BIOS deploy Ironic sets the boot device to
		// disk, which the fake management interface refuses.
		ifaces = append(ifaces, nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"})
	}
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, ifaces).Err; err != nil {
		t.Fatal(err)
	}
	return kernelLifecycle(t, ctx, s.ironic, node.UUID, m)
}

// raidCleaning sets the node's target_raid_config to config (nil: leaves
// it) and has l run a manual cleaning with steps, reported as
// manual_cleaning_<steps>_s; the boot is stopped after it (the fake power
// interface cannot power the VM off).
func raidCleaning(l *lifecycle, config *nodes.RAIDConfigOpts, steps ...nodes.CleanStep) step {
	t := l.t
	t.Helper()
	if config != nil {
		if err := nodes.SetRAIDConfig(l.ctx, l.ironic.Service, l.node, *config).ExtractErr(); err != nil {
			t.Fatal(err)
		}
	}
	cleaning := l.Clean(10*time.Minute, steps...)
	var names []string
	for _, st := range steps {
		names = append(names, st.Step)
	}
	t.Logf("%s: manual cleaning (%s)", l.machine.Firmware, strings.Join(names, ", "))
	reportSeconds(t, cleaning.Took, "manual_cleaning_"+strings.Join(names, "_")+"_s")
	l.Stop()
	return cleaning
}

// metal3CleanSteps are the manual cleaning Metal3 runs for a host with
// softwareRAIDVolumes.
func metal3CleanSteps() []nodes.CleanStep {
	return []nodes.CleanStep{
		{Interface: nodes.InterfaceRAID, Step: "delete_configuration"},
		{Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"},
		{Interface: nodes.InterfaceRAID, Step: "create_configuration"},
	}
}

// raidCleanAndDeploy takes a node through what Metal3 does for a host
// with softwareRAIDVolumes, against the real Ironic: target_raid_config
// in Metal3's shape, raid_interface agent, manual cleaning with Metal3's
// steps (delete_configuration, erase_devices_metadata,
// create_configuration), provide, and a deploy of img with root-device
// hints naming the RAID-1 (/dev/md0). It returns the machine, powered
// off by the agent at the end of the deploy, the deploy's VM and the
// node's lifecycle.
func raidCleanAndDeploy(t *testing.T, ctx context.Context, fw string, port int, macs [2]string, layout raidLayout, img []byte, extra nodes.UpdateOpts) (qemu.Machine, *qemu.VM, *lifecycle) {
	m := raidMachine(t, fw, port, macs, layout)
	l := raidNode(t, ctx, m, macs, ironic.NodeSpec{Name: "vm-raid-" + fw})
	cleaning := raidCleaning(l, &layout.config, metal3CleanSteps()...)
	if lds, _ := cleaning.Node.RAIDConfig["logical_disks"].([]any); len(lds) != len(layout.config.LogicalDisks) {
		t.Errorf("node raid_config after cleaning = %v, want the %d logical disks", cleaning.Node.RAIDConfig, len(layout.config.LogicalDisks))
	}
	for i := range layout.config.LogicalDisks {
		want := logtext.Msg(raid.EventCreatingMD) + fmt.Sprintf(" device=/dev/md%d", i)
		if _, ok := cleaning.VM.Find(want); !ok {
			t.Errorf("the agent's log has no %q", want)
		}
	}

	l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, time.Minute)
	ops := append(serveImage(t, &l.machine, img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"name": "/dev/md0"}})
	return l.machine, deployOntoMD0(l, append(ops, extra...)), l
}

// deployOntoMD0 applies ops to the available node and has l deploy it
// onto its root-device hints (/dev/md0), with the deploy steps steps
// besides the usual ones, reported as deploy_md0_s. It returns the
// deploy's VM, powered off by the agent.
func deployOntoMD0(l *lifecycle, ops nodes.UpdateOpts, steps ...nodes.DeployStep) *qemu.VM {
	t := l.t
	t.Helper()
	if err := nodes.Update(l.ctx, l.ironic.Service, l.node, ops).Err; err != nil {
		t.Fatal(err)
	}
	deploy := l.Deploy(8*time.Minute, steps...)
	reportSeconds(t, deploy.Took, "deploy_md0_s")
	for _, line := range deploy.VM.Lines() {
		if strings.Contains(line.Text, "/dev/md") && (strings.Contains(line.Text, "image") || strings.Contains(line.Text, "ESP") ||
			strings.Contains(line.Text, "EFI") || strings.Contains(line.Text, "GRUB") || strings.Contains(line.Text, "boot partition") ||
			strings.Contains(line.Text, "partition")) {
			t.Logf("agent: %s", line.Text)
		}
	}
	if err := deploy.VM.Wait(l.ctx); err != nil {
		t.Fatal(err)
	}
	return deploy.VM
}

// bootDisks boots the deployed machine from its disks (no ramdisk), with
// only the disks named, waits for want on the console and stops the VM:
// the marker is the proof. (osimage's OS would go on to look for a config
// drive for a minute: inside an md array it finds none.)
func bootDisks(t *testing.T, ctx context.Context, m qemu.Machine, ids []string, want string) *qemu.VM {
	t.Helper()
	m.Kernel, m.Initrd, m.Append = "", "", ""
	var disks []qemu.Disk
	for _, d := range m.Disks {
		for _, id := range ids {
			if d.ID == id {
				disks = append(disks, d)
			}
		}
	}
	m.Disks = disks
	start := time.Now()
	vm := boot(t, ctx, m, qemu.Options{})
	l, err := vm.WaitFor(ctx, want)
	if err != nil {
		t.Fatalf("booting from %v: %v\n%s", ids, err, consoleTail(vm, 30))
	}
	vm.Kill()
	t.Logf("boot from %v: %q: %s", ids, want, l.Text)
	reportSeconds(t, time.Since(start), "boot_from_"+strings.Join(ids, "_")+"_s")
	return vm
}

// deployedOS builds internal/testbed/osimage's OS, the deployed OS of the tests
// that boot it, in a directory of the test's.
func deployedOS(t *testing.T, ctx context.Context) (*osimage.OS, string) {
	t.Helper()
	if m := osimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (in test.sh)", m)
	}
	dir := t.TempDir()
	start := time.Now()
	o, err := osimage.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(start), "os_build_s")
	return o, dir
}

// deployedOSImage is deployedOS's whole-disk image that build (an image
// method of osimage.OS: BIOSDisk, UEFIDisk) writes.
func deployedOSImage(t *testing.T, ctx context.Context, build func(o *osimage.OS, ctx context.Context, dir, out string) error) []byte {
	t.Helper()
	o, dir := deployedOS(t, ctx)
	raw := filepath.Join(dir, "disk.raw")
	if err := build(o, ctx, dir, raw); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// deployedOSPartitionImage builds o's partition image (96 MiB ext4 root)
// in dir and returns its path and bytes.
func deployedOSPartitionImage(t *testing.T, ctx context.Context, o *osimage.OS, dir string) (string, []byte) {
	t.Helper()
	part := filepath.Join(dir, "root.img")
	if err := o.PartitionImage(ctx, dir, part, 96<<20); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(part)
	if err != nil {
		t.Fatal(err)
	}
	return part, img
}

// TestVMDeploySoftwareRAIDUEFI is a Metal3-style software RAID deploy
// under OVMF: cleaning builds a RAID-1 and a RAID-0 on two disks, the
// deploy writes internal/testbed/osimage's UEFI whole-disk image (an ESP whose
// GRUB, named by a BOOTX64.CSV, finds the root file system inside the
// array) onto /dev/md0, and the agent, as IPA's manage_uefi, moves that
// ESP to a mirror of ESPs on both holders (md RAID-1, metadata 1.0) with
// one NVRAM entry per holder. The deployed OS then boots from the mirror
// (both disks) through the entry of one holder's ESP; with that disk
// removed from the VM it boots again through the other holder's entry.
func TestVMDeploySoftwareRAIDUEFI(t *testing.T) {
	seriesIndependent(t) // the agent's software RAID, alike in every series
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	img := deployedOSImage(t, ctx, (*osimage.OS).UEFIDisk)
	m, deployed, lc := raidCleanAndDeploy(t, ctx, "uefi", newAgentPort(t), newMACs(t), twoDiskRAID(), img, nil)
	if _, ok := deployed.Find(logtext.Msg(bootloader.EventRelocatingESP) + ` from=/dev/md0p1`); !ok {
		t.Errorf("the agent did not move the image's ESP from /dev/md0p1 to a mirror")
	}

	// Each holder: an ESP in the room kept before the RAID partitions,
	// holding the image's GRUB (its embedded configuration is plain text
	// in the EFI binary).
	espDisk := holderESPs(t, m, []string{"vda", "vdb"}, []byte("--set=root /boot/osimage"))
	bootedFrom := func(ids []string) string {
		return bootThroughHolderEntry(t, ctx, m, ids, osimage.EFILabel, espDisk)
	}
	first := bootedFrom([]string{"vda", "vdb"})
	other := map[string]string{"vda": "vdb", "vdb": "vda"}[first]
	if got := bootedFrom([]string{other}); got != other {
		t.Errorf("with %s removed, the OS came through the entry of %s's ESP, want %s's", first, got, other)
	}
	raidUndeployAndClean(t, ctx, lc)
}

// holderESPs checks that each of the holder disks ids has an ESP (type
// EF00, uefi-holder-<n>) of 550 MiB at 1 MiB, in the room kept before the
// RAID partitions, whose first 16 MiB hold marker (the boot loader's). It
// returns the disk of each ESP by its partition GUID, upper case as OVMF
// prints it.
func holderESPs(t *testing.T, m qemu.Machine, ids []string, marker []byte) map[string]string {
	t.Helper()
	espDisk := map[string]string{}
	for i, id := range ids {
		pt, err := blockdev.ReadPartTable(m.DiskPath(id), 512)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range pt.Partitions {
			if p.TypeGUID == blockdev.ESPTypeGUID {
				found = true
				espDisk[strings.ToUpper(p.GUID)] = id
				if p.Start != 1<<20 || p.Size != 550<<20 || p.Name != fmt.Sprintf("uefi-holder-%d", i) {
					t.Errorf("%s: ESP %+v, want uefi-holder-%d at 1 MiB, 550 MiB", id, p, i)
				}
				if b := readAt(t, m.DiskPath(id), p.Start, 16<<20); !bytes.Contains(b, marker) {
					t.Errorf("%s: the ESP does not hold the boot loader (no %q)", id, marker)
				}
			}
		}
		if !found {
			t.Errorf("%s: no EFI system partition: %+v", id, pt.Partitions)
		}
	}
	return espDisk
}

// bootThroughHolderEntry boots m from the disks ids until the deployed OS
// prints its marker and returns the disk (espDisk: holderESPs) whose ESP
// held the NVRAM entry OVMF loaded it through: one of those the agent
// wrote per holder, label suffixed "(RAID, part<n>)".
func bootThroughHolderEntry(t *testing.T, ctx context.Context, m qemu.Machine, ids []string, label string, espDisk map[string]string) string {
	t.Helper()
	entry := regexp.MustCompile(`BdsDxe: loading Boot[0-9A-F]{4} "` + regexp.QuoteMeta(label) + ` \(RAID, part[01]\)" from HD\([0-9]+,GPT,([0-9A-F-]{36}),`)
	vm := bootDisks(t, ctx, m, ids, osimage.Booted)
	from := ""
	for _, l := range vm.Lines() {
		if sm := entry.FindStringSubmatch(l.Text); sm != nil {
			from = espDisk[sm[1]]
			t.Logf("booting from %v: %s", ids, l.Text[strings.Index(l.Text, "BdsDxe"):])
		}
	}
	if from == "" {
		t.Fatalf("booting from %v: OVMF loaded no entry %q the agent wrote for a holder's ESP (%v)", ids, label, espDisk)
	}
	return from
}

// mdSuperblockPlaces are where md superblocks of each version live on a
// device of size bytes starting at start: 0.90 in the last 64 KiB-aligned
// 64 KiB block, 1.0 8 KiB from the end rounded down to 4 KiB, 1.1 at the
// start, 1.2 4 KiB in.
func mdSuperblockPlaces(start, size int64) map[string]int64 {
	sectors := size / 512
	return map[string]int64{
		"0.90": start + ((sectors&^127)-128)*512,
		"1.0":  start + ((sectors-16)&^7)*512,
		"1.1":  start,
		"1.2":  start + 4096,
	}
}

// mdRegion is a disk of a RAID test's machine, or a partition of one.
type mdRegion struct {
	disk        string
	start, size int64
}

// mdRegions are m's disks and the partitions their tables list now.
func mdRegions(t *testing.T, m qemu.Machine) []mdRegion {
	t.Helper()
	var regions []mdRegion
	for _, d := range m.Disks {
		regions = append(regions, mdRegion{d.ID, 0, int64(d.SizeMB) << 20})
		pt, err := blockdev.ReadPartTable(m.DiskPath(d.ID), 512)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pt.Partitions {
			regions = append(regions, mdRegion{d.ID, p.Start, p.Size})
		}
	}
	return regions
}

// mdSuperblocks names the versions whose md superblock magic r holds at
// their place, with the offsets.
func mdSuperblocks(t *testing.T, m qemu.Machine, r mdRegion) []string {
	t.Helper()
	magic := []byte{0xfc, 0x4e, 0x2b, 0xa9}
	var at []string
	for v, off := range mdSuperblockPlaces(r.start, r.size) {
		if bytes.Equal(readAt(t, m.DiskPath(r.disk), off, 4), magic) {
			at = append(at, fmt.Sprintf("%s at %d", v, off))
		}
	}
	return at
}

// noMDSuperblocks checks, after cleaning, that no region of before (the
// disks and the partitions they had) holds an md superblock at the place
// of any version, that mdadm finds none on the disks and that they carry
// no signature.
func noMDSuperblocks(t *testing.T, ctx context.Context, m qemu.Machine, before []mdRegion) {
	t.Helper()
	for _, r := range before {
		if at := mdSuperblocks(t, m, r); len(at) > 0 {
			t.Errorf("%s, %d MiB + %d MiB: md superblock left: %v", r.disk, r.start>>20, r.size>>20, at)
		}
	}
	for _, d := range m.Disks {
		if out, err := exec.CommandContext(ctx, "mdadm", "--examine", m.DiskPath(d.ID)).CombinedOutput(); err == nil {
			t.Errorf("%s: mdadm --examine finds a superblock:\n%s", d.ID, out)
		}
		if sig, err := blockdev.Probe(m.DiskPath(d.ID)); err != nil || sig != "" {
			t.Errorf("%s: signature %q left (%v)", d.ID, sig, err)
		}
	}
}

// raidUndeployAndClean tears the deployed node down and cleans it as
// Metal3 does when softwareRAIDVolumes is emptied (delete_configuration,
// erase_devices_metadata): afterwards no disk, nor any partition the
// deploy left (the arrays' members: metadata 1.2 for the data arrays, 1.0
// for the ESP mirror), holds an md superblock at the place of any
// version, and mdadm finds none on the disks.
func raidUndeployAndClean(t *testing.T, ctx context.Context, l *lifecycle) {
	m := l.machine
	regions := mdRegions(t, m)
	members := 0
	for _, r := range regions {
		if r.start != 0 && len(mdSuperblocks(t, m, r)) > 0 {
			members++
		}
	}
	if members != 6 {
		t.Errorf("before cleaning: %d partitions carry an md superblock, want 6 (the root, data and ESP arrays' members)", members)
	}
	l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, 2*time.Minute)
	l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetManage}, time.Minute)
	raidCleaning(l, nil,
		nodes.CleanStep{Interface: nodes.InterfaceRAID, Step: "delete_configuration"},
		nodes.CleanStep{Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"})
	noMDSuperblocks(t, ctx, m, regions)
}

// softwareRAIDImage is internal/testbed/osimage's whole-disk image for a BIOS
// deploy onto software RAID (OS.SoftwareRAIDBIOSDisk: msdos, the ext4
// root at 1 MiB with GRUB's tools and mdadm, no boot code) and its root
// file system's UUID, which Ironic passes to install_bootloader for
// software RAID (instance_info image_rootfs_uuid).
func softwareRAIDImage(t *testing.T, ctx context.Context, o *osimage.OS, dir string) ([]byte, string) {
	t.Helper()
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s to build an image that installs GRUB (in test.sh)", m)
	}
	if _, err := exec.LookPath("mdadm"); err != nil {
		t.Skip("SKIPPED: needs mdadm (in test.sh): the image's grub-install asks it for the array's UUID")
	}
	raw := filepath.Join(dir, "software-raid.raw")
	uuid, err := o.SoftwareRAIDBIOSDisk(ctx, dir, raw, 96<<20)
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	return img, uuid
}

// rootfsUUID is the instance_info Ironic takes the root file system's
// UUID from for software RAID.
func rootfsUUID(uuid string) nodes.UpdateOpts {
	return nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_rootfs_uuid", Value: uuid}}
}

// TestVMDeploySoftwareRAIDBIOS is the same Metal3-style flow under
// SeaBIOS, with a 2 GiB RAID-1 on two 3 GiB disks (room for the partition
// image below): cleaning builds the arrays on msdos-labelled holders, the
// deploy writes softwareRAIDImage onto /dev/md0, and install_bootloader
// (with the image's root file system UUID, as Ironic sends it for
// software RAID) runs the image's grub-install on both holder disks, as
// IPA's _install_grub2 does. The deployed OS then boots from the mirror,
// from the first disk alone and from the second alone. Then, as Ironic
// allows it (it refuses no image type with software RAID; IPA lays a
// partition image out on the array as on a disk), the node is torn down
// without cleaning and internal/testbed/osimage's partition image is deployed
// onto the same RAID-1: the agent partitions /dev/md0, writes the root
// file system to /dev/md0p1 and installs GRUB on both holders again, and
// the OS boots from the mirror and from the second disk alone.
func TestVMDeploySoftwareRAIDBIOS(t *testing.T) {
	seriesIndependent(t) // the agent's software RAID, alike in every series
	slowScenario(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	o, dir := deployedOS(t, ctx)
	img, rootUUID := softwareRAIDImage(t, ctx, o, dir)
	l := raidLayout{disks: 2, sizeMB: 3 << 10, config: metal3SoftwareRAID(2)}
	m, deployed, lc := raidCleanAndDeploy(t, ctx, "bios", newAgentPort(t), newMACs(t), l, img, rootfsUUID(rootUUID))
	for _, holder := range []string{"/dev/vda", "/dev/vdb"} {
		if _, ok := deployed.Find(logtext.Msg(bootloader.EventInstallingGRUB2) + ` device=` + holder); !ok {
			t.Errorf("the agent did not install GRUB on %s", holder)
		}
	}
	for _, ids := range [][]string{{"vda", "vdb"}, {"vda"}, {"vdb"}} {
		bootDisks(t, ctx, m, ids, osimage.Booted)
	}

	// The partition image onto the same arrays.
	lc.Change(nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, 2*time.Minute)
	part, partImg := deployedOSPartitionImage(t, ctx, o, dir)
	partUUID, err := blockdev.BlockUUID(part)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "root.img", time.Time{}, bytes.NewReader(partImg))
	}))
	m.GuestFwd[guestHost+":80"] = addr
	ops := append(imageInfo("http://"+addr+"/root.img", partImg),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_type", Value: "partition"},
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/instance_info/root_gb", Value: "1"})
	deployed = deployOntoMD0(lc, append(ops, rootfsUUID(partUUID)...))
	if l, ok := deployed.Find(logtext.Msg(agent.EventPartitionImageWritten) + ` device=/dev/md0 `); !ok || !strings.Contains(l.Text, "/dev/md0p1") {
		t.Errorf("the partition image was not laid out on /dev/md0 with its root on /dev/md0p1: %q", l.Text)
	}
	for _, holder := range []string{"/dev/vda", "/dev/vdb"} {
		if _, ok := deployed.Find(logtext.Msg(bootloader.EventInstallingGRUB2) + ` device=` + holder); !ok {
			t.Errorf("partition image: the agent did not install GRUB on %s", holder)
		}
	}
	for _, ids := range [][]string{{"vda", "vdb"}, {"vdb"}} {
		vm := bootDisks(t, ctx, m, ids, osimage.Booted)
		if _, ok := vm.Find("vmlinuz-" + grubimage.KernelVersion); !ok {
			t.Errorf("booting from %v: the OS did not boot through the grub.cfg the agent's grub-mkconfig wrote", ids)
		}
	}
}
