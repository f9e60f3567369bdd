package bootloader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/internal/efivar"
	"github.com/ironic-go/ironic-agent/internal/lazyregexp"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// GRUB for partition images: IPA 2023.1's _install_grub2 (protocol notes
// 8.6). The image's own grub-install and grub-mkconfig are run chrooted
// into the mounted root partition (no Go path exists: the boot loader and
// its configuration are the image's), with /dev, /proc and /run bound and
// sysfs mounted as IPA does, and the ESP at /boot/efi for UEFI. Mounts are
// made with mount(2) and the chroot with the process attribute, so the
// ramdisk needs no mount or chroot programs; every mount is undone, in
// reverse order, whatever happens.

// GrubRequest is what install_bootloader asks for.
type GrubRequest struct {
	Disk           string // the install disk
	RootUUID       string // filesystem UUID or PARTUUID of the root partition
	EFIUUID        string // the ESP's, "" for BIOS
	PRePUUID       string // the PReP partition's (ppc64 BIOS), ""
	TargetBootMode string
	CPUArch        string
	// Holders, when Disk is a software RAID device, are its holder disks:
	// BIOS GRUB goes on each of them (the firmware boots a disk, not the
	// array), and an existing boot loader is no reason to skip.
	Holders []string
	// MDUUIDs are the UUIDs of the md arrays (mdadm --examine --scan),
	// given when Disk is one: an image with dracut gets rd.md.uuid=
	// for each on its kernel command line.
	MDUUIDs []string
	// RAID is the software RAID system of Disk when it is an md array:
	// for UEFI, the ESP goes to a mirror of ESPs on the holders (IPA's
	// prepare_boot_partitions_for_softraid) before GRUB is installed
	// onto it.
	RAID *raid.System
	// RamdiskBIOS is set when the ramdisk itself booted in BIOS mode:
	// only then is an existing MBR boot loader looked for (IPA's
	// _is_bootloader_loaded).
	RamdiskBIOS bool
}

// Grub runs the installation; the system calls are fields so a test on a
// kernel without vfat can mount the ESP another way.
type Grub struct {
	Log     *slog.Logger
	Mount   func(source, target, fstype string, flags uintptr, data string) error
	Unmount func(target string) error
	// TempDir is where the root partition is mounted ("" = os.TempDir()).
	TempDir string
	// EFIBootSetup makes NVRAM entries for the loaders on the ESP (the
	// agent's manage_uefi, when the ramdisk booted UEFI and has
	// efibootmgr); nil or false means it could not.
	EFIBootSetup func(ctx context.Context) (bool, error)
	// NVRAM is where the boot entries of a UEFI software RAID install go,
	// one per holder's ESP (nil: none, a ramdisk that cannot write them).
	NVRAM *efivar.Store
}

// NewGrub is a Grub that mounts with mount(2).
func NewGrub(log *slog.Logger) *Grub {
	return &Grub{
		Log:     log,
		Mount:   unix.Mount,
		Unmount: func(target string) error { return unix.Unmount(target, 0) },
	}
}

// grubPlatforms returns grub-install's --target for the architecture: the
// EFI one and the BIOS one ("" lets grub-install decide, as IPA always
// does; we name it where we know it, so a ramdisk booted in the other
// mode still installs for the node's mode).
func grubPlatforms(arch string) (efi, bios string) {
	switch arch {
	case "x86_64", "amd64":
		return "x86_64-efi", "i386-pc"
	case "i686", "i386":
		return "i386-efi", "i386-pc"
	case "aarch64", "arm64":
		return "arm64-efi", ""
	case "ppc64", "ppc64le":
		return "", "powerpc-ieee1275"
	}
	return "", ""
}

// GrubError is IPA's CommandExecutionError for a failed installation.
func GrubError(disk string, err error) error {
	return ipaerror.Wrap("CommandExecutionError", 500, "Command execution failed",
		fmt.Sprintf("Installing GRUB2 boot loader to device %s failed with %v.", disk, err), err)
}

