package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage/grubimage"
)

// TestDeployPartitionImage is a direct deploy of a partition image with
// Debian's Ironic 21.4: instance_info image_type=partition, root_gb 1,
// swap_mb 64, BIOS boot mode, a config drive in the deploy request. Ironic sends write_image with the partition
// fields, reads get_partition_uuids, and calls install_bootloader with the
// root UUID; the agent lays out the disk, streams the ext4 root filesystem
// into its partition and runs the image's own grub-install and
// grub-mkconfig (Debian's 21.4.4 sends enable_bios_bootloader_install in
// the lookup config). The node reaches active; the disk then holds an msdos
// label with swap and root (boot flag), the image in root, GRUB in the MBR
// and a grub.cfg naming the root filesystem's UUID, which Ironic recorded;
// the config drive has its own partition before root.
//
// The node uses the noop management interface: in BIOS mode Ironic ends
// with set_boot_device(disk), which fake management refuses.
func TestDeployPartitionImage(t *testing.T) {
	s := need(t)
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES)", m)
	}
	for _, tool := range []string{"blkid", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: needs %s: %v", tool, err)
		}
	}
	ctx := t.Context()
	tree, imgDir := t.TempDir(), t.TempDir()
	if err := grubimage.Tree(ctx, tree); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(imgDir, "root.img")
	if err := grubimage.Ext4(ctx, tree, raw, 96<<20); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(imgDir)))
	t.Cleanup(srv.Close)
	dev := deployDisk(t)
	const mac = "52:54:e2:d0:00:05"
	start := time.Now()
	n := s.partitionNode(t, "e2e-deploy-partition", mac, dev, srv.URL+"/root.img", raw, map[string]any{"swap_mb": 64})
	iso := configDriveISO(t)
	got, a := s.deployActive(t, n.UUID, mac, dev, nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: gzipBase64(t, iso)})
	t.Logf("partition image deploy: %s from enrolment to active", time.Since(start).Round(time.Millisecond))

	// IPA's order: swap, config drive, root last.
	swap, cd, root := dev+"p1", dev+"p2", dev+"p3"
	if blkid(t, cd, "LABEL") != "config-2" || blkid(t, cd, "TYPE") != "iso9660" {
		t.Errorf("%s is not the config drive", cd)
	}
	if got, _ := readStart(t, cd, len(iso)); !bytes.Equal(got, iso) {
		t.Errorf("%s does not hold the config drive ISO", cd)
	}
	rootUUID := blkid(t, root, "UUID")
	if got.DriverInternalInfo["root_uuid_or_disk_id"] != rootUUID || rootUUID == "" {
		t.Errorf("Ironic recorded root_uuid_or_disk_id %v, the root filesystem is %q", got.DriverInternalInfo["root_uuid_or_disk_id"], rootUUID)
	}
	if blkid(t, swap, "TYPE") != "swap" || blkid(t, swap, "LABEL") != "swap1" {
		t.Errorf("%s is not the swap partition", swap)
	}
	if blkid(t, root, "LABEL") != "img-root" {
		t.Errorf("%s does not hold the image's filesystem", root)
	}
	want, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	part, size := readStart(t, root, 4096)
	if size != 1<<30 {
		t.Errorf("root partition is %d bytes, want root_gb 1", size)
	}
	// grub-install and grub-mkconfig wrote into the filesystem, so only the
	// superblock's UUID is compared with the image.
	head, _ := readStart(t, dev, 512)
	if head[446] != 0 || head[446+4] != 0x82 || head[446+16+4] != 0x83 || head[446+32] != 0x80 || head[446+32+4] != 0x83 {
		t.Errorf("MBR entries: swap % x, config drive % x, root % x", head[446:462], head[462:478], head[478:494])
	}
	if head[0] != 0xeb || !bytes.Contains(head[:440], []byte("GRUB")) {
		t.Errorf("no GRUB boot code in the MBR: % x", head[:16])
	}
	if !bytes.Equal(part[1024+0x68:1024+0x78], want[1024+0x68:1024+0x78]) {
		t.Error("the root partition's filesystem is not the image's")
	}
	cfg, err := exec.Command("debugfs", "-R", "cat /boot/grub/grub.cfg", root).Output()
	if err != nil || !strings.Contains(string(cfg), rootUUID) || !strings.Contains(string(cfg), "vmlinuz-"+grubimage.KernelVersion) {
		t.Errorf("grub.cfg (%v) does not boot %s:\n%s", err, rootUUID, cfg)
	}
	log, _ := os.ReadFile(a.logPath)
	for _, want := range []string{"grub-install --target=i386-pc " + dev, "grub-mkconfig -o /boot/grub/grub.cfg", "GRUB2 successfully installed"} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("agent log lacks %q", want)
		}
	}
}

