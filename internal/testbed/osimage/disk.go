package osimage

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/mkfs"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage/grubimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// Where the whole-disk images keep things.
const (
	// bootMarker is the file GRUB's embedded configuration searches for
	// to find the root file system, whichever disk the firmware booted.
	bootMarker = "/boot/osimage"
	// DistroDir is the ESP directory of the UEFI image's own GRUB, as a
	// distribution installs it; a BOOTX64.CSV beside it (as shim's) names
	// it and the label EFILabel, so the agent's NVRAM entry points here.
	DistroDir = "EFI/osimage"
	EFILabel  = "osimage"
	// SignedDir is the ESP directory of SecureBootUEFIDisk's signed
	// chain, Debian's; shim's BOOTX64.CSV there names shimx64.efi and
	// the label SignedLabel.
	SignedDir   = "EFI/debian"
	SignedLabel = "debian"
	// ShimSignedPath and GrubSignedPath are where Debian's shim-signed
	// and grub-efi-amd64-signed put the signed shim and GRUB, which
	// Debian's grub-install copies onto the ESP.
	ShimSignedPath = "/usr/lib/shim/shimx64.efi.signed"
	GrubSignedPath = "/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
	// RemovablePath is the firmware's fallback loader on the same ESP.
	RemovablePath = "EFI/BOOT/BOOTX64.EFI"
	// RemovablePathArm64 is RemovablePath on an arm64 image.
	RemovablePathArm64 = "EFI/BOOT/BOOTAA64.EFI"
)

// uefiNames are what a UEFI image's ESP and GRUB differ in per
// architecture: GRUB's platform, the loader and CSV file names in
// DistroDir, and the removable path.
type uefiNames struct {
	format, loader, csv, removable string
}

// uefiNames are o's architecture's.
func (o *OS) uefiNames() uefiNames {
	if o.Arch == qemu.Arm64 {
		return uefiNames{format: "arm64-efi", loader: "grubaa64.efi", csv: "BOOTAA64.CSV", removable: RemovablePathArm64}
	}
	return uefiNames{format: "x86_64-efi", loader: "grubx64.efi", csv: "BOOTX64.CSV", removable: RemovablePath}
}

const (
	sector   = 512
	firstLBA = 2048     // the first partition, 1 MiB in
	espSize  = 8 << 20  // FAT12 (mkfs.fat's choice), two GRUB images
	rootSize = 32 << 20 // ext4: kernel, initramfs, grub.cfg
	// rootSizeArm64 is rootSize for Debian's arm64 kernel, an
	// uncompressed Image of 36 MiB.
	rootSizeArm64 = 64 << 20
	gptSpare      = int64(1 << 20) // room for the backup GPT at the end of the disk
	// signedESPSize holds Debian's signed shim and GRUB (a monolithic
	// image with every module built in).
	signedESPSize = 16 << 20
)

// Missing names the first host program the whole-disk images need that
// is not installed ("" if none), with its Debian package.
func Missing() string {
	for _, p := range [][2]string{{"grub-mkimage", "grub-common"}, {"mkfs.ext4", "e2fsprogs"},
		{"sgdisk", "gdisk"}, {"mcopy", "mtools"}, {"mmd", "mtools"}, {"qemu-img", "qemu-utils"}} {
		if _, err := exec.LookPath(p[0]); err != nil {
			return p[0] + " (" + p[1] + ")"
		}
	}
	for _, d := range [][2]string{{"/usr/lib/grub/i386-pc", "grub-pc-bin"}, {"/usr/lib/grub/x86_64-efi", "grub-efi-amd64-bin"}} {
		if _, err := os.Stat(d[0]); err != nil {
			return d[0] + " (" + d[1] + ")"
		}
	}
	return ""
}