// DeviceNotFound is IPA's DeviceNotFound for a disk or partition that
// cannot be found.
func DeviceNotFound(err error) error {
	return ipaerror.Wrap("DeviceNotFound", 404, "Error finding the disk or partition device to deploy the image onto", err.Error(), err)
}

// Install is _install_grub2: on the install disk, or, for a software RAID
// install device, on each of its holder disks (the caller has given GPT
// holders their BIOS boot partitions).
func (gi *Grub) Install(ctx context.Context, r GrubRequest) (err error) {
	t, err := gi.locate(ctx, r)
	if err != nil || t == nil {
		return err
	}
	dir, err := os.MkdirTemp(gi.TempDir, "ironic-agent-root-")
	if err != nil {
		return GrubError(r.Disk, err)
	}
	m := &mountStack{gi: gi}
	defer func() {
		if cerr := m.undo(); cerr != nil {
			if err == nil {
				err = GrubError(r.Disk, cerr)
			} else {
				gi.Log.Error("cleaning up after the failed boot loader installation", "error", cerr)
			}
			return
		}
		os.Remove(dir)
	}()
	if err := mountRoot(m, t.root, dir); err != nil {
		return GrubError(r.Disk, err)
	}
	ch := &chroot{dir: dir, log: gi.Log}
	bin := "grub"
	if _, err := os.Stat(filepath.Join(dir, "usr/sbin/grub2-install")); err == nil {
		bin = "grub2"
	}
	if done, err := gi.useEFIAssets(ctx, ch, m, dir, bin, t, r); err != nil || done {
		return err
	}
	// ESP-resident files (grubenv) listed in the image's fstab, as IPA
	// mounts them; undone with "umount -a -t vfat" below.
	if _, err := ch.run(ctx, nil, "mount", "-a", "-t", "vfat"); err != nil {
		return GrubError(r.Disk, err)
	}
	m.chrootVfat, m.vfatAt = ch, len(m.targets)
	efiTarget, biosTarget := grubPlatforms(r.CPUArch)
	if t.esp != "" {
		err = gi.installUEFI(ctx, ch, m, dir, bin, efiTarget, t)
	} else {
		err = gi.installBIOS(ctx, ch, bin, biosTarget, t)
	}
	if err != nil {
		return GrubError(r.Disk, err)
	}
	if err := configureGrub(ctx, ch, bin, r.MDUUIDs); err != nil {
		return GrubError(r.Disk, err)
	}
	if t.esp != "" {
		if err := appendESPToFstab(dir, r.EFIUUID, t.esp); err != nil {
			gi.Log.Warn("failed to add the EFI system partition to /etc/fstab", "error", err)
		}
	}
	gi.Log.Info("GRUB2 successfully installed", "device", r.Disk)
	return nil
}

// useEFIAssets sets the boot up from the image's own EFI assets when it
// carries them (IPA's _preserve_efi_assets); done reports that it did. As
// in IPA, they are not used on software RAID: manage_uefi has had its
// chance with the image's ESP.
func (gi *Grub) useEFIAssets(ctx context.Context, ch *chroot, m *mountStack, dir, bin string, t *grubTarget, r GrubRequest) (done bool, err error) {
	if t.esp == "" || len(t.holderESPs) > 0 {
		return false, nil
	}
	done, err = gi.tryPreserveEFIAssets(ctx, ch, m, dir, bin, t.esp, r)
	if err != nil {
		return false, GrubError(r.Disk, err)
	}
	if done {
		if err := appendESPToFstab(dir, r.EFIUUID, t.esp); err != nil {
			gi.Log.Warn("failed to add the EFI system partition to /etc/fstab", "error", err)
		}
		gi.Log.Info("boot loader set up from the EFI assets of the image", "device", r.Disk)
	}
	return done, nil
}

// grubTarget is where Install puts GRUB: the image's root partition, its
// ESP (for UEFI), the disks GRUB is installed to (for BIOS) and, for UEFI
// on software RAID, the holders' ESP mirror.
type grubTarget struct {
	root       string
	esp        string
	grubDisk   string
	holders    []string
	holderESPs []holderESP
}