// partitionNode enrolls an available BIOS node (noop management: in BIOS
// mode Ironic ends with set_boot_device(disk), which fake management
// refuses) to deploy the partition image raw, served at url, onto dev
// with root_gb 1 and the instance_info fields of extra.
func (s *suite) partitionNode(t *testing.T, name, mac, dev, url, raw string, extra map[string]any) *nodes.Node {
	t.Helper()
	ctx := t.Context()
	md5sum, sha := fileSums(t, raw)
	info := map[string]any{
		"image_source":        url,
		"image_checksum":      md5sum,
		"image_os_hash_algo":  "sha256",
		"image_os_hash_value": sha,
		"image_disk_format":   "raw",
		"image_type":          "partition",
		"root_gb":             1,
	}
	for k, v := range extra {
		info[k] = v
	}
	no := false
	n := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: name,
		AutomatedClean: &no,
		Properties: map[string]any{
			"root_device":  map[string]any{"name": dev},
			"capabilities": "boot_mode:bios,disk_label:msdos",
		},
		InstanceInfo: info,
	}, mac)
	if err := nodes.Update(ctx, s.ironic.Service, n.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"},
	}).Err; err != nil {
		t.Fatal(err)
	}
	s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac}).Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, 30*time.Second)
	return n
}

// deployActive asks Ironic for opts, through the lifecycle driver whose
// agent is confined to dev, and returns the node once active, and the
// agent (its log is in the failure otherwise: startAgent's cleanup).
func (s *suite) deployActive(t *testing.T, node, mac, dev string, opts nodes.ProvisionStateOpts) (*nodes.Node, *agentProc) {
	t.Helper()
	st := s.driver(t, s.ironic, node, agentOpts{MAC: mac, Devices: []string{dev}}).To(opts, stepTimeout)
	return st.Node, st.Ramdisk
}

// blkid reads one tag of dev with blkid's low-level probe.
func blkid(t *testing.T, dev, tag string) string {
	t.Helper()
	out, _ := exec.Command("blkid", "-p", "-s", tag, "-o", "value", dev).Output()
	return strings.TrimSpace(string(out))
}

// readStart returns the first n bytes of dev and its size.
func readStart(t *testing.T, dev string, n int) ([]byte, int64) {
	t.Helper()
	return looptest.ReadAt(t, dev, 0, n), looptest.Size(t, dev)
}

