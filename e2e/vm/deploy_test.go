package vm

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// deployTarget is the serial of the disk the root-device hint names.
const deployTarget = "LAB-SCSI-0002"

// deployCase is what a BIOS and a UEFI deploy do differently.
type deployCase struct {
	firmware string
	macs     [2]string
	port     int            // agent API hostfwd
	props    map[string]any // node properties over the Ironic test bed's defaults
	// management replaces the fake management interface when set.
	management string
	image      []byte
	// adjust changes the machine before it boots, if set.
	adjust func(*qemu.Machine)
	// same are the byte ranges of the image the disk must hold unchanged.
	same [][2]int
	// unique is the offset of 4 KiB of the image no zeroed disk holds
	// (0: 1 MiB before its end).
	unique int
	// configDrive goes with the deploy request when set.
	configDrive any
	// fetchDirect boots a ramdisk with the fetch_direct step and runs it
	// before write_image: the image from the same server onto the same
	// disk as `curl | dd oflag=direct` would, the limit beside the
	// agent's write (TestVMDeployThroughputBIOS).
	fetchDirect bool
}

// deployVM is scenario (d): a direct deploy of an available node whose
// ramdisk is the VM. The agent writes c.image to the disk the root-device
// hint names by serial, Ironic has it power the VM off, and the host finds
// the image's bytes in that disk's file and nowhere else. It returns the
// powered-off machine, disks and NVRAM as the deploy left them.
func deployVM(t *testing.T, c deployCase) qemu.Machine {
	rd := ramdisk(t)
	if c.fetchDirect {
		// Built before the deploy's clock starts: on a loaded machine the
		// build alone takes minutes.
		bctx, bcancel := context.WithTimeout(t.Context(), 15*time.Minute)
		rd = fetchDirectRamdisk(t, bctx)
		bcancel()
	}
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	m := serviceMachine(t, rd, c.firmware, c.port, c.macs)
	if c.adjust != nil {
		c.adjust(&m)
	}
	// As Ironic boots a deploy ramdisk: no inspection callback.
	m.Append = agentArgs(c.port) + " ironic_agent.dhcp=" + c.macs[0]

	node, ops := availableForDeploy(t, ctx, s, c, &m)
	req := nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: c.configDrive}
	if c.fetchDirect {
		req.DeploySteps = []nodes.DeployStep{fetchDirectStep(t, ops)}
	}
	deploy := kernelLifecycle(t, ctx, s.ironic, node.UUID, m).To(req, 6*time.Minute)
	vm, took := deploy.VM, deploy.Took
	hb := "?"
	if l, ok := vm.Find(logtext.Msg(agent.EventHeartbeatSuccessful)); ok {
		hb = fmt.Sprintf("%.1fs", l.At.Seconds())
	}
	if c.firmware == "bios" && c.configDrive == nil && !c.fetchDirect {
		// The flow TestVMDeployFloor takes with the stand-in.
		reportSecondsLimit(t, took, deployFloor(), "deploy_s")
	} else {
		reportSeconds(t, took, "deploy_s")
	}
	reportFirstHeartbeat(t, c.firmware, hb, "deploy_first_heartbeat_s")
	reportAgentStarted(t, vm, c.firmware, "deploy_agent_started_uptime_s")
	if c.fetchDirect {
		reportThroughput(t, vm)
	}
	// Ironic ends the deploy by asking the agent to power off.
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var disk string
	for _, d := range m.Disks {
		if d.Serial == deployTarget {
			disk = m.DiskPath(d.ID)
		}
	}
	img := c.image
	got := readAt(t, disk, 0, len(img))
	for _, r := range c.same {
		if a, b := got[r[0]:r[1]], img[r[0]:r[1]]; !bytes.Equal(a, b) {
			n := 0
			for n < len(a) && a[n] == b[n] {
				n++
			}
			t.Errorf("%s does not hold the image: first difference at byte %d", disk, r[0]+n)
		}
	}
	// The bytes at unique, which a disk the image did not go to (zeros)
	// cannot hold.
	off := c.unique
	if off == 0 {
		off = len(img) - 1<<20 // mbrImage's random bytes
	}
	for _, d := range m.Disks {
		if d.Serial != deployTarget && bytes.Equal(readAt(t, m.DiskPath(d.ID), int64(off), 4096), img[off:off+4096]) {
			t.Errorf("the image also went to %s (%s)", d.ID, d.Serial)
		}
	}
	return m
}

