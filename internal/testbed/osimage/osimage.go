// Package osimage builds, for VM tests, a small real operating system to
// deploy: the agent ramdisk's own kernel and an initramfs whose /init is
// the static Go program in internal/testbed/guest/osimage. Booted from a disk, the guest prints
// Booted, finds the config drive Ironic passed (a partition or disk whose
// ISO 9660 or FAT file system is labelled config-2), prints the hostname
// of its meta_data.json and its user_data, and powers the machine off.
//
// The images around that OS (disk.go): whole-disk images with GRUB for
// BIOS (MBR) and UEFI (GPT and an EFI system partition), raw or qcow2,
// and a partition image whose root file system installs GRUB itself
// (internal/testbed/osimage/grubimage). They are built in the caller's directory without
// root or loop devices: mkfs.ext4 -d, our own MBR and sgdisk on plain files,
// grub-mkimage, the agent's FAT writer and mtools.
package osimage

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// The guest's console lines (internal/testbed/guest/osimage prints them; keep both equal).
const (
	// Booted starts the first line /init prints.
	Booted = "osimage: the deployed OS booted"
	// DriveLine is followed by the config drive's device and type.
	DriveLine = "osimage: config drive "
	// HostnameLine and UserDataLine are followed by the Go-quoted
	// hostname and user_data ("(none)" without user_data).
	HostnameLine = "osimage: hostname "
	UserDataLine = "osimage: user-data "
	// FailedLine is followed by why the guest could not read the drive.
	FailedLine = "osimage: failed: "
	// PoweringOff is the guest's last line.
	PoweringOff = "osimage: powering off"
	// SecureBootLine is followed by what the firmware's SecureBoot
	// variable says ("enabled", "disabled", "no UEFI") and the kernel's
	// lockdown mode: "enabled, lockdown integrity".
	SecureBootLine = "osimage: secure boot "
	// LoaderLine is what the GRUB menu entry prints before the kernel.
	LoaderLine = "osimage: GRUB loads the kernel"
)

// modules are the drivers the guest loads (with their dependencies): the
// disks of qemu's machines, the config drive's file systems with the
// character sets FAT mounts with by default, and efivarfs for the
// SecureBoot variable.
func modules() []string {
	return []string{"virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "ahci", "nvme",
		"isofs", "vfat", "nls_cp437", "nls_utf8", "nls_ascii", "nls_iso8859_1", "efivarfs"}
}

// KernelArgs is the kernel command line the images' GRUB passes: the test
// machines' (qemu.KernelArgs), so a panic (no init, a bad initramfs) ends
// the VM at once.
const KernelArgs = qemu.KernelArgs

// OS is a built kernel and initramfs.
type OS struct {
	Kernel        string // bzImage (arm64: Image), read-only (the ramdisk cache's)
	Initrd        string // gzip'ed newc archive
	KernelVersion string
	// Arch is "" (amd64) or qemu.Arm64: which GRUB UEFIDisk installs and
	// which console the kernel line names.
	Arch string
	// grubDir is the arm64-efi GRUB directory (ramdisk.GRUBDir): the
	// host's Debian has GRUB modules of its own architecture only.
	grubDir string
}

// Build builds the OS into dir: the guest linked statically from this
// repository, the kernel package the agent ramdisk uses
// (qemu.FetchKernel: $RAMDISK_KERNEL's flavour, from the ramdisk's
// download cache) and its modules.
func Build(ctx context.Context, dir string) (*OS, error) {
	return BuildArch(ctx, dir, "")
}