// locate finds the partitions of r (IPA's DeviceNotFound when one is
// missing) and, for UEFI on software RAID, makes the holders' ESP mirror.
// A nil target and no error: a boot loader is already there (BIOS).
func (gi *Grub) locate(ctx context.Context, r GrubRequest) (*grubTarget, error) {
	root, err := blockdev.FindPartitionByUUID(r.Disk, r.RootUUID)
	if err != nil {
		return nil, DeviceNotFound(err)
	}
	if len(r.Holders) == 0 && r.RamdiskBIOS && r.EFIUUID == "" && r.PRePUUID == "" && bootloaderLoaded(r.Disk) {
		gi.Log.Info("skipping installation of the boot loader: the device is already marked bootable", "device", r.Disk)
		return nil, nil
	}
	t := &grubTarget{root: root, grubDisk: r.Disk, holders: r.Holders}
	if r.EFIUUID != "" {
		if t.esp, err = blockdev.FindPartitionByUUID(r.Disk, r.EFIUUID); err != nil {
			return nil, DeviceNotFound(err)
		}
	}
	// Firmware cannot read an ESP inside an md array: for UEFI on
	// software RAID, GRUB goes to the ESP mirror on the holder disks.
	if t.esp != "" && len(r.Holders) > 0 {
		if r.RAID == nil {
			return nil, GrubError(r.Disk, fmt.Errorf("software RAID device %s: no RAID system to make the ESP mirror with", r.Disk))
		}
		if t.esp, t.holderESPs, err = relocateESP(ctx, gi.Log, r.RAID, r.Disk, t.esp); err != nil {
			return nil, GrubError(r.Disk, err)
		}
	}
	if r.PRePUUID != "" {
		// On Power, GRUB goes straight into the PReP partition.
		if t.grubDisk, err = blockdev.FindPartitionByUUID(r.Disk, r.PRePUUID); err != nil {
			return nil, DeviceNotFound(err)
		}
	}
	return t, nil
}