// availableForDeploy enrolls c's node for m, makes it available without
// cleaning (these tests are about the deploy) and sets the deploy of
// c.image to the disk deployTarget names; ops are the node updates made.
func availableForDeploy(t *testing.T, ctx context.Context, s *suite, c deployCase, m *qemu.Machine) (*nodes.Node, nodes.UpdateOpts) {
	t.Helper()
	noClean := false
	node := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: "vm-deploy-" + c.firmware, AutomatedClean: &noClean, Properties: c.props}, c.macs[:]...)
	if c.management != "" {
		if err := nodes.Update(ctx, s.ironic.Service, node.UUID, nodes.UpdateOpts{
			nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: c.management},
		}).Err; err != nil {
			t.Fatal(err)
		}
	}
	kernelLifecycle(t, ctx, s.ironic, node.UUID, *m).Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, time.Minute)
	ops := append(serveImage(t, m, c.image),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": deployTarget}},
	)
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	return node, ops
}

// serveImage serves img for the guest of m and returns the node updates
// that deploy it. The image server doubles as the HTTP proxy the agent is
// told to use (driver_info image_http_proxy): Ironic checks the URL on
// 127.0.0.1 itself, and the guest reaches it through the proxy's
// guestfwd.
func serveImage(t *testing.T, m *qemu.Machine, img []byte) nodes.UpdateOpts {
	imgAddr := serve(t, imagePort, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/image.raw" {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(img))
	}))
	m.GuestFwd[guestHost+":80"] = imgAddr
	return append(imageInfo("http://"+imgAddr+"/image.raw", img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/image_http_proxy", Value: "http://" + guestHost + ":80"})
}

// imageInfo is the instance_info of a deploy of the raw whole-disk image
// img from url.
func imageInfo(url string, img []byte) nodes.UpdateOpts {
	sum := sha256.Sum256(img)
	md := md5.Sum(img)
	return imageInfoSums(url, "raw", md[:], sum[:])
}

// imageInfoSums is the instance_info of a deploy of the whole-disk image
// at url in format (raw, qcow2) with those MD5 and SHA-256 digests.
func imageInfoSums(url, format string, md5Sum, sha256Sum []byte) nodes.UpdateOpts {
	return nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: url},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_checksum", Value: hex.EncodeToString(md5Sum)},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_algo", Value: "sha256"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_value", Value: hex.EncodeToString(sha256Sum)},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_disk_format", Value: format},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/root_gb", Value: "0"},
	}
}

// mbrImage is a whole-disk image of random bytes behind an MBR with one
// partition: prepare_image fails a disk without a partition table after
// the write, as IPA's _validate_partitioning does.
func mbrImage() []byte {
	img := make([]byte, 3<<20+4096)
	r := rand.NewChaCha8([32]byte{'v', 'm'})
	_, _ = r.Read(img)
	copy(img, "ironic-agent VM deploy test image")
	clear(img[440:512])
	img[446+4] = 0x83
	binary.LittleEndian.PutUint32(img[446+8:], 2048)
	binary.LittleEndian.PutUint32(img[446+12:], 4096)
	img[510], img[511] = 0x55, 0xaa
	return img
}

// TestVMDeployBIOS is scenario (d) under SeaBIOS with an MBR image.
func TestVMDeployBIOS(t *testing.T) {
	seriesIndependent(t) // the Metal3 and fast-track flows deploy so on newer series
	img := mbrImage()
	deployVM(t, deployCase{
		firmware: "bios", macs: newMACs(t), port: newAgentPort(t),
		// boot_mode:bios as the VM boots: a whole-disk image then needs no
		// boot loader work from the agent.
		props: map[string]any{"capabilities": "boot_mode:bios"},
		// At the end of a BIOS deploy Ironic sets the boot device to disk,
		// which the fake management interface refuses; noop accepts it.
		management: "noop",
		image:      img, same: [][2]int{{0, len(img)}},
	})
}

// TestVMDeployThroughputBIOS is TestVMDeployBIOS with a 96 MiB image and,
// in the same VM before write_image, the fetch_direct step
// (internal/testbed/guest/fetchdirect, `curl | dd oflag=direct` in the
// ramdisk, which carries neither): the agent's write of the image from
// the image server to the disk (downloaded, verified and synced), beside
// the same bytes from the same server to the same disk with nothing but
// O_DIRECT writes.
func TestVMDeployThroughputBIOS(t *testing.T) {
	seriesIndependent(t) // the write is the agent's, whatever the series
	// Random bytes throughout: zeros would let a writer skip them.
	img := make([]byte, 96<<20)
	_, _ = rand.NewChaCha8([32]byte{'v', 'm', 't'}).Read(img)
	copy(img[:512], mbrImage())
	deployVM(t, deployCase{
		firmware: "bios", macs: newMACs(t), port: newAgentPort(t),
		props:      map[string]any{"capabilities": "boot_mode:bios"},
		management: "noop",
		image:      img, same: [][2]int{{0, len(img)}},
		// Within the smallest disk: the check reads it on every disk.
		unique:      2 << 20,
		fetchDirect: true,
	})
}

