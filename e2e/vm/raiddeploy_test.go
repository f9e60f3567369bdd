package vm

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/e2e/ironictest"
	"github.com/ironic-go/ironic-agent/internal/grubimage"
	"github.com/ironic-go/ironic-agent/internal/vmtest"
)

// metal3SoftwareRAID is target_raid_config as Metal3's baremetal-operator
// builds it from a BareMetalHost's softwareRAIDVolumes
// (buildTargetSoftwareRAIDCfg): controller software, is_root_volume
// always sent (rootVolume defaults to false), physical_disks as
// devicehints.MakeHintMap writes deviceName ("s== <name>"), size_gb nil
// for "the rest of the disk", which gophercloud sends as "MAX". Here: a
// 1 GiB RAID-1 over both disks, then a RAID-0 over the rest of them.
func metal3SoftwareRAID() nodes.RAIDConfigOpts {
	one, no := 1, false
	return nodes.RAIDConfigOpts{LogicalDisks: []nodes.LogicalDisk{
		{SizeGB: &one, RAIDLevel: nodes.RAID1, Controller: "software", IsRootVolume: &no,
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

// twoDiskRAID is metal3SoftwareRAID on two 2 GiB disks.
func twoDiskRAID() raidLayout {
	return raidLayout{disks: 2, sizeMB: 2 << 10, config: metal3SoftwareRAID()}
}

// raidMachine is a VM of the RAID deploy tests: the layout's virtio
// disks, the holders of the arrays.
func raidMachine(t *testing.T, fw string, port int, macs [2]string, l raidLayout) vmtest.Machine {
	m := serviceMachine(t, ramdisk(t), fw, port, macs)
	m.Name = "ironic-agent-raid-" + fw
	m.MemoryMB = 768
	m.Disks = nil
	for i := range l.disks {
		m.Disks = append(m.Disks, vmtest.Disk{ID: "vd" + string(rune('a'+i)), Kind: "virtio-blk", SizeMB: l.sizeMB,
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

// raidCleanAndDeploy takes a node through what Metal3 does for a host
// with softwareRAIDVolumes, against the real Ironic: target_raid_config
// in Metal3's shape, raid_interface agent, manual cleaning with Metal3's
// steps (delete_configuration, erase_devices_metadata,
// create_configuration), provide, and a deploy of img with root-device
// hints naming the RAID-1 (/dev/md0). It returns the machine, powered
// off by the agent at the end of the deploy, and the deploy's VM.
func raidCleanAndDeploy(t *testing.T, ctx context.Context, fw string, port int, macs [2]string, l raidLayout, img []byte, extra nodes.UpdateOpts) (vmtest.Machine, *vmtest.VM, string) {
	s := services(t)
	m := raidMachine(t, fw, port, macs, l)
	noClean := false
	node := enroll(t, ctx, s, ironictest.NodeSpec{Name: "vm-raid-" + fw, AutomatedClean: &noClean,
		Properties: map[string]any{"capabilities": "boot_mode:" + fw}}, macs)
	ifaces := nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/raid_interface", Value: "agent"}}
	if fw == "bios" {
		// At the end of a BIOS deploy Ironic sets the boot device to
		// disk, which the fake management interface refuses.
		ifaces = append(ifaces, nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"})
	}
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, ifaces).Err; err != nil {
		t.Fatal(err)
	}
	if err := nodes.SetRAIDConfig(ctx, s.ironic.Service, node.UUID, l.config).ExtractErr(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: []nodes.CleanStep{
		{Interface: nodes.InterfaceRAID, Step: "delete_configuration"},
		{Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"},
		{Interface: nodes.InterfaceRAID, Step: "create_configuration"},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "clean wait", time.Minute); err != nil {
		t.Fatal(err)
	}
	vm := boot(t, ctx, m, vmtest.Options{})
	n, err := s.ironic.WaitState(ctx, node.UUID, "manageable", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: manual cleaning (delete_configuration, erase_devices_metadata, create_configuration): %.1fs", fw, time.Since(start).Seconds())
	if lds, _ := n.RAIDConfig["logical_disks"].([]any); len(lds) != len(l.config.LogicalDisks) {
		t.Errorf("node raid_config after cleaning = %v, want the %d logical disks", n.RAIDConfig, len(l.config.LogicalDisks))
	}
	for i := range l.config.LogicalDisks {
		want := fmt.Sprintf(`msg="creating md device" device=/dev/md%d`, i)
		if _, ok := vm.Find(want); !ok {
			t.Errorf("the agent's log has no %q", want)
		}
	}
	// The fake power interface cannot power the VM off: the deploy boots
	// it again.
	vm.Kill()

	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "available", time.Minute); err != nil {
		t.Fatal(err)
	}
	ops := append(serveImage(t, &m, img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"name": "/dev/md0"}})
	ops = append(ops, extra...)
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetActive}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "wait call-back", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	vm = boot(t, ctx, m, vmtest.Options{})
	if _, err := s.ironic.WaitState(ctx, node.UUID, "active", 8*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: deploy onto /dev/md0: %.1fs to active", fw, time.Since(start).Seconds())
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "/dev/md") && (strings.Contains(l.Text, "image") || strings.Contains(l.Text, "ESP") ||
			strings.Contains(l.Text, "EFI") || strings.Contains(l.Text, "GRUB") || strings.Contains(l.Text, "boot partition")) {
			t.Logf("agent: %s", l.Text)
		}
	}
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return m, vm, node.UUID
}

// bootDisks boots the deployed machine from its disks (no ramdisk), with
// only the disks named, and waits for want on the console.
func bootDisks(t *testing.T, ctx context.Context, m vmtest.Machine, ids []string, want string) *vmtest.VM {
	t.Helper()
	m.Kernel, m.Initrd, m.Append = "", "", ""
	var disks []vmtest.Disk
	for _, d := range m.Disks {
		for _, id := range ids {
			if d.ID == id {
				disks = append(disks, d)
			}
		}
	}
	m.Disks = disks
	start := time.Now()
	vm := boot(t, ctx, m, vmtest.Options{})
	if _, err := vm.WaitFor(ctx, want); err != nil {
		t.Fatalf("booting from %v: %v\n%s", ids, err, consoleTail(vm, 30))
	}
	took := time.Since(start)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := vm.Wait(wctx); err != nil {
		// The marker is the proof; a loader that cannot power the VM
		// off is not this test's concern.
		t.Logf("booting from %v: the loader did not power off: %v", ids, err)
		vm.Kill()
	}
	t.Logf("boot from %v: %.1fs to the loader's marker", ids, took.Seconds())
	return vm
}

// TestVMDeploySoftwareRAIDUEFI is a Metal3-style software RAID deploy
// under OVMF: cleaning builds a RAID-1 and a RAID-0 on two disks, the
// deploy writes uefiImage (a GPT with an ESP holding a GRUB loader at a
// path no firmware boots by itself) onto /dev/md0, and the agent, as
// IPA's manage_uefi, moves that ESP to a mirror of ESPs on both holders
// (md RAID-1, metadata 1.0) with one NVRAM entry per holder. The VM then
// boots from both disks, from the first alone and from the second alone,
// each time through an entry the agent wrote.
func TestVMDeploySoftwareRAIDUEFI(t *testing.T) {
	img := uefiImage(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	m, deployed, uuid := raidCleanAndDeploy(t, ctx, "uefi", agentPortBase+8, [2]string{"52:54:00:6d:08:01", "52:54:00:6d:08:02"}, twoDiskRAID(), img, nil)
	if _, ok := deployed.Find(`msg="relocating the EFI system partition to the ESP mirror" from=/dev/md0p1`); !ok {
		t.Errorf("the agent did not move the image's ESP from /dev/md0p1 to a mirror")
	}

	// Each holder: an ESP (type EF00, uefi-holder-<n>) in the room kept
	// before the RAID partitions, holding the image's loader.
	for i, id := range []string{"vda", "vdb"} {
		pt, err := blockdev.ReadPartTable(m.DiskPath(id), 512)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range pt.Partitions {
			if p.TypeGUID == blockdev.ESPTypeGUID {
				found = true
				if p.Start != 1<<20 || p.Size != 550<<20 || p.Name != fmt.Sprintf("uefi-holder-%d", i) {
					t.Errorf("%s: ESP %+v, want uefi-holder-%d at 1 MiB, 550 MiB", id, p, i)
				}
				if b := readAt(t, m.DiskPath(id), p.Start, 16<<20); !bytes.Contains(b, []byte(uefiLoaderSays)) {
					t.Errorf("%s: the ESP does not hold the image's loader", id)
				}
			}
		}
		if !found {
			t.Errorf("%s: no EFI system partition: %+v", id, pt.Partitions)
		}
	}

	entry := regexp.MustCompile(`BdsDxe: loading Boot[0-9A-F]{4} "ironic1 \(RAID, part([01])\)" from HD\(3,GPT,`)
	for _, ids := range [][]string{{"vda", "vdb"}, {"vda"}, {"vdb"}} {
		vm := bootDisks(t, ctx, m, ids, uefiLoaderSays)
		var loaded []string
		for _, l := range vm.Lines() {
			if sm := entry.FindStringSubmatch(l.Text); sm != nil {
				loaded = append(loaded, "part"+sm[1])
			}
		}
		if len(loaded) == 0 {
			t.Errorf("booting from %v: OVMF loaded no entry the agent wrote", ids)
			continue
		}
		t.Logf("booting from %v: OVMF loaded %s", ids, strings.Join(loaded, ", "))
	}
	raidUndeployAndClean(t, ctx, m, uuid)
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

// raidUndeployAndClean tears the deployed node down and cleans it as
// Metal3 does when softwareRAIDVolumes is emptied (delete_configuration,
// erase_devices_metadata): afterwards no disk, nor any partition the
// deploy left (the arrays' members: metadata 1.2 for the data arrays, 1.0
// for the ESP mirror), holds an md superblock at the place of any
// version, and mdadm finds none on the disks.
func raidUndeployAndClean(t *testing.T, ctx context.Context, m vmtest.Machine, uuid string) {
	s := services(t)
	type region struct {
		disk        string
		start, size int64
	}
	var regions []region
	magic := []byte{0xfc, 0x4e, 0x2b, 0xa9}
	found := func(r region) []string {
		var at []string
		for v, off := range mdSuperblockPlaces(r.start, r.size) {
			if bytes.Equal(readAt(t, m.DiskPath(r.disk), off, 4), magic) {
				at = append(at, fmt.Sprintf("%s at %d", v, off))
			}
		}
		return at
	}
	members := 0
	for _, d := range m.Disks {
		regions = append(regions, region{d.ID, 0, int64(d.SizeMB) << 20})
		pt, err := blockdev.ReadPartTable(m.DiskPath(d.ID), 512)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pt.Partitions {
			r := region{d.ID, p.Start, p.Size}
			regions = append(regions, r)
			if len(found(r)) > 0 {
				members++
			}
		}
	}
	if members != 6 {
		t.Errorf("before cleaning: %d partitions carry an md superblock, want 6 (the root, data and ESP arrays' members)", members)
	}
	if err := s.ironic.Provision(ctx, uuid, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, uuid, "available", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ironic.Provision(ctx, uuid, nodes.ProvisionStateOpts{Target: nodes.TargetManage}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, uuid, "manageable", time.Minute); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.ironic.Provision(ctx, uuid, nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: []nodes.CleanStep{
		{Interface: nodes.InterfaceRAID, Step: "delete_configuration"},
		{Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, uuid, "clean wait", time.Minute); err != nil {
		t.Fatal(err)
	}
	vm := boot(t, ctx, m, vmtest.Options{})
	if _, err := s.ironic.WaitState(ctx, uuid, "manageable", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("cleaning the deployed arrays away (delete_configuration, erase_devices_metadata): %.1fs", time.Since(start).Seconds())
	vm.Kill()
	for _, r := range regions {
		if at := found(r); len(at) > 0 {
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

// biosRAIDSays is what the deployed GRUB prints before it powers off.
const biosRAIDSays = "ironic-agent VM test: GRUB from a RAID holder disk ran"

// grubDiskImage is a whole-disk image (msdos label, one ext4 partition
// at 1 MiB) whose root filesystem installs GRUB (internal/grubimage)
// with a grub.cfg that talks on the serial console, prints biosRAIDSays
// and halts. It returns the image and its root filesystem's UUID, which
// Ironic passes to install_bootloader for software RAID
// (instance_info image_rootfs_uuid).
func grubDiskImage(t *testing.T, ctx context.Context) ([]byte, string) {
	t.Helper()
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s to build an image that installs GRUB (in test.sh)", m)
	}
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	if err := grubimage.Tree(ctx, tree); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"etc/default/grub": "GRUB_DEFAULT=0\nGRUB_TIMEOUT=0\nGRUB_DISTRIBUTOR=Testos\nGRUB_TERMINAL=serial\n" +
			"GRUB_SERIAL_COMMAND=\"serial --unit=0 --speed=115200\"\nGRUB_CMDLINE_LINUX=\"console=ttyS0\"\n",
		"etc/grub.d/05_ironic_agent_test": "#!/bin/sh\ncat <<'EOF'\necho \"" + biosRAIDSays + "\"\nhalt\nEOF\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(tree, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// mdadm, as a real image deployed onto RAID has it: grub-install
	// names an md array to GRUB by the UUID `mdadm --detail --export`
	// gives, and without it finds no disk for /boot.
	copyProgram(t, ctx, tree, "mdadm")
	const fsSize = 96 << 20
	fsPath := filepath.Join(dir, "root.ext4")
	if err := grubimage.Ext4(ctx, tree, fsPath, fsSize); err != nil {
		t.Fatal(err)
	}
	uuid, err := blockdev.BlockUUID(fsPath)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := os.ReadFile(fsPath)
	if err != nil {
		t.Fatal(err)
	}
	img := make([]byte, 1<<20, 1<<20+len(fs))
	img = append(img, fs...)
	binary.LittleEndian.PutUint32(img[440:], 0x52414944) // disk identifier
	img[446+4] = 0x83
	binary.LittleEndian.PutUint32(img[446+8:], 2048)
	binary.LittleEndian.PutUint32(img[446+12:], fsSize/512)
	img[510], img[511] = 0x55, 0xaa
	return img, uuid
}

// TestVMDeploySoftwareRAIDBIOS is the same Metal3-style flow under
// SeaBIOS: cleaning builds the arrays on msdos-labelled holders, the
// deploy writes grubDiskImage onto /dev/md0, and install_bootloader (with
// the image's root filesystem UUID, as Ironic sends it for software RAID)
// runs the image's grub-install on both holder disks, as IPA's
// _install_grub2 does. The VM then boots GRUB from both disks, from the
// first alone and from the second alone.
func TestVMDeploySoftwareRAIDBIOS(t *testing.T) {
	slowScenario(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	img, rootUUID := grubDiskImage(t, ctx)
	m, deployed, _ := raidCleanAndDeploy(t, ctx, "bios", agentPortBase+9, [2]string{"52:54:00:6d:09:01", "52:54:00:6d:09:02"}, twoDiskRAID(), img,
		nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_rootfs_uuid", Value: rootUUID}})
	for _, holder := range []string{"/dev/vda", "/dev/vdb"} {
		if _, ok := deployed.Find(`msg="installing GRUB2" device=` + holder); !ok {
			t.Errorf("the agent did not install GRUB on %s", holder)
		}
	}
	for _, ids := range [][]string{{"vda", "vdb"}, {"vda"}, {"vdb"}} {
		bootDisks(t, ctx, m, ids, biosRAIDSays)
	}
}

// copyProgram copies a host program and the shared libraries ldd lists
// into the image tree, at the same paths.
func copyProgram(t *testing.T, ctx context.Context, tree, name string) {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("SKIPPED: needs %s (in test.sh)", name)
	}
	files := []string{p}
	out, err := exec.CommandContext(ctx, "ldd", p).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", p, err)
	}
	for _, w := range strings.Fields(string(out)) {
		if strings.HasPrefix(w, "/") {
			files = append(files, w)
		}
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		// Debian's merged /usr: the tree's /lib and /sbin link into /usr.
		dst := filepath.Join(tree, "usr", strings.TrimPrefix(strings.TrimPrefix(f, "/usr"), "/"))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