// mountRoot mounts the root partition at dir, with /dev, /proc and /run
// bound and sysfs mounted, as IPA does before it chroots.
func mountRoot(m *mountStack, root, dir string) error {
	fstype, err := probeFSType(root)
	if err != nil {
		return err
	}
	if err := m.mount(root, dir, fstype, 0, ""); err != nil {
		return err
	}
	for _, fs := range []string{"/dev", "/proc", "/run"} {
		if err := os.MkdirAll(dir+fs, 0o755); err != nil {
			return err
		}
		if err := m.mount(fs, dir+fs, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir+"/sys", 0o755); err != nil {
		return err
	}
	return m.mount("none", dir+"/sys", "sysfs", 0, "")
}

// installUEFI mounts the ESP at /boot/efi and runs grub-install for UEFI,
// then, on software RAID, writes a boot entry per holder's ESP.
func (gi *Grub) installUEFI(ctx context.Context, ch *chroot, m *mountStack, dir, bin, efiTarget string, t *grubTarget) error {
	mnt := filepath.Join(dir, "boot/efi")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	if err := m.mount(t.esp, mnt, "vfat", 0, ""); err != nil {
		return err
	}
	gi.Log.Warn("GRUB2 will be installed for UEFI on the EFI system partition with grub-install, which does not place Secure Boot signed binaries", "partition", t.esp)
	args := []string{"--efi-directory=/boot/efi"}
	if efiTarget != "" {
		args = append([]string{"--target=" + efiTarget}, args...)
	}
	// IPA runs both and ignores their failures: the first also writes an
	// NVRAM entry (impossible without EFI variables), the second puts GRUB
	// at the removable-media path firmware falls back to. We fail only
	// when neither worked.
	_, err1 := ch.run(ctx, nil, bin+"-install", args...)
	if err1 != nil {
		gi.Log.Warn("ignoring GRUB2 boot loader installation failure", "error", err1)
	}
	_, err2 := ch.run(ctx, nil, bin+"-install", append(args, "--removable")...)
	if err2 != nil {
		gi.Log.Warn("ignoring GRUB2 boot loader installation failure", "error", err2)
	}
	if err1 != nil && err2 != nil {
		return errors.Join(err1, err2)
	}
	if len(t.holderESPs) > 0 && gi.NVRAM != nil {
		return raidBootEntries(ctx, gi.Log, *gi.NVRAM, mnt, t.holderESPs)
	}
	return nil
}

// installBIOS runs grub-install for BIOS on the disk (or PReP partition),
// or on each holder disk of a software RAID install device.
func (gi *Grub) installBIOS(ctx context.Context, ch *chroot, bin, biosTarget string, t *grubTarget) error {
	var args []string
	if biosTarget != "" {
		args = append(args, "--target="+biosTarget)
	}
	disks := []string{t.grubDisk}
	if len(t.holders) > 0 {
		disks = t.holders
	}
	for _, d := range disks {
		gi.Log.Info(EventInstallingGRUB2, "device", d)
		if _, err := ch.run(ctx, nil, bin+"-install", append(slices.Clone(args), d)...); err != nil {
			return err
		}
	}
	return nil
}

// configureGrub writes grub.cfg with the image's own scripts (IPA's
// _configure_grub).
func configureGrub(ctx context.Context, ch *chroot, bin string, mdUUIDs []string) error {
	if len(mdUUIDs) > 0 {
		if _, err := ch.lookPath("dracut"); err == nil {
			// IPA's _configure_grub: a dracut initramfs assembles only
			// the arrays the kernel command line names.
			if err := addMDUUIDs(filepath.Join(ch.dir, "etc/default/grub"), mdUUIDs); err != nil {
				return err
			}
		}
	}
	env := []string{"GRUB_DISABLE_OS_PROBER=true", "GRUB_SAVEDEFAULT=true", "LC_ALL=C", "LANG=C"}
	_, err := ch.run(ctx, env, bin+"-mkconfig", "-o", "/boot/"+bin+"/grub.cfg")
	return err
}

// tryPreserveEFIAssets is IPA's _try_preserve_efi_assets: an image whose
// root filesystem carries /boot/efi/EFI (images built with the ESP inside
// the root, signed shim and GRUB included) gets grub.cfg generated, those
// files copied onto the real ESP (with /boot/grub2/grub.cfg and grubenv
// added to each loader directory lacking them), and NVRAM entries made by
// efiBootSetup; when that sets the machine up, no grub-install runs, so
// Secure Boot signed binaries stay in use. A copy failure or a ramdisk
// that cannot make NVRAM entries falls back to grub-install, as in IPA.
func (gi *Grub) tryPreserveEFIAssets(ctx context.Context, ch *chroot, m *mountStack, dir, bin, esp string, r GrubRequest) (bool, error) {
	assets := filepath.Join(dir, "boot/efi/EFI")
	if st, err := os.Stat(assets); err != nil || !st.IsDir() {
		return false, nil
	}
	if _, err := ch.lookPath(bin + "-install"); err == nil {
		if err := configureGrub(ctx, ch, bin, r.MDUUIDs); err != nil {
			return false, err
		}
	}
	gi.Log.Info("EFI assets found in the image, copying them to the EFI system partition", "partition", esp)
	if err := gi.preserveEFIAssets(dir, assets, esp, m); err != nil {
		gi.Log.Warn("failed to preserve the image's EFI assets; installing GRUB instead", "error", err)
		return false, nil
	}
	if gi.EFIBootSetup == nil {
		return false, nil
	}
	ok, err := gi.EFIBootSetup(ctx)
	if err != nil {
		gi.Log.Warn("setting up UEFI boot from the preserved assets failed; installing GRUB instead", "error", err)
		return false, nil
	}
	return ok, nil
}

// preserveEFIAssets copies the image's /boot/efi/EFI onto the ESP.
func (gi *Grub) preserveEFIAssets(dir, assets, esp string, m *mountStack) error {
	save, err := os.MkdirTemp(gi.TempDir, "ironic-agent-efi-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(save)
	if err := copyTree(assets, save); err != nil {
		return err
	}
	ents, err := os.ReadDir(save)
	if err != nil {
		return err
	}
	for _, extra := range []string{"grub.cfg", "grubenv"} {
		src := filepath.Join(dir, "boot/grub2", extra)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		for _, e := range ents {
			dst := filepath.Join(save, e.Name(), extra)
			if _, err := os.Stat(dst); err == nil || !e.IsDir() {
				continue
			}
			if err := copyFileMode(src, dst); err != nil {
				gi.Log.Warn("failed to copy "+extra+" for EFI boot", "error", err)
			}
		}
	}
	mnt := filepath.Join(dir, "boot/efi")
	if err := m.mount(esp, mnt, "vfat", 0, ""); err != nil {
		return err
	}
	cerr := copyTree(save, filepath.Join(mnt, "EFI"))
	if err := m.unmountLast(); err != nil {
		return errors.Join(cerr, err)
	}
	return cerr
}

// copyTree copies the regular files and directories below src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFileMode(p, target)
		}
		return nil // FAT holds nothing else
	})
}

