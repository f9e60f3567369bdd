package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/bootloader"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage/grubimage"
	"github.com/ironic-go/ironic-agent/inventory"
	"golang.org/x/sys/unix"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

// buildGrubRoot makes the partition image's root tree (grubimage.Tree).
func buildGrubRoot(t *testing.T) string {
	t.Helper()
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES)", m)
	}
	root := t.TempDir()
	if err := grubimage.Tree(t.Context(), root); err != nil {
		t.Fatal(err)
	}
	return root
}

// grubImage makes the ext4 partition image from the tree.
func grubImage(t *testing.T, root string, size int64) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "root.img")
	if err := grubimage.Ext4(t.Context(), root, p, size); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// debugfsCat reads a file from an ext4 filesystem without mounting it.
func debugfsCat(t *testing.T, dev, path string) string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "cat "+path, dev).Output()
	if err != nil {
		t.Fatalf("debugfs cat %s on %s: %v", path, dev, err)
	}
	return string(out)
}

func blkidValue(t *testing.T, dev, tag string) string {
	t.Helper()
	out, _ := exec.Command("blkid", "-p", "-s", tag, "-o", "value", dev).Output()
	return strings.TrimSpace(string(out))
}

// noLeftoverMounts fails when a mount the installer made below dir (the
// test's TMPDIR) is still there.
func noLeftoverMounts(t *testing.T, dir string) {
	t.Helper()
	b, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(b), filepath.Join(dir, "ironic-agent-root-")) {
		t.Errorf("mounts left behind:\n%s", b)
	}
}

// grubCase is one partition image deploy with GRUB.
type grubCase struct {
	label    string // disk_label capability (BIOS)
	bootMode string // deploy_boot_mode
	rootPart int    // partition number of root
}

// deployAndInstallGrub deploys a partition image through the write_image
// deploy step and installs its GRUB through install_bootloader as Ironic
// 21.4 calls them; it returns the root partition, its UUID and what
// get_partition_uuids said.
func deployAndInstallGrub(t *testing.T, dev, url string, sum [32]byte, c grubCase) (string, string, map[string]any) {
	t.Helper()
	ra, rootPart, rootUUID, uuids := deployPartitionImage(t, dev, url, sum, c)
	res := installBootloader(t, ra, rootUUID, uuids["efi system partition uuid"], c.bootMode, nil)
	if res.Status != "SUCCEEDED" {
		t.Fatalf("install_bootloader %s: %s\n%s", res.Status, res.Error, ra.log.String())
	}
	return rootPart, rootUUID, uuids
}

// installBootloader sends image.install_bootloader as prepare_instance_boot
// does and waits for it; no mount the installer made may be left.
func installBootloader(t *testing.T, ra *runningAgent, rootUUID string, efi any, bootMode string, ignore any) agentclient.Reply {
	t.Helper()
	params := map[string]any{"root_uuid": rootUUID, "efi_system_part_uuid": efi, "prep_boot_part_uuid": nil, "target_boot_mode": bootMode}
	if ignore != nil {
		params["ignore_bootloader_failure"] = ignore
	}
	body, _ := json.Marshal(map[string]any{"name": "image.install_bootloader", "params": params})
	ironicPost(t, ra, string(body), false)
	res := pollLastFor(t, ra, "install_bootloader", 3*time.Minute)
	noLeftoverMounts(t, os.Getenv("TMPDIR"))
	return res
}