// BuildArch is Build for architecture arch ("" for amd64, or qemu.Arm64):
// the guest cross-built, the flavour's kernel and modules of that
// architecture, and for arm64 Debian's arm64-efi GRUB for UEFIDisk, all
// from the ramdisk's download cache.
func BuildArch(ctx context.Context, dir, arch string) (*OS, error) {
	cache, err := cachedir.Dir()
	if err != nil {
		return nil, err
	}
	var k *ramdisk.Kernel
	grubDir := ""
	switch arch {
	case "":
		k, err = qemu.FetchKernel(ctx, cache)
	case qemu.Arm64:
		var f ramdisk.KernelFlavour
		if f, err = qemu.KernelFlavour(); err != nil {
			return nil, err
		}
		f.Arch = arch
		if k, err = ramdisk.FetchKernel(ctx, cache, f, ""); err == nil {
			grubDir, err = qemu.GRUBDir(ctx, arch)
		}
	default:
		return nil, fmt.Errorf("osimage: architecture %q: want \"\" (amd64) or %s", arch, qemu.Arm64)
	}
	if err != nil {
		return nil, fmt.Errorf("osimage: %w", err)
	}
	root, err := qemu.RepoRoot()
	if err != nil {
		return nil, err
	}
	guest := filepath.Join(dir, "init")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", guest, "./internal/testbed/guest/osimage")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if arch != "" {
		cmd.Env = append(cmd.Env, "GOOS=linux", "GOARCH="+arch)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("osimage: go build ./internal/testbed/guest/osimage in %s: %w: %s", root, err, bytes.TrimSpace(out))
	}
	tree, err := kmod.Open(k.ModulesDir)
	if err != nil {
		return nil, err
	}
	mods, err := tree.Resolve(modules())
	if err != nil {
		return nil, err
	}
	o := &OS{Kernel: k.Vmlinuz, Initrd: filepath.Join(dir, "initrd.img"), KernelVersion: k.Version, Arch: arch, grubDir: grubDir}
	if err := writeInitramfs(o.Initrd, guest, k.ModulesDir, mods); err != nil {
		return nil, err
	}
	return o, nil
}

// writeInitramfs writes the gzip'ed archive: /init, /dev/console, the
// mount points and /lib/modules with the modules (uncompressed, for
// init_module) and the list naming them in load order.
func writeInitramfs(out, guest, modDir string, mods []kmod.Module) error {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	w := initramfs.NewWriter(zw)
	for _, d := range []string{"dev", "proc", "sys", "mnt", "lib/modules"} {
		if err := w.Dir(d, 0o755); err != nil {
			return err
		}
	}
	// The kernel opens it for /init's standard streams before anything
	// is mounted.
	if err := w.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	b, err := os.ReadFile(guest)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	if err := w.Bytes("init", 0o755, b); err != nil {
		return err
	}
	var list strings.Builder
	for _, m := range mods {
		data, err := kmod.ReadModule(filepath.Join(modDir, m.Path))
		if err != nil {
			return fmt.Errorf("osimage: module %s: %w", m.Path, err)
		}
		name := m.Name + ".ko"
		if err := w.Bytes(path.Join("lib/modules", name), 0o644, data); err != nil {
			return err
		}
		list.WriteString(name + "\n")
	}
	if err := w.Bytes("lib/modules/list", 0o644, []byte(list.String())); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("osimage: write %s: %w", out, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("osimage: write %s: %w", out, err)
	}
	return f.Close()
}

// Report is what the guest printed about the config drive.
type Report struct {
	Drive, Hostname, UserData string
	HasUserData               bool
	// SecureBoot is the SecureBootLine's rest: "enabled, lockdown
	// integrity" when the firmware enforced Secure Boot.
	SecureBoot string
}

// WaitReport waits until the guest of vm has powered off and returns what
// it read from the config drive, or why it did not boot or read it.
func WaitReport(ctx context.Context, vm *qemu.VM) (Report, error) {
	var r Report
	if _, err := vm.WaitFor(ctx, Booted); err != nil {
		return r, fmt.Errorf("osimage: the OS did not boot: %w", err)
	}
	if _, err := vm.WaitFor(ctx, PoweringOff); err != nil {
		return r, err
	}
	if l, ok := vm.Find(SecureBootLine); ok {
		r.SecureBoot = l.Text[strings.Index(l.Text, SecureBootLine)+len(SecureBootLine):]
	}
	if l, ok := vm.Find(FailedLine); ok {
		return r, fmt.Errorf("osimage: the guest failed: %s", l.Text[strings.Index(l.Text, FailedLine)+len(FailedLine):])
	}
	field := func(prefix string) (string, bool, error) {
		l, ok := vm.Find(prefix)
		if !ok {
			return "", false, fmt.Errorf("osimage: the guest printed no %q line", prefix)
		}
		v := l.Text[strings.Index(l.Text, prefix)+len(prefix):]
		if v == "(none)" {
			return "", false, nil
		}
		s, err := strconv.Unquote(v)
		if err != nil {
			return v, true, nil
		}
		return s, true, nil
	}
	var err error
	if r.Drive, _, err = field(DriveLine); err != nil {
		return r, err
	}
	if r.Hostname, _, err = field(HostnameLine); err != nil {
		return r, err
	}
	if r.UserData, r.HasUserData, err = field(UserDataLine); err != nil {
		return r, err
	}
	return r, nil
}