func run(ctx context.Context, stdin string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("osimage: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// grubCfg is /boot/grub/grub.cfg of the whole-disk images, whose kernel
// line is args.
func grubCfg(args string) string {
	fail := "; then echo '" + FailedLine + "GRUB could not load %s'; halt; fi\n"
	return "set default=0\nset timeout=0\nmenuentry 'osimage' {\n" +
		"\techo '" + LoaderLine + "'\n" +
		"\tif ! linux /boot/vmlinuz " + args + fmt.Sprintf(fail, "the kernel") +
		"\tif ! initrd /boot/initrd.img" + fmt.Sprintf(fail, "the initramfs") + "}\n"
}

// embeddedCfg is the configuration inside the GRUB images: find the root
// file system by bootMarker, then the normal mode reads its grub.cfg.
// SeaBIOS shows GRUB on the VGA screen only, so the BIOS one also writes
// to the serial port; OVMF copies its console to the serial port itself.
func embeddedCfg(bios bool) string {
	s := ""
	if bios {
		s = "serial --unit=0 --speed=115200\nterminal_input serial\nterminal_output serial\n"
	}
	return s + "search --no-floppy --file --set=root " + bootMarker + "\nset prefix=($root)/boot/grub\n"
}

// grubModules are built into the GRUB images: there is no module
// directory on the disk. The UEFI one also reads md arrays (mdraid1x):
// deployed onto a software RAID-1, the image's root is inside the array,
// and the firmware starts this GRUB from the ESP mirror on a holder disk.
func grubModules(bios bool) []string {
	m := []string{"normal", "configfile", "search", "search_fs_file", "ext2", "part_msdos", "part_gpt", "linux", "echo", "test", "halt"}
	if bios {
		return append(m, "biosdisk", "serial", "terminal")
	}
	return append(m, "fat", "mdraid1x")
}

// grubImage runs grub-mkimage for the format (i386-pc, x86_64-efi or
// arm64-efi) with the modules of grubDir ("": the host's).
func grubImage(ctx context.Context, dir, format, grubDir string) (string, error) {
	bios := format == "i386-pc"
	cfg := filepath.Join(dir, "embed-"+format+".cfg")
	if err := os.WriteFile(cfg, []byte(embeddedCfg(bios)), 0o644); err != nil {
		return "", fmt.Errorf("osimage: %w", err)
	}
	out := filepath.Join(dir, "grub-"+format+".img")
	args := []string{"-O", format, "-p", "/boot/grub", "-c", cfg, "-o", out}
	if grubDir != "" {
		args = append(args, "-d", grubDir)
	}
	args = append(args, grubModules(bios)...)
	return out, run(ctx, "", "grub-mkimage", args...)
}

// rootSize is the size of o's root file system.
func (o *OS) rootSize() int64 {
	if o.Arch == qemu.Arm64 {
		return rootSizeArm64
	}
	return rootSize
}

// kernelArgs is the kernel line of o's grub.cfg: KernelArgs, on arm64
// with the PL011 console of QEMU's virt machine.
func (o *OS) kernelArgs() string {
	if o.Arch == qemu.Arm64 {
		return qemu.KernelArgsArm64
	}
	return KernelArgs
}

// rootFS makes the ext4 file system of the whole-disk images: /boot with
// the kernel, the initramfs, grub.cfg and bootMarker.
func (o *OS) rootFS(ctx context.Context, dir string) (string, error) {
	tree := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(tree, "boot/grub"), 0o755); err != nil {
		return "", fmt.Errorf("osimage: %w", err)
	}
	for dst, src := range map[string]string{"boot/vmlinuz": o.Kernel, "boot/initrd.img": o.Initrd} {
		if err := copyFile(src, filepath.Join(tree, dst)); err != nil {
			return "", err
		}
	}
	for name, text := range map[string]string{"boot/grub/grub.cfg": grubCfg(o.kernelArgs()), bootMarker[1:]: "osimage\n"} {
		if err := os.WriteFile(filepath.Join(tree, name), []byte(text), 0o644); err != nil {
			return "", fmt.Errorf("osimage: %w", err)
		}
	}
	fs := filepath.Join(dir, "root.ext4")
	return fs, grubimage.Ext4(ctx, tree, fs, o.rootSize())
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("osimage: copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}

// place writes the file src into the disk image at byte offset off.
func place(disk, src string, off int64) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	f, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return fmt.Errorf("osimage: write %s at %d: %w", disk, off, err)
	}
	return f.Close()
}

func sparse(p string, size int64) error {
	f, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("osimage: %w", err)
	}
	return f.Close()
}