// deployPartitionImage runs the write_image deploy step for a partition
// image on dev and checks the result Ironic reads.
func deployPartitionImage(t *testing.T, dev, url string, sum [32]byte, c grubCase) (*runningAgent, string, string, map[string]any) {
	t.Helper()
	// The installer mounts the root partition below TMPDIR: the test's
	// own, so leftovers of this test are told from other processes'.
	t.Setenv("TMPDIR", t.TempDir())
	inv := func(ctx context.Context) (*inventory.Inventory, error) {
		i, err := testInventory(ctx)
		i.CPU.Architecture = "x86_64"
		return i, err
	}
	ra := standalone(t, Options{Hooks: Hooks{Inventory: inv}}, map[string]string{"allowed_devices": dev, "enable_bios_bootloader_install": "true"})
	id := "grub-img-" + c.bootMode + "-" + c.label
	node := map[string]any{"uuid": "n1",
		"properties":    map[string]any{"root_device": map[string]any{"name": dev}, "capabilities": "disk_label:" + c.label},
		"instance_info": map[string]any{"deploy_boot_mode": c.bootMode}}
	imageInfo := map[string]any{
		"id": id, "urls": []string{url}, "disk_format": "raw", "container_format": "bare",
		"stream_raw_images": true, "os_hash_algo": "sha256", "os_hash_value": hex.EncodeToString(sum[:]),
		"node_uuid": "n1", "image_type": "partition", "root_mb": 128, "swap_mb": 16, "ephemeral_mb": 0,
		"ephemeral_format": nil, "preserve_ephemeral": false, "deploy_boot_mode": c.bootMode, "boot_option": "local",
	}
	body, _ := json.Marshal(map[string]any{"name": "deploy.execute_deploy_step", "params": map[string]any{
		"step":           map[string]any{"interface": "deploy", "step": "write_image", "args": map[string]any{"image_info": imageInfo, "configdrive": nil}},
		"node":           node,
		"ports":          []any{},
		"deploy_version": map[string]any{"generic_hardware_manager": GenericManagerVersion},
	}})
	ironicPost(t, ra, string(body), false)
	res := pollLast(t, ra, "execute_deploy_step")
	if res.Status != "SUCCEEDED" {
		t.Fatalf("write_image %s: %s", res.Status, res.Error)
	}
	rootPart := fmt.Sprintf("%sp%d", dev, c.rootPart)
	rootUUID := blkidValue(t, rootPart, "UUID")
	_, r := call(t, ra, "standby.get_partition_uuids", map[string]any{})
	uuids, _ := r["command_result"].(map[string]any)
	want := fmt.Sprintf(`{"deploy_result":{"result":"prepare_image: image (%s) written to device %s root_uuid=%s"`, id, dev, rootUUID)
	if c.bootMode == "uefi" {
		want = fmt.Sprintf(`{"deploy_result":{"result":"prepare_image: image (%s) written to device %s root_uuid=%s efi_system_partition_uuid=%s"}`,
			id, dev, rootUUID, blkidValue(t, dev+"p1", "UUID"))
	}
	if rootUUID == "" || !strings.HasPrefix(string(res.Result), want) {
		t.Errorf("command_result %s\nwant prefix %s", res.Result, want)
	}
	if uuids["root uuid"] != rootUUID {
		t.Errorf("get_partition_uuids %v (root %s)", uuids, rootUUID)
	}
	return ra, rootPart, rootUUID, uuids
}

func needGrubTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range append([]string{"mkfs.ext4", "mkswap", "blkid", "debugfs"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES): %v", tool, err)
		}
	}
}

// TestPartitionImageGrubBIOSOnLoop: BIOS with an msdos and a GPT label: the
// boot code lands in the MBR, core.img after it (msdos) or in the BIOS boot
// partition (GPT), grub.cfg in the root filesystem naming its UUID.
func TestPartitionImageGrubBIOSOnLoop(t *testing.T) {
	needGrubTools(t)
	dev := looptest.Attach(t, 512<<20, "--partscan")
	img := grubImage(t, buildGrubRoot(t), 96<<20)
	sum := sha256.Sum256(img)
	url := imageServerForTest(t, img)
	for _, c := range []grubCase{{"msdos", "bios", 2}, {"gpt", "bios", 3}} {
		t.Run(c.label, func(t *testing.T) {
			ra, rootPart, rootUUID, uuids := deployPartitionImage(t, dev, url, sum, c)
			if res := installBootloader(t, ra, rootUUID, nil, c.bootMode, nil); res.Status != "SUCCEEDED" {
				t.Fatalf("install_bootloader %s: %s\n%s", res.Status, res.Error, ra.log.String())
			}
			// Asked again, a BIOS ramdisk finds the msdos boot flag and
			// GRUB's boot code and skips, as IPA's _is_bootloader_loaded.
			if res := installBootloader(t, ra, rootUUID, nil, c.bootMode, nil); res.Status != "SUCCEEDED" {
				t.Fatalf("second install_bootloader %s: %s", res.Status, res.Error)
			}
			if skipped := strings.Contains(ra.log.String(), "already marked bootable"); skipped != (c.label == "msdos") {
				t.Errorf("%s: second install_bootloader skipped=%t", c.label, skipped)
			}
			parts, _ := uuids["partitions"].(map[string]any)
			if parts["root"] != rootPart || parts["swap"] == nil || uuids["efi system partition uuid"] != nil ||
				(c.label == "gpt" && parts["BIOS Boot partition"] != dev+"p1") {
				t.Errorf("get_partition_uuids %v", uuids)
			}
			head := looptest.ReadAt(t, dev, 0, 1<<20)
			// GRUB's boot.img: a jump, then "GRUB " in its messages.
			if head[0] != 0xeb || !bytes.Contains(head[:440], []byte("GRUB")) || head[510] != 0x55 {
				t.Errorf("no GRUB boot code in the MBR: % x", head[:16])
			}
			if c.label == "msdos" {
				// core.img embedded in the gap after the MBR.
				if bytes.Equal(head[512:1024], make([]byte, 512)) {
					t.Error("no core.img after the MBR")
				}
			} else if bytes.Equal(looptest.ReadAt(t, dev+"p1", 0, 512), make([]byte, 512)) {
				t.Error("no core.img in the BIOS boot partition")
			}
			cfg := debugfsCat(t, rootPart, "/boot/grub/grub.cfg")
			if !strings.Contains(cfg, rootUUID) || !strings.Contains(cfg, "vmlinuz-"+grubimage.KernelVersion) {
				t.Errorf("grub.cfg does not boot the root filesystem %s:\n%s", rootUUID, cfg)
			}
			if mod := debugfsCat(t, rootPart, "/boot/grub/i386-pc/normal.mod"); len(mod) == 0 {
				t.Error("no GRUB modules in /boot/grub/i386-pc")
			}
		})
	}
}