func copyFileMode(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// mountStack undoes mounts in reverse order.
type mountStack struct {
	gi      *Grub
	targets []string
	// chrootVfat is set once "mount -a -t vfat" ran in the chroot, when
	// vfatAt mounts were made.
	chrootVfat *chroot
	vfatAt     int
}

func (m *mountStack) mount(source, target, fstype string, flags uintptr, data string) error {
	if err := m.gi.Mount(source, target, fstype, flags, data); err != nil {
		what := fstype
		if flags&unix.MS_BIND != 0 {
			what = "bind"
		}
		return fmt.Errorf("mount %s on %s (%s): %w", source, target, what, err)
	}
	m.targets = append(m.targets, target)
	return nil
}

// undo unmounts everything in reverse order, retrying a busy mount as IPA
// does (three attempts a second apart); what could not be unmounted is
// returned so the command reports it (the root partition then stays
// mounted too, as the kernel refuses it while anything below is). As in
// IPA, the ESP is unmounted first, then the image's own vfat mounts
// ("umount -a -t vfat" in the chroot), then the binds and the root.
func (m *mountStack) undo() error {
	var errs []error
	for i := len(m.targets) - 1; i >= 0; i-- {
		if m.chrootVfat != nil && i < m.vfatAt {
			if _, err := m.chrootVfat.run(context.Background(), nil, "umount", "-a", "-t", "vfat"); err != nil {
				m.gi.Log.Warn("unable to unmount the vfat partitions inside the image", "error", err)
			}
			m.chrootVfat = nil
		}
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			// EINVAL: no longer a mount point (an inner umount got it).
			if err = m.gi.Unmount(m.targets[i]); err == nil || errors.Is(err, unix.EINVAL) {
				err = nil
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m.targets[i], err))
		}
	}
	return errors.Join(errs...)
}

// unmountLast undoes the latest mount now.
func (m *mountStack) unmountLast() error {
	t := m.targets[len(m.targets)-1]
	if err := m.gi.Unmount(t); err != nil {
		return fmt.Errorf("unmount %s: %w", t, err)
	}
	m.targets = m.targets[:len(m.targets)-1]
	return nil
}

// chroot runs the image's programs inside its root.
type chroot struct {
	dir string
	log *slog.Logger
}

// chrootPath is the PATH programs are looked up in inside the image,
// IPA's _get_path_variable (the ramdisk's PATH plus /bin, /usr/sbin, /sbin).
func chrootPath() string {
	return os.Getenv("PATH") + ":/bin:/usr/sbin:/sbin"
}

// lookPath finds name in the image's PATH.
func (c *chroot) lookPath(name string) (string, error) {
	for _, d := range filepath.SplitList(chrootPath()) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(filepath.Join(c.dir, p)); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in the image (PATH %s)", name, chrootPath())
}