// BIOSDisk writes to out a raw whole-disk image for BIOS: an MBR with
// GRUB's boot.img, its core image in the gap before the first partition
// (where grub-install puts it; core.img's own block list already says
// sector 2 onwards, and boot.img sector 1), and one active Linux
// partition with the root file system. dir holds the pieces.
func (o *OS) BIOSDisk(ctx context.Context, dir, out string) error {
	root, err := o.rootFS(ctx, dir)
	if err != nil {
		return err
	}
	if o.Arch != "" {
		return fmt.Errorf("osimage: a BIOS image for %s: BIOS is x86's", o.Arch)
	}
	core, err := grubImage(ctx, dir, "i386-pc", "")
	if err != nil {
		return err
	}
	if st, err := os.Stat(core); err != nil || st.Size() > (firstLBA-1)*sector {
		return fmt.Errorf("osimage: %s does not fit before the first partition: %v", core, err)
	}
	if err := sparse(out, firstLBA*sector+rootSize); err != nil {
		return err
	}
	boot, err := os.ReadFile("/usr/lib/grub/i386-pc/boot.img")
	if err != nil || len(boot) != sector {
		return fmt.Errorf("osimage: GRUB's boot.img (grub-pc-bin): %d bytes, %v", len(boot), err)
	}
	mbr := filepath.Join(dir, "mbr")
	if err := os.WriteFile(mbr, mbrSector(boot, rootSize/sector), 0o644); err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	if err := place(out, mbr, 0); err != nil {
		return err
	}
	if err := place(out, core, sector); err != nil {
		return err
	}
	return place(out, root, firstLBA*sector)
}

// UEFIDisk writes to out a raw whole-disk image for UEFI: a GPT with an
// EFI system partition (GRUB at DistroDir/grubx64.efi with a BOOTX64.CSV
// naming it, and the same GRUB at RemovablePath; on arm64 grubaa64.efi,
// BOOTAA64.CSV and RemovablePathArm64) and the root file system.
func (o *OS) UEFIDisk(ctx context.Context, dir, out string) error {
	n := o.uefiNames()
	grub, err := grubImage(ctx, dir, n.format, o.grubDir)
	if err != nil {
		return err
	}
	csv, err := bootCSV(dir, n.loader, EFILabel, "osimage test OS")
	if err != nil {
		return err
	}
	return o.uefiDisk(ctx, dir, out, espSize, []espFile{
		{DistroDir + "/" + n.loader, grub}, {DistroDir + "/" + n.csv, csv}, {n.removable, grub}})
}

// SecureBootUEFIDisk writes to out a raw whole-disk image for UEFI that
// boots with Secure Boot enforced, laid out as Debian installs its signed
// boot chain (qemu.FetchBootChain: the kernel flavour's release): the
// ESP's SignedDir holds shim (shimx64.efi, signed by Microsoft's UEFI
// CA), GRUB (grubx64.efi, signed with Debian's key, which shim trusts), shim's BOOTX64.CSV naming shimx64.efi and the label
// SignedLabel, and the grub.cfg Debian's signed GRUB reads from its own
// directory, which hands over to the root file system's; the root file
// system is UEFIDisk's, with the OS's kernel, Debian's signed one of the
// same flavour. shim and GRUB are also the removable-media loader
// (RemovablePath, grubx64.efi beside it, as grub-install
// --force-extra-removable puts them), so the disk boots on a firmware
// without the agent's boot entry too; OVMF's boot line tells the two
// apart.
func (o *OS) SecureBootUEFIDisk(ctx context.Context, dir, out string) error {
	bc, err := qemu.FetchBootChain(ctx)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	csv, err := bootCSV(dir, "shimx64.efi", SignedLabel, "Debian's signed shim")
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "signed-grub.cfg")
	if err := os.WriteFile(cfg, []byte(embeddedCfg(false)+"configfile $prefix/grub.cfg\n"), 0o644); err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	return o.uefiDisk(ctx, dir, out, signedESPSize, []espFile{
		{SignedDir + "/shimx64.efi", bc.Shim}, {SignedDir + "/grubx64.efi", bc.Grub},
		{SignedDir + "/BOOTX64.CSV", csv}, {SignedDir + "/grub.cfg", cfg},
		{RemovablePath, bc.Shim}, {path.Dir(RemovablePath) + "/grubx64.efi", bc.Grub}})
}