// TestPartitionImageGrubUEFIOnLoop: UEFI: GRUB lands on the ESP at the
// removable-media path (EFI/BOOT/BOOTX64.EFI), grub.cfg in the root
// filesystem, and the image's fstab mounts the ESP. The installer mounts
// the ESP with the kernel's vfat driver, which this project's CI kernel
// lacks: the test then says so and skips.
func TestPartitionImageGrubUEFIOnLoop(t *testing.T) {
	needGrubTools(t, "mdir", "mtype")
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !bytes.Contains(b, []byte("\tvfat\n")) {
		t.Skip("SKIPPED: this kernel cannot mount vfat (not in /proc/filesystems), so the EFI system partition cannot be mounted for grub-install")
	}
	if _, err := os.Stat("/usr/lib/grub/x86_64-efi"); err != nil {
		t.Skip("SKIPPED: needs grub-efi-amd64-bin (test.sh APT_PACKAGES)")
	}
	dev := looptest.Attach(t, 1<<30, "--partscan")
	img := grubImage(t, buildGrubRoot(t), 96<<20)
	sum := sha256.Sum256(img)
	rootPart, rootUUID, uuids := deployAndInstallGrub(t, dev, imageServerForTest(t, img), sum, grubCase{"gpt", "uefi", 3})
	esp := dev + "p1"
	espUUID := blkidValue(t, esp, "UUID")
	if uuids["efi system partition uuid"] != espUUID || espUUID == "" {
		t.Errorf("get_partition_uuids %v, ESP UUID %s", uuids, espUUID)
	}
	out, err := exec.Command("mdir", "-i", esp, "::/EFI/BOOT").CombinedOutput()
	if err != nil || !strings.Contains(strings.ToUpper(string(out)), "BOOTX64") {
		t.Errorf("no EFI/BOOT/BOOTX64.EFI on the ESP: %v\n%s", err, out)
	}
	cfg := debugfsCat(t, rootPart, "/boot/grub/grub.cfg")
	if !strings.Contains(cfg, rootUUID) {
		t.Errorf("grub.cfg does not name the root filesystem %s:\n%s", rootUUID, cfg)
	}
	if fstab := debugfsCat(t, rootPart, "/etc/fstab"); !strings.Contains(fstab, "UUID="+espUUID+"\t/boot/efi\tvfat\tumask=0077\t0\t1") {
		t.Errorf("fstab does not mount the ESP:\n%s", fstab)
	}
}