// run runs name inside the chroot; a failure carries the command line,
// exit status and stderr.
func (c *chroot) run(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	line := "chroot " + c.dir + " " + strings.Join(append([]string{name}, args...), " ")
	p, err := c.lookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", line, err)
	}
	cmd := exec.CommandContext(ctx, p, args...)
	// exec.Command resolved nothing on the host: Path is the path inside
	// the chroot, which the kernel resolves after chroot(2).
	cmd.Path = p
	cmd.Dir = "/"
	cmd.Env = append([]string{"PATH=" + chrootPath()}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: c.dir}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	c.log.Debug("running in the image", "command", line)
	if err := cmd.Run(); err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return stdout.Bytes(), fmt.Errorf("command %q failed (exit status %d): %s", line, code, strings.TrimSpace(lastBytes(stderr.String(), 2048)+" "+errText(err, stderr.Len())))
	}
	return stdout.Bytes(), nil
}

func errText(err error, stderrLen int) string {
	if stderrLen > 0 {
		return ""
	}
	return err.Error()
}

// lastBytes keeps the end of a long stderr, where the reason usually is.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// probeFSType names the root filesystem for mount(2): the signature found
// on it, else every block filesystem the kernel knows is tried by mount
// itself in turn (as mount(8) does), so "" is returned only when the
// kernel list cannot be read.
func probeFSType(part string) (string, error) {
	t, err := blockdev.FSType(part)
	if err != nil {
		return "", err
	}
	if t == "" {
		return "", fmt.Errorf("no filesystem recognised on the root partition %s", part)
	}
	if t == "ext2" || t == "ext3" {
		t = "ext4" // the ext4 driver mounts all three
	}
	return t, nil
}

// bootloaderLoaded is IPA's _is_bootloader_loaded for a BIOS ramdisk: a
// partition carries a boot flag (msdos active, GPT ESP or legacy BIOS
// bootable attribute) and the disk or that partition starts with x86 boot
// code (IPA asks file(1) whether the first 218 bytes are executable; boot
// code begins with a jump, which is what file recognises).
func bootloaderLoaded(disk string) bool {
	parts, err := blockdev.BootFlaggedPartitions(disk)
	if err != nil || len(parts) == 0 {
		return false
	}
	if hasBootCode(disk) {
		return true
	}
	for _, p := range parts {
		if hasBootCode(p) {
			return true
		}
	}
	return false
}

func hasBootCode(dev string) bool {
	f, err := os.Open(dev)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 512)
	if _, err := io.ReadFull(f, b); err != nil {
		return false
	}
	return b[510] == 0x55 && b[511] == 0xaa && (b[0] == 0xeb || b[0] == 0xe9)
}

// appendESPToFstab is IPA's _append_uefi_to_fstab: mount the ESP at
// /boot/efi on boot, by UUID (or PARTUUID when that is what Ironic sent).
func appendESPToFstab(root, efiUUID, esp string) error {
	fstab := filepath.Join(root, "etc/fstab")
	b, err := os.ReadFile(fstab)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	label := "UUID"
	if u, err := blockdev.BlockUUID(esp); err == nil && !strings.EqualFold(u, efiUUID) {
		label = "PARTUUID"
	}
	if bytes.Contains(b, []byte(label+"="+efiUUID)) {
		return nil
	}
	f, err := os.OpenFile(fstab, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s=%s\t/boot/efi\tvfat\tumask=0077\t0\t1\n", label, efiUUID); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// grubCmdline is the GRUB_CMDLINE_LINUX line of /etc/default/grub.
var grubCmdline = lazyregexp.New(`GRUB_CMDLINE_LINUX="(.*)"`)

// addMDUUIDs appends rd.md.uuid=<uuid> for each array to
// GRUB_CMDLINE_LINUX in the image's /etc/default/grub, as IPA's re.sub
// does (a file without the line is left as it is).
func addMDUUIDs(path string, uuids []string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("adding rd.md.uuid to %s: %w", path, err)
	}
	var add []string
	for _, u := range uuids {
		add = append(add, "rd.md.uuid="+u)
	}
	out := grubCmdline.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := grubCmdline.FindSubmatch(m)
		return []byte(`GRUB_CMDLINE_LINUX="` + string(sub[1]) + " " + strings.Join(add, " ") + `"`)
	})
	return os.WriteFile(path, out, 0o644)
}