// espFile is a file of a whole-disk image's ESP: its path there and the
// host file it is a copy of.
type espFile struct{ dst, src string }

// bootCSV writes into dir a boot CSV (BOOTX64.CSV or BOOTAA64.CSV) in
// shim's format: UTF-16LE with a byte-order mark,
// "loader,label,options,description".
func bootCSV(dir, loader, label, description string) (string, error) {
	csv := filepath.Join(dir, "BOOTX64.CSV")
	u := utf16.Encode([]rune("\ufeff" + loader + "," + label + ",," + description + "\n"))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		b[2*i], b[2*i+1] = byte(c), byte(c>>8)
	}
	if err := os.WriteFile(csv, b, 0o644); err != nil {
		return "", fmt.Errorf("osimage: %w", err)
	}
	return csv, nil
}

// uefiDisk writes to out the GPT image of UEFIDisk and
// SecureBootUEFIDisk: an ESP of espBytes holding files, then the root
// file system.
func (o *OS) uefiDisk(ctx context.Context, dir, out string, espBytes int64, files []espFile) error {
	root, err := o.rootFS(ctx, dir)
	if err != nil {
		return err
	}
	esp := filepath.Join(dir, "esp.fat")
	if err := sparse(esp, espBytes); err != nil {
		return err
	}
	f, err := os.OpenFile(esp, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	_, err = mkfs.WriteFAT(f, espBytes, mkfs.FATOptions{Label: "ESP", VolumeID: 0x05e1_0001, HiddenSectors: firstLBA})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("osimage: ESP: %w", err)
	}
	dirs := []string{"::/EFI"}
	for _, f := range files {
		if d := "::/" + path.Dir(f.dst); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	if err := run(ctx, "", "mmd", append([]string{"-i", esp}, dirs...)...); err != nil {
		return err
	}
	for _, f := range files {
		if err := run(ctx, "", "mcopy", "-i", esp, f.src, "::/"+f.dst); err != nil {
			return err
		}
	}
	rootSize := o.rootSize()
	if err := sparse(out, firstLBA*sector+espBytes+rootSize+gptSpare); err != nil {
		return err
	}
	espEnd := firstLBA + espBytes/sector - 1
	if err := run(ctx, "", "sgdisk", "-n", fmt.Sprintf("1:%d:%d", firstLBA, espEnd), "-t", "1:ef00", "-c", "1:EFI system partition",
		"-n", fmt.Sprintf("2:%d:+%dK", espEnd+1, rootSize>>10), "-t", "2:8300", "-c", "2:root", out); err != nil {
		return err
	}
	if err := place(out, esp, firstLBA*sector); err != nil {
		return err
	}
	return place(out, root, (espEnd+1)*sector)
}

// mbrSector is boot.img's code (bytes 0-439) with a disk signature and
// one active Linux partition of sectors sectors at firstLBA (the CHS
// fields say "beyond CHS", as fdisk writes for LBA-only entries).
func mbrSector(boot []byte, sectors uint32) []byte {
	b := make([]byte, sector)
	copy(b, boot[:440])
	binary.LittleEndian.PutUint32(b[440:], 0x05_1a_6e_01)
	e := b[446:462]
	e[0] = 0x80
	copy(e[1:4], []byte{0xfe, 0xff, 0xff})
	e[4] = 0x83
	copy(e[5:8], []byte{0xfe, 0xff, 0xff})
	binary.LittleEndian.PutUint32(e[8:], firstLBA)
	binary.LittleEndian.PutUint32(e[12:], sectors)
	b[510], b[511] = 0x55, 0xaa
	return b
}

// QCOW2 converts the raw image raw to qcow2 at out.
func QCOW2(ctx context.Context, raw, out string) error {
	return run(ctx, "", "qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, out)
}

// PartitionImage writes to out the root file system of a partition image
// (Debian's: ext4, labelled img-root): internal/testbed/osimage/grubimage's tree, whose GRUB the
// agent installs, with this OS's kernel and initramfs as the kernel
// grub-mkconfig finds in /boot, and GRUB's menu on the serial port.
func (o *OS) PartitionImage(ctx context.Context, dir, out string, size int64) error {
	return o.PartitionImageFor(ctx, dir, out, size, grubimage.Debian())
}

// PartitionImageFor is PartitionImage laid out as f says: an XFS root
// with grub2-* tools (grubimage.RHEL), a btrfs root in a subvolume
// (grubimage.SUSE; building it needs root privileges).
func (o *OS) PartitionImageFor(ctx context.Context, dir, out string, size int64, f grubimage.Flavor) error {
	return o.partitionImage(ctx, dir, out, size, f, nil)
}

// SecureBootPartitionImage is PartitionImage with Debian's signed boot
// chain (qemu.FetchBootChain) where images built with their ESP inside the
// root file system carry it, IPA's "EFI assets": /boot/efi/SignedDir holds
// shim (shimx64.efi), GRUB (grubx64.efi), shim's BOOTX64.CSV naming
// shimx64.efi and the label SignedLabel, and the grub.cfg Debian's signed
// GRUB reads from its own directory, which finds the root file system by
// its label and reads the /boot/grub/grub.cfg the agent's grub-mkconfig
// writes. The agent copies /boot/efi/EFI onto the ESP it makes and points
// the boot entry at shim; the kernel is Debian's signed one.
func (o *OS) SecureBootPartitionImage(ctx context.Context, dir, out string, size int64) error {
	bc, err := qemu.FetchBootChain(ctx)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	return o.partitionImage(ctx, dir, out, size, grubimage.Debian(), func(tree string) error {
		efi := filepath.Join(tree, "boot/efi", SignedDir)
		if err := os.MkdirAll(efi, 0o755); err != nil {
			return fmt.Errorf("osimage: %w", err)
		}
		csv, err := bootCSV(dir, "shimx64.efi", SignedLabel, "Debian's signed shim")
		if err != nil {
			return err
		}
		for dst, src := range map[string]string{"shimx64.efi": bc.Shim, "grubx64.efi": bc.Grub, "BOOTX64.CSV": csv} {
			if err := copyFile(src, filepath.Join(efi, dst)); err != nil {
				return err
			}
		}
		cfg := "search --no-floppy --label --set=root img-root\nset prefix=($root)/boot/grub\nconfigfile $prefix/grub.cfg\n"
		// GRUB's environment block, which Debian's grub-install makes
		// and this image's tree lacks: the menu entry grub-mkconfig
		// writes for the agent (GRUB_SAVEDEFAULT=true, as IPA runs it)
		// saves itself there, and on a serial terminal GRUB stops at
		// "Press any key to continue..." after failing to.
		env := "# GRUB Environment Block\n"
		env += strings.Repeat("#", 1024-len(env))
		for p, text := range map[string]string{filepath.Join(efi, "grub.cfg"): cfg, filepath.Join(tree, "boot/grub/grubenv"): env} {
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				return fmt.Errorf("osimage: %w", err)
			}
		}
		return nil
	})
}

// SignedPackagesPartitionImage is PartitionImage with Debian's signed
// boot chain (qemu.FetchBootChain) installed in the root file system as
// its packages install it, and nothing in /boot/efi: shim-signed's
// ShimSignedPath and grub-efi-amd64-signed's GrubSignedPath. The agent
// finds no EFI assets to copy and runs the image's grub-install, which
// (Debian's, as --uefi-secure-boot is its default when the signed GRUB is
// there) copies shim and the signed GRUB onto the ESP, shim as the
// removable-media loader too; the kernel is Debian's signed one.
func (o *OS) SignedPackagesPartitionImage(ctx context.Context, dir, out string, size int64) error {
	bc, err := qemu.FetchBootChain(ctx)
	if err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	return o.partitionImage(ctx, dir, out, size, grubimage.Debian(), func(tree string) error {
		for dst, src := range map[string]string{ShimSignedPath: bc.Shim, GrubSignedPath: bc.Grub} {
			p := filepath.Join(tree, dst)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return fmt.Errorf("osimage: %w", err)
			}
			if err := copyFile(src, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// partitionImage is PartitionImageFor; extra, when set, adds to the tree
// before the file system is made.
func (o *OS) partitionImage(ctx context.Context, dir, out string, size int64, f grubimage.Flavor, extra func(tree string) error) error {
	tree := filepath.Join(dir, "partition-root-"+f.Name)
	if err := grubimage.TreeFor(ctx, tree, f); err != nil {
		return err
	}
	if extra != nil {
		if err := extra(tree); err != nil {
			return err
		}
	}
	for dst, src := range map[string]string{"vmlinuz-": o.Kernel, "initrd.img-": o.Initrd} {
		if err := copyFile(src, filepath.Join(tree, "boot", dst+grubimage.KernelVersion)); err != nil {
			return err
		}
	}
	def := "GRUB_DEFAULT=0\nGRUB_TIMEOUT=0\nGRUB_DISTRIBUTOR=Testos\nGRUB_CMDLINE_LINUX=\"" + KernelArgs + "\"\n" +
		"GRUB_TERMINAL=serial\nGRUB_SERIAL_COMMAND=\"serial --unit=0 --speed=115200\"\nGRUB_DISABLE_RECOVERY=true\n"
	if err := os.WriteFile(filepath.Join(tree, "etc/default/grub"), []byte(def), 0o644); err != nil {
		return fmt.Errorf("osimage: %w", err)
	}
	return grubimage.Make(ctx, f, tree, out, size)
}

// SoftwareRAIDBIOSDisk writes to out a raw whole-disk image for BIOS as
// one deployed onto software RAID must be: an msdos label with one active
// Linux partition at 1 MiB holding PartitionImage's root file system of
// rootSize bytes (GRUB's tools with mdadm, this OS's kernel), and no boot
// code. The firmware reads the holder disks, never the array, so the
// image's own boot code would be of no use: the agent runs the image's
// grub-install on every holder when Ironic names the root file system
// (instance_info image_rootfs_uuid). It returns that file system's UUID.
func (o *OS) SoftwareRAIDBIOSDisk(ctx context.Context, dir, out string, rootSize int64) (string, error) {
	// PartitionImage's tree is a directory of its own: a caller may build
	// a partition image in dir too.
	sub := filepath.Join(dir, "software-raid")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return "", fmt.Errorf("osimage: %w", err)
	}
	root := filepath.Join(sub, "root.ext4")
	if err := o.PartitionImage(ctx, sub, root, rootSize); err != nil {
		return "", err
	}
	uuid, err := blockdev.BlockUUID(root)
	if err != nil {
		return "", fmt.Errorf("osimage: %w", err)
	}
	if err := sparse(out, firstLBA*sector+rootSize); err != nil {
		return "", err
	}
	mbr := filepath.Join(sub, "mbr")
	if err := os.WriteFile(mbr, mbrSector(make([]byte, sector), uint32(rootSize/sector)), 0o644); err != nil {
		return "", fmt.Errorf("osimage: %w", err)
	}
	if err := place(out, mbr, 0); err != nil {
		return "", err
	}
	return uuid, place(out, root, firstLBA*sector)
}