// TestPartitionImageGrubFailure: the image's grub-install fails: the
// command is FAILED with the command line, exit status and stderr, every
// mount is undone; with ignore_bootloader_failure it succeeds; an unknown
// root UUID is DeviceNotFound.
func TestPartitionImageGrubFailure(t *testing.T) {
	needGrubTools(t)
	dev := looptest.Attach(t, 256<<20, "--partscan")
	tree := buildGrubRoot(t)
	os.WriteFile(filepath.Join(tree, "usr/sbin/grub-install"), []byte("#!/bin/sh\necho \"grub-install: error: disk full of eels.\" >&2\nexit 3\n"), 0o755)
	img := grubImage(t, tree, 96<<20)
	sum := sha256.Sum256(img)
	ra, _, rootUUID, _ := deployPartitionImage(t, dev, imageServerForTest(t, img), sum, grubCase{"msdos", "bios", 2})
	res := installBootloader(t, ra, rootUUID, nil, "bios", nil)
	e := string(res.Error)
	if res.Status != "FAILED" || !strings.Contains(e, `"type":"CommandExecutionError"`) ||
		!strings.Contains(e, "grub-install --target=i386-pc "+dev+`\" failed (exit status 3): grub-install: error: disk full of eels.`) {
		t.Errorf("failed grub-install: %s %s", res.Status, e)
	}
	if res = installBootloader(t, ra, rootUUID, nil, "bios", true); res.Status != "SUCCEEDED" {
		t.Errorf("ignore_bootloader_failure: %s %s", res.Status, res.Error)
	}
	res = installBootloader(t, ra, "0badc0de-0000-4000-8000-000000000000", nil, "bios", nil)
	if res.Status != "FAILED" || !strings.Contains(string(res.Error), `"type":"DeviceNotFound"`) ||
		!strings.Contains(string(res.Error), "no partition with UUID 0badc0de-0000-4000-8000-000000000000 found on device "+dev) {
		t.Errorf("unknown root UUID: %s %s", res.Status, res.Error)
	}
}

// TestGrubUEFIInstallerSteps drives the UEFI branch of the installer on a
// kernel without vfat: the ESP "mount" is a bind mount of a directory (the
// one fake, at the mount(2) boundary) and the image's grub-install is a
// script that records its arguments and, like the real one without EFI
// variables, fails the NVRAM install and succeeds with --removable. The
// real grub-mkconfig runs. Checked: both grub-install calls with IPA's
// arguments inside the chroot with the ESP at /boot/efi, the file on the
// ESP, grub.cfg, the fstab line, and every mount undone. As in IPA's
// _install_grub2, no NVRAM entry is made after grub-install (an image
// without /boot/efi/EFI boots from the removable-media path, Debian's
// signed shim there when the image has shim-signed).
func TestGrubUEFIInstallerSteps(t *testing.T) {
	needGrubTools(t, "mkfs.vfat")
	dev, rootPart, rootUUID, espUUID, gi, espDir := uefiInstallerFixture(t, nil)
	gi.EFIBootSetup = func(context.Context) (bool, error) {
		t.Error("NVRAM entries were set up for an image without EFI assets")
		return false, nil
	}
	err := gi.Install(t.Context(), bootloader.GrubRequest{Disk: dev, RootUUID: rootUUID, EFIUUID: espUUID, TargetBootMode: "uefi", CPUArch: "x86_64"})
	noLeftoverMounts(t, gi.TempDir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(espDir, "EFI/BOOT/BOOTX64.EFI")); err != nil || string(b) != "grub\n" {
		t.Errorf("ESP file: %q %v", b, err)
	}
	if got, want := debugfsCat(t, rootPart, "/boot/grub-install.log"),
		"/usr/sbin/grub-install --target=x86_64-efi --efi-directory=/boot/efi\n/usr/sbin/grub-install --target=x86_64-efi --efi-directory=/boot/efi --removable\n"; got != want {
		t.Errorf("grub-install calls:\n%s\nwant\n%s", got, want)
	}
	if cfg := debugfsCat(t, rootPart, "/boot/grub/grub.cfg"); !strings.Contains(cfg, rootUUID) {
		t.Errorf("grub.cfg does not name %s:\n%s", rootUUID, cfg)
	}
	if fstab := debugfsCat(t, rootPart, "/etc/fstab"); !strings.Contains(fstab, "UUID="+espUUID+"\t/boot/efi\tvfat\tumask=0077\t0\t1\n") {
		t.Errorf("fstab:\n%s", fstab)
	}
}