// configDriveISO builds an ISO9660 image labelled config-2 with xorriso.
func configDriveISO(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	md := filepath.Join(dir, "tree", "openstack", "latest")
	if err := os.MkdirAll(md, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(md, "meta_data.json"), []byte(`{"uuid": "e2e-partition", "hostname": "e2e-partition"}`), 0o644)
	out := filepath.Join(dir, "cd.iso")
	run(t, "xorriso", "-as", "mkisofs", "-quiet", "-R", "-J", "-V", "config-2", "-o", out, filepath.Join(dir, "tree"))
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipBase64(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestDeployPartitionImageFlavors deploys, as TestDeployPartitionImage,
// partition images laid out as other distributions lay theirs out, with
// inject_files as a deploy step (priority 50: after write_image and
// install_bootloader, while the agent still runs):
//   - rhel: an XFS root with grub2-install, grub2-mkconfig and /boot/grub2;
//   - suse: a btrfs root in the default subvolume @/.snapshots/1/snapshot,
//     with other subvolumes beside it, and the same grub2-* names.
//
// The agent mounts each root (the default subvolume on btrfs), runs the
// image's grub2-install for BIOS and grub2-mkconfig, and writes one file
// found by path (the partition holding /etc) and one on the partition
// named LABEL=img-root. The root is then mounted read-only here: the menu
// names the root's UUID and kernel (through the subvolume on btrfs) and
// the injected files hold their content.
func TestDeployPartitionImageFlavors(t *testing.T) {
	s := need(t)
	// Ironic's side is TestDeployPartitionImage's; the flavors differ only
	// in what the agent does with the image's root.
	s.seriesIndependent(t)
	for i, f := range []grubimage.Flavor{grubimage.RHEL(), grubimage.SUSE()} {
		t.Run(f.Name, func(t *testing.T) {
			if m := grubimage.MissingFor(f); m != "" {
				t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES)", m)
			}
			deployFlavor(t, s, f, fmt.Sprintf("52:54:e2:d0:00:%02x", 0x10+i))
		})
	}
}

func deployFlavor(t *testing.T, s *suite, f grubimage.Flavor, mac string) {
	ctx := t.Context()
	tree, imgDir := t.TempDir(), t.TempDir()
	start := time.Now()
	if err := grubimage.TreeFor(ctx, tree, f); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(imgDir, "root.img")
	// mkfs.xfs makes nothing smaller than 300 MiB.
	if err := grubimage.Make(ctx, f, tree, raw, 320<<20); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s image built in %s", f.Name, time.Since(start).Round(time.Millisecond))
	srv := httptest.NewServer(http.FileServer(http.Dir(imgDir)))
	t.Cleanup(srv.Close)
	dev := deployDisk(t)
	start = time.Now()
	n := s.partitionNode(t, "e2e-deploy-partition-"+f.Name, mac, dev, srv.URL+"/root.img", raw, nil)
	byPath, byLabel := "injected by path into "+f.Name+"\n", "injected by label into "+f.Name+"\n"
	steps := []nodes.DeployStep{{Interface: nodes.InterfaceDeploy, Step: "inject_files", Priority: 50, Args: map[string]any{
		"files": []map[string]any{
			{"path": "/etc/injected/by-path.txt", "content": base64.StdEncoding.EncodeToString([]byte(byPath))},
			{"path": "/root/by-label.txt", "partition": "LABEL=img-root", "content": base64.StdEncoding.EncodeToString([]byte(byLabel)), "mode": 0o600},
		}}}}
	got, a := s.deployActive(t, n.UUID, mac, dev, nodes.ProvisionStateOpts{Target: nodes.TargetActive, DeploySteps: steps})
	t.Logf("%s partition image deploy: %s from enrolment to active", f.Name, time.Since(start).Round(time.Millisecond))

	root := dev + "p1"
	rootUUID := blkid(t, root, "UUID")
	if got.DriverInternalInfo["root_uuid_or_disk_id"] != rootUUID || rootUUID == "" {
		t.Errorf("Ironic recorded root_uuid_or_disk_id %v, the root filesystem is %q", got.DriverInternalInfo["root_uuid_or_disk_id"], rootUUID)
	}
	if blkid(t, root, "TYPE") != f.FS || blkid(t, root, "LABEL") != "img-root" {
		t.Errorf("%s does not hold the image's %s filesystem", root, f.FS)
	}
	head, _ := readStart(t, dev, 512)
	if head[0] != 0xeb || !bytes.Contains(head[:440], []byte("GRUB")) {
		t.Errorf("no GRUB boot code in the MBR: % x", head[:16])
	}
	log, _ := os.ReadFile(a.logPath)
	for _, want := range []string{"grub2-install --target=i386-pc " + dev, "grub2-mkconfig -o /boot/grub2/grub.cfg", "GRUB2 successfully installed",
		"inject_files: file written"} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("agent log lacks %q", want)
		}
	}

	mnt := t.TempDir()
	run(t, "mount", "-o", "ro", root, mnt)
	t.Cleanup(func() { run(t, "umount", mnt) })
	cfg, err := os.ReadFile(filepath.Join(mnt, "boot/grub2/grub.cfg"))
	kernel := "/boot/vmlinuz-" + grubimage.KernelVersion
	if f.Subvolume != "" {
		// GRUB reads btrfs from the top of the file system.
		kernel = "/" + f.Subvolume + kernel
	}
	if err != nil || !strings.Contains(string(cfg), rootUUID) || !strings.Contains(string(cfg), "linux\t"+kernel) {
		t.Errorf("/boot/grub2/grub.cfg (%v) does not boot %s from %s:\n%s", err, kernel, rootUUID, cfg)
	}
	if _, err := os.Stat(filepath.Join(mnt, "boot/grub2/i386-pc/core.img")); err != nil {
		t.Errorf("grub2-install left no core image in /boot/grub2: %v", err)
	}
	for p, want := range map[string]string{"etc/injected/by-path.txt": byPath, "root/by-label.txt": byLabel} {
		if b, err := os.ReadFile(filepath.Join(mnt, p)); err != nil || string(b) != want {
			t.Errorf("/%s: %q (%v), want %q", p, b, err, want)
		}
	}
}