// TestVMDeployUEFI is scenario (d) under OVMF with internal/testbed/osimage's GPT
// whole-disk image (GRUB in an EFI system partition at a distribution
// path named by a BOOTX64.CSV, and at the removable-media path) and a
// config drive as Metal3 and Nova send it (meta_data and user_data;
// Ironic builds the ISO). Ironic 21.4 calls install_bootloader for a UEFI
// whole-disk deploy, and the agent writes a Boot#### entry from the CSV
// through efivarfs, first in BootOrder. With vendor lenovo (the Ironic test bed's
// default) Ironic then skips set_boot_device, which the fake management
// interface would refuse. Then the same VM, with the same OVMF variable
// store, boots from its disks (fake power: the test powers it on, where
// TestVMOSBootUEFI has Ironic do it over IPMI): OVMF loads the agent's
// entry "osimage", GRUB boots the OS, and the OS prints the config
// drive's hostname and user-data. Unlike TestVMOSBootUEFI this runs with
// every Ironic series.
func TestVMDeployUEFI(t *testing.T) {
	needQEMU(t)
	_, img := osImageUEFI(t, t.Context())
	const hostname, userData = "vm-deploy-uefi.example.org", "#cloud-config\nhostname: vm-deploy-uefi\n"
	const esp = 2048 * 512
	m := deployVM(t, deployCase{
		firmware: "uefi", macs: newMACs(t), port: newAgentPort(t),
		image: img,
		// OVMF (Debian's edk2 2022.11) sees a virtio-scsi disk only at
		// target 0, LUN 0: at 4:2 (or 4:0, 0:2) it lists no boot option for
		// it and cannot find the ESP. A server's boot disk is at 0:0 too.
		adjust: func(m *qemu.Machine) {
			for i := range m.Disks {
				if m.Disks[i].Serial == deployTarget {
					m.Disks[i].SCSITarget, m.Disks[i].SCSILun = 0, 0
				}
			}
		},
		// The agent moves the GPT backup header to the end of the disk
		// (IPA's fix_gpt_partition) and adds the config drive's partition,
		// which rewrites the protective MBR entry (bytes 446-461), the
		// primary GPT header and its partition entries (LBA 1-33); the
		// image's own backup GPT (its last 33 sectors) is no longer one.
		same:        [][2]int{{0, 446}, {462, 512}, {34 * 512, len(img) - 33*512}},
		unique:      esp, // the ESP's boot sector
		configDrive: nodes.ConfigDrive{MetaData: map[string]any{"uuid": "vm-deploy-uefi", "hostname": hostname}, UserData: userData},
	})

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	m.Kernel, m.Initrd, m.Append = "", "", ""
	start := time.Now()
	vm := boot(t, ctx, m, qemu.Options{})
	// OVMF says which boot option it tries first ("loading" or "failed to
	// load"); it must be the agent's entry, and the OS must boot from it.
	first, err := vm.WaitFor(ctx, "BdsDxe: ")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`BdsDxe: loading Boot[0-9A-F]{4} "` + osimage.EFILabel + `" from HD\(1,GPT,[0-9A-F-]{36},0x800,0x4000\)/\\EFI\\osimage\\grubx64\.efi$`)
	if !want.MatchString(first.Text) {
		t.Fatalf("OVMF's first boot option is not the agent's entry: %q, want a line matching %s", first.Text, want)
	}
	r, err := osimage.WaitReport(ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	if r.Hostname != hostname || r.UserData != userData {
		t.Errorf("the deployed OS read hostname %q and user-data %q from the config drive; want %q and %q", r.Hostname, r.UserData, hostname, userData)
	}
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	booted, _ := vm.Find(osimage.Booted)
	t.Logf("boot from the deployed disk: %s; config drive %s", first.Text[strings.Index(first.Text, "BdsDxe"):], r.Drive)
	reportSeconds(t, booted.At, "os_init_s")
	reportSeconds(t, time.Since(start), "os_boot_to_poweroff_s")
}