// TestGrubUEFIPreservesEFIAssets: an image carrying /boot/efi/EFI (signed
// shim and GRUB) gets those files copied onto the ESP with its
// /boot/grub2/grub.cfg, and when NVRAM entries can be made no grub-install
// runs (IPA's _try_preserve_efi_assets); when they cannot, grub-install
// runs as for any image.
func TestGrubUEFIPreservesEFIAssets(t *testing.T) {
	needGrubTools(t, "mkfs.vfat")
	addAssets := func(tree string) {
		os.MkdirAll(filepath.Join(tree, "boot/efi/EFI/testos"), 0o755)
		os.WriteFile(filepath.Join(tree, "boot/efi/EFI/testos/shimx64.efi"), []byte("signed shim"), 0o755)
		os.WriteFile(filepath.Join(tree, "boot/efi/EFI/testos/grubx64.efi"), []byte("signed grub"), 0o755)
		os.MkdirAll(filepath.Join(tree, "boot/grub2"), 0o755)
		os.WriteFile(filepath.Join(tree, "boot/grub2/grub.cfg"), []byte("# the image's grub.cfg\n"), 0o644)
	}
	for _, nvram := range []bool{true, false} {
		t.Run(fmt.Sprintf("nvram=%t", nvram), func(t *testing.T) {
			dev, rootPart, rootUUID, espUUID, gi, espDir := uefiInstallerFixture(t, addAssets)
			calls := 0
			gi.EFIBootSetup = func(context.Context) (bool, error) {
				calls++
				// The assets are on the ESP (and it is unmounted) by now.
				if _, err := os.Stat(filepath.Join(espDir, "EFI/testos/shimx64.efi")); err != nil {
					t.Errorf("NVRAM set-up before the assets reached the ESP: %v", err)
				}
				return nvram, nil
			}
			err := gi.Install(t.Context(), bootloader.GrubRequest{Disk: dev, RootUUID: rootUUID, EFIUUID: espUUID, TargetBootMode: "uefi", CPUArch: "x86_64"})
			noLeftoverMounts(t, gi.TempDir)
			if err != nil {
				t.Fatal(err)
			}
			if calls != 1 {
				t.Errorf("efiBootSetup called %d times", calls)
			}
			for f, want := range map[string]string{"EFI/testos/shimx64.efi": "signed shim", "EFI/testos/grubx64.efi": "signed grub", "EFI/testos/grub.cfg": "# the image's grub.cfg\n"} {
				if b, err := os.ReadFile(filepath.Join(espDir, f)); err != nil || string(b) != want {
					t.Errorf("ESP %s: %q %v", f, b, err)
				}
			}
			out, _ := exec.Command("debugfs", "-R", "cat /boot/grub-install.log", rootPart).Output()
			if ran := strings.Contains(string(out), "grub-install"); ran == nvram {
				t.Errorf("nvram=%t: grub-install calls %q", nvram, out)
			}
			if cfg := debugfsCat(t, rootPart, "/boot/grub/grub.cfg"); !strings.Contains(cfg, rootUUID) {
				t.Errorf("grub.cfg does not name %s", rootUUID)
			}
			if fstab := debugfsCat(t, rootPart, "/etc/fstab"); strings.Count(fstab, "UUID="+espUUID+"\t/boot/efi") != 1 {
				t.Errorf("fstab:\n%s", fstab)
			}
		})
	}
}

// uefiInstallerFixture deploys a UEFI partition image whose grub-install
// is a script recording its calls (failing without --removable, as the
// real one does without EFI variables), then returns an installer whose
// ESP "mount" binds a directory.
func uefiInstallerFixture(t *testing.T, edit func(tree string)) (dev, rootPart, rootUUID, espUUID string, gi *bootloader.Grub, espDir string) {
	t.Helper()
	dev = looptest.Attach(t, 1<<30, "--partscan")
	tree := buildGrubRoot(t)
	script := `#!/bin/sh
echo "$0 $*" >> /boot/grub-install.log
case "$*" in
*--removable*) mkdir -p /boot/efi/EFI/BOOT && echo grub > /boot/efi/EFI/BOOT/BOOTX64.EFI ;;
*) echo "grub-install: error: EFI variables are not supported on this system." >&2; exit 1 ;;
esac
`
	os.WriteFile(filepath.Join(tree, "usr/sbin/grub-install"), []byte(script), 0o755)
	if edit != nil {
		edit(tree)
	}
	img := grubImage(t, tree, 96<<20)
	ra, rootPart, rootUUID, uuids := deployPartitionImage(t, dev, imageServerForTest(t, img), sha256.Sum256(img), grubCase{"gpt", "uefi", 3})
	espUUID, _ = uuids["efi system partition uuid"].(string)
	if espUUID == "" {
		t.Fatalf("no ESP UUID: %v", uuids)
	}
	espDir = t.TempDir()
	gi = bootloader.NewGrub(ra.agent.log)
	gi.TempDir = t.TempDir()
	gi.Mount = func(source, target, fstype string, flags uintptr, data string) error {
		if fstype == "vfat" {
			if source != dev+"p1" {
				return fmt.Errorf("ESP mount of %s, want %sp1", source, dev)
			}
			return unix.Mount(espDir, target, "", unix.MS_BIND, "")
		}
		return unix.Mount(source, target, fstype, flags, data)
	}
	return dev, rootPart, rootUUID, espUUID, gi, espDir
}
