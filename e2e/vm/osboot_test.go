package vm

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage/grubimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// Ports of the deployed-OS tests, n = 0 (BIOS), 1 (UEFI), 2 and 3
// (TestVMOSBootFlavors): the agent's API hostfwd, and the BMC's LAN (UDP)
// and VM (TCP) ports. They overlap across beds (the agent's of 3 is the
// BMC VM port of 0), which the package's tests, run one at a time, allow.
var (
	osBootAgentPort = portOffset() + 9570
	osBootLANPort   = portOffset() + 9572
	osBootVMPort    = portOffset() + 9573
)

// osBootBed is one machine behind an ipmi_sim BMC, enrolled in Ironic with
// the ipmi hardware type, available, and the server of its images.
type osBootBed struct {
	s      *suite
	m      qemu.Machine
	bmc    *bmcsim.IPMISim
	node   string
	os     *osimage.OS
	dir    string // the images, served at images
	images string
}

// newOSBootBed builds the OS, starts the BMC and enrolls the node (n tells
// the two firmwares' MACs, ports and BMC addresses apart).
func newOSBootBed(t *testing.T, ctx context.Context, fw string, n int) *osBootBed {
	rd := ramdisk(t)
	for _, p := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (Debian packages openipmi and ipmitool; in test.sh)", p)
		}
	}
	if m := osimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (in test.sh)", m)
	}
	s := services(t)
	if !s.series.Host() {
		t.Skipf("SKIPPED: the ipmi hardware type runs with the host's Ironic (2023.1) only, not %s", s.series)
	}
	b := &osBootBed{s: s, dir: t.TempDir()}
	start := time.Now()
	var err error
	if b.os, err = osimage.Build(ctx, b.dir); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(start), "os_build_s")

	macs := newMACs(t)
	agentPort := osBootAgentPort + n
	m := serviceMachine(t, rd, fw, agentPort, macs)
	bmcAddress := fmt.Sprintf("127.95.41.%d", 1+n)
	m.BMC = &qemu.BMC{Kind: qemu.BMCOpenIPMI, MfgID: 0xc0de, ProductID: 0x0b0d,
		LANAddress: bmcAddress, LANPort: osBootLANPort + 2*n, LANMAC: fmt.Sprintf("02:00:00:95:41:%02x", 1+n),
		User: "ironic", Password: "ipmi-s3cret", VMPort: osBootVMPort + 2*n}
	for i := range m.Disks {
		if m.Disks[i].Serial != deployTarget {
			continue
		}
		if fw == "bios" {
			// A server's BIOS setup names its boot disk; SeaBIOS tries
			// only the first hard disk.
			m.Disks[i].BootFirst = true
		} else {
			// OVMF sees a virtio-scsi disk only at target 0, LUN 0 (see
			// TestVMDeployUEFI). No boot order from QEMU, which OVMF
			// would put before the entries in its NVRAM.
			m.Disks[i].SCSITarget, m.Disks[i].SCSILun = 0, 0
		}
	}
	// The agent fetches the images through the image server as its HTTP
	// proxy (driver_info image_http_proxy), as in deployVM.
	b.images = serve(t, 0, http.FileServer(http.Dir(b.dir)))
	m.GuestFwd[guestHost+":80"] = b.images
	for name, src := range map[string]string{"deploy.kernel": rd.KernelFor(qemu.Firmware(fw)), "deploy.initramfs": rd.InitrdFor(qemu.Firmware(fw))} {
		if err := os.Symlink(src, filepath.Join(b.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	b.bmc = startBMC(t, ctx, m, qemu.Options{})
	b.bmc.SetKernelArgs(agentArgs(agentPort) + " ironic_agent.dhcp=" + macs[0])
	b.m = m

	noClean := false
	node := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: fmt.Sprintf("vm-osboot-%s-%d", fw, n), AutomatedClean: &noClean,
		Properties: map[string]any{"capabilities": "boot_mode:" + fw, "vendor": nil},
		IPMI: map[string]any{
			"ipmi_address": bmcAddress, "ipmi_port": m.BMC.LANPort,
			"ipmi_username": m.BMC.User, "ipmi_password": m.BMC.Password,
			"ipmi_cipher_suite": 3, // see ipmiLifecycle
			"deploy_kernel":     "http://" + b.images + "/deploy.kernel",
			"deploy_ramdisk":    "http://" + b.images + "/deploy.initramfs",
			"image_http_proxy":  "http://" + guestHost + ":80",
		}}, macs[:]...)
	b.node = node.UUID
	// Automated cleaning is off: provide boots nothing.
	bmcLifecycle(t, ctx, s.ironic, b.node, ipmiPower, kernelBoot, b.bmc).Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, time.Minute)
	return b
}

// osBootImage is one image to deploy.
type osBootImage struct {
	file      string // in the bed's directory
	format    string // raw or qcow2
	partition bool   // a partition image (root_gb 1)
	hostname  string // the config drive's
	userData  string
	// steps are deploy steps of the request; props are node properties
	// set with the instance_info.
	steps []nodes.DeployStep
	props map[string]any
}

// deploy deploys img with a config drive (see deployOS) onto the disk
// whose serial is deployTarget and returns the VM of the deployed OS.
func (b *osBootBed) deploy(t *testing.T, ctx context.Context, img osBootImage) *qemu.VM {
	t.Helper()
	_, vm := deployOS(t, ctx, osDeploy{s: b.s, node: b.node, bmc: b.bmc, firmware: string(b.m.Firmware),
		url: "http://" + b.images + "/" + img.file, path: filepath.Join(b.dir, img.file), serial: deployTarget, img: img})
	return vm
}

// osBMC is the BMC of a deployOS machine: a bmcsim.IPMISim or a
// bmcsim.RedfishBMC.
type osBMC interface {
	bmcPower
	VM() *qemu.VM
}

// bootsDisk says whether bmc's boot device is the disk and vm, its last
// boot, neither a kernel handed to QEMU, a network boot nor a virtual CD.
func bootsDisk(bmc osBMC, vm *qemu.VM) (bool, string) {
	var dev string
	disk := false
	switch b := bmc.(type) {
	case *bmcsim.IPMISim:
		dev = b.BootDevice()
		disk = b.BootDevice() == bmcsim.BootDisk
	case *bmcsim.RedfishBMC:
		target, enabled, _ := b.BootOverride()
		dev = target + " " + enabled
		disk = target == bmcsim.RedfishBootHdd
	}
	return disk && vm.Machine.Kernel == "" && !vm.Machine.NetBoot && vm.Machine.ISO == "", dev
}

// osDeploy is one deploy of an image of internal/testbed/osimage to a node
// whose BMC the test holds.
type osDeploy struct {
	s    *suite
	node string
	bmc  osBMC
	// l drives the node; nil: a lifecycle of IPMI power and kernel boots
	// (a machine without PXE NICs) on s's Ironic.
	l        *lifecycle
	firmware string
	url      string // where the agent downloads the image
	path     string // the same image on the host
	serial   string // the root-device hint
	img      osBootImage
}

// deployOS deploys d's image with a config drive as Metal3 and Nova send
// it (meta_data and user_data; Ironic builds the ISO), checks that Ironic
// rebooted the machine from its disk into the deployed OS and that the OS
// read that config drive, and returns the VMs of the ramdisk's boot and of
// the deployed OS's (powered off again by the OS).
func deployOS(t *testing.T, ctx context.Context, d osDeploy) (ramdiskVM, osVM *qemu.VM) {
	t.Helper()
	img := d.img
	f, err := os.Open(d.path)
	if err != nil {
		t.Fatal(err)
	}
	md, sha := md5.New(), sha256.New()
	size, err := io.Copy(io.MultiWriter(md, sha), f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	info := map[string]any{
		"image_source":        d.url,
		"image_checksum":      hex.EncodeToString(md.Sum(nil)),
		"image_os_hash_algo":  "sha256",
		"image_os_hash_value": hex.EncodeToString(sha.Sum(nil)),
		"image_disk_format":   img.format,
		"root_gb":             "0",
	}
	if img.partition {
		info["image_type"], info["root_gb"] = "partition", "1"
	}
	ops := nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/instance_info", Value: info},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": d.serial}},
	}
	for k, v := range img.props {
		ops = append(ops, nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/" + k, Value: v})
	}
	l := d.l
	if l == nil {
		l = bmcLifecycle(t, ctx, d.s.ironic, d.node, ipmiPower, kernelBoot, d.bmc)
	}
	if err := nodes.Update(ctx, l.ironic.Service, l.node, ops).Err; err != nil {
		t.Fatal(err)
	}
	cd := nodes.ConfigDrive{
		MetaData: map[string]any{"uuid": l.node, "hostname": img.hostname, "name": img.hostname},
		UserData: img.userData,
	}
	deploy := l.To(nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: cd, DeploySteps: img.steps}, 10*time.Minute)
	ramdiskVM, deployed := deploy.VM, deploy.Took
	// Ironic powers the machine on into the deployed OS before it calls
	// the node active: the second power-on of the deploy.
	if deploy.PowerOns != 2 {
		t.Fatalf("%d power-ons during the deploy, want 2 (ramdisk, deployed OS); events: %s", deploy.PowerOns, strings.Join(d.bmc.Events(), "; "))
	}
	vm := d.bmc.VM()
	if ok, dev := bootsDisk(d.bmc, vm); !ok {
		t.Fatalf("after the deploy the BMC's boot device is %q, QEMU got kernel %q, network boot %v and CD %q; want disk, none, false and none (events: %s)",
			dev, vm.Machine.Kernel, vm.Machine.NetBoot, vm.Machine.ISO, strings.Join(d.bmc.Events(), "; "))
	}
	hb := "?"
	if l, ok := ramdiskVM.Find(logtext.Msg(agent.EventHeartbeatSuccessful)); ok {
		hb = fmt.Sprintf("%.1fs", l.At.Seconds())
	}
	r := waitOSReport(t, ctx, d.bmc, vm, img)
	booted, _ := vm.Find(osimage.Booted)
	t.Logf("%s %s deploy of %s (%d MiB), config drive %s", d.firmware, img.format, filepath.Base(d.path), size>>20, r.Drive)
	reportSeconds(t, deployed, img.format, "deploy_s")
	reportFirstHeartbeat(t, d.firmware, hb, img.format, "deploy_first_heartbeat_s")
	reportSeconds(t, booted.At, img.format, "os_init_s")
	return ramdiskVM, vm
}

// waitOSReport waits until the deployed OS in vm has printed what it read
// from the config drive and powered the machine off, and checks it read
// img's hostname and user-data.
func waitOSReport(t *testing.T, ctx context.Context, bmc osBMC, vm *qemu.VM, img osBootImage) osimage.Report {
	t.Helper()
	octx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	r, err := osimage.WaitReport(octx, vm)
	if err != nil {
		t.Fatalf("%v\nBMC events: %s", err, strings.Join(bmc.Events(), "; "))
	}
	if r.Hostname != img.hostname || r.UserData != img.userData || !r.HasUserData {
		t.Errorf("the deployed OS read hostname %q and user-data %q from the config drive; want %q and %q", r.Hostname, r.UserData, img.hostname, img.userData)
	}
	if err := vm.Wait(octx); err != nil {
		t.Errorf("the deployed OS did not power off: %v", err)
	}
	return r
}

// TestVMOSBootBIOS deploys, under SeaBIOS with Ironic's ipmi hardware
// type driving power and boot device, the partition image of
// internal/testbed/osimage: Ironic has the agent lay out root and config drive and
// run the image's own grub-install and grub-mkconfig. Ironic sets the
// boot device to disk and powers the machine on, the firmware boots the
// disk the root-device hint named (the first of several in its order, as
// a server's BIOS setup names it), and the OS prints the hostname and
// user-data of the config drive Ironic built from the request's meta_data
// and user_data. (TestVMLifecycleBIOS deploys the whole-disk image, as
// qcow2, through Ironic's network boot.)
func TestVMOSBootBIOS(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	b := newOSBootBed(t, ctx, "bios", 0)
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: the partition image needs %s (test.sh APT_PACKAGES)", m)
	}
	if err := b.os.PartitionImage(ctx, b.dir, filepath.Join(b.dir, "root.img"), 96<<20); err != nil {
		t.Fatal(err)
	}
	vm := b.deploy(t, ctx, osBootImage{file: "root.img", format: "raw", partition: true, hostname: "osboot-bios-partition",
		userData: "#!/bin/sh\necho partition image\n"})
	// The menu grub-mkconfig wrote in the image's root file system.
	if _, ok := vm.Find("vmlinuz-" + grubimage.KernelVersion); !ok {
		t.Errorf("the OS did not boot through the grub.cfg the agent's grub-mkconfig wrote")
	}
	// GRUB's boot code went to the hinted disk only (the others were
	// created empty and nothing cleaned them).
	zero := make([]byte, 440)
	for _, d := range b.m.Disks {
		got := readAt(t, b.m.DiskPath(d.ID), 0, 440)
		if has := !bytes.Equal(got, zero); has != (d.Serial == deployTarget) {
			t.Errorf("disk %s (%s): holds boot code: %v", d.ID, d.Serial, has)
		}
	}
}

// TestVMOSBootUEFI deploys, under OVMF with Ironic's ipmi hardware type,
// the partition image of internal/testbed/osimage. The agent makes the EFI system
// partition (550 MiB, FAT32, its own FAT writer), mounts the image's root
// and runs its grub-install for x86_64-efi: the image has no efibootmgr,
// so the NVRAM entry fails, as IPA lets it, and GRUB lands at the
// removable-media path. Ironic sets the boot device to disk (with the EFI
// flag) and powers on; OVMF finds that loader, GRUB's menu from the
// image's grub-mkconfig boots the OS, and the OS prints the config drive's
// hostname and user-data. (TestVMDeployUEFI covers the whole-disk image
// and the agent's NVRAM entry.)
func TestVMOSBootUEFI(t *testing.T) {
	slowScenario(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	b := newOSBootBed(t, ctx, "uefi", 1)
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: the partition image needs %s (test.sh APT_PACKAGES)", m)
	}
	if err := b.os.PartitionImage(ctx, b.dir, filepath.Join(b.dir, "root.img"), 96<<20); err != nil {
		t.Fatal(err)
	}
	vm := b.deploy(t, ctx, osBootImage{file: "root.img", format: "raw", partition: true, hostname: "osboot-uefi-partition",
		userData: "#cloud-config\nhostname: osboot-uefi-partition\n"})
	if _, ok := vm.Find("vmlinuz-" + grubimage.KernelVersion); !ok {
		t.Errorf("the OS did not boot through the grub.cfg the agent's grub-mkconfig wrote")
	}
	if l, ok := vm.Find("BdsDxe: loading"); ok {
		t.Logf("OVMF: %s", l.Text[strings.Index(l.Text, "BdsDxe"):])
	}
}

// TestVMOSBootFlavors deploys, under SeaBIOS as TestVMOSBootBIOS,
// partition images laid out as other distributions lay theirs out
// (internal/testbed/osimage/grubimage): RHEL's XFS root with grub2-* tools and
// /boot/grub2, SUSE's btrfs root in the default subvolume
// @/.snapshots/1/snapshot. The ramdisk mounts each root (its xfs and
// btrfs modules) and runs the image's grub2-install and grub2-mkconfig;
// inject_files, a deploy step after install_bootloader, writes one file
// the node's properties name (found by path) and one its arguments name
// (on LABEL=img-root). The machine then boots the disk through that GRUB
// into the OS, which reads the config drive; the disk, mounted read-only
// here afterwards, holds both files.
func TestVMOSBootFlavors(t *testing.T) {
	// Two beds, each deploying a 320 MiB image under emulation.
	slowScenario(t)
	qemu.SkipUnlessRoot(t)
	// A bed each (n = 2, 3: a BMC of its own): the node of the first,
	// active, may outlive its test in Ironic, whose power sync keeps
	// asking its BMC to power on.
	for i, f := range []grubimage.Flavor{grubimage.RHEL(), grubimage.SUSE()} {
		t.Run(f.Name, func(t *testing.T) {
			if m := grubimage.MissingFor(f); m != "" {
				t.Skipf("SKIPPED: the partition image needs %s (test.sh APT_PACKAGES)", m)
			}
			osBootFlavor(t, f, 2+i)
		})
	}
}

func osBootFlavor(t *testing.T, f grubimage.Flavor, n int) {
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	b := newOSBootBed(t, ctx, "bios", n)
	start := time.Now()
	// mkfs.xfs makes nothing smaller than 300 MiB.
	if err := b.os.PartitionImageFor(ctx, b.dir, filepath.Join(b.dir, "root.img"), 320<<20, f); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(start), f.Name, "image_build_s")
	byProp, byStep := "from the node's properties, "+f.Name+"\n", "from the step's arguments, "+f.Name+"\n"
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	vm := b.deploy(t, ctx, osBootImage{file: "root.img", format: "raw", partition: true, hostname: "osboot-" + f.Name,
		userData: "#!/bin/sh\necho " + f.Name + "\n",
		props:    map[string]any{"inject_files": []map[string]any{{"path": "/etc/injected/by-property.txt", "content": b64(byProp)}}},
		steps: []nodes.DeployStep{{Interface: nodes.InterfaceDeploy, Step: "inject_files", Priority: 50, Args: map[string]any{
			"files": []map[string]any{{"path": "/root/by-step.txt", "partition": "LABEL=img-root", "content": b64(byStep)}}}}}})
	if _, ok := vm.Find("vmlinuz-" + grubimage.KernelVersion); !ok {
		t.Errorf("the OS did not boot through the grub.cfg the agent's grub2-mkconfig wrote")
	}
	for _, d := range b.m.Disks {
		if d.Serial != deployTarget {
			continue
		}
		// IPA's order: the config drive, then the root.
		loop := looptest.AttachFile(t, b.m.DiskPath(d.ID), "--read-only")
		// BLKPG: the kernel's own partition scan of a loop device does
		// not always make the nodes.
		looptest.Run(t, "partx", "-a", loop)
		root := loop + "p2"
		looptest.WaitFor(t, root)
		if got := looptest.BlkidProbe(t, root); !strings.Contains("\n"+got+"\n", "\nTYPE="+f.FS+"\n") {
			t.Fatalf("%s: %s, want the image's %s root", root, got, f.FS)
		}
		mnt := t.TempDir()
		looptest.Run(t, "mount", "-o", "ro", root, mnt)
		defer looptest.Run(t, "umount", mnt)
		for p, want := range map[string]string{"etc/injected/by-property.txt": byProp, "root/by-step.txt": byStep} {
			if got, err := os.ReadFile(filepath.Join(mnt, p)); err != nil || string(got) != want {
				t.Errorf("/%s on the deployed root: %q (%v), want %q", p, got, err, want)
			}
		}
	}
}
