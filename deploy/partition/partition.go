package partition

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/diskfs/go-diskfs/partition"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	fsmake "github.com/ironic-go/ironic-agent/deploy/mkfs"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// Partition images (IPA's partition_utils.work_on_disk and
// disk_utils.make_partitions, protocol notes 8.4): the agent lays out the
// disk itself and writes the image, a bare filesystem, into the root
// partition. The table is written in Go (go-diskfs) with the geometry
// IPA's `parted -a optimal -s <dev> -- unit MiB mklabel ... mkpart ...`
// produces; FAT and swap are written in Go (deploy/mkfs), and only
// mkfs.ext2/3/4 and mkfs.xfs are run, as no Go path exists for them.

// Partition roles: the keys of IPA's part_dict, reported to Ironic under
// "partitions" by get_partition_uuids.
const (
	RoleESP         = "efi system partition"
	RoleBIOSBoot    = "BIOS Boot partition"
	RolePReP        = "PReP Boot partition"
	RoleEphemeral   = "ephemeral"
	RoleSwap        = "swap"
	RoleConfigDrive = "configdrive"
	RoleRoot        = "root"
)

// IPA's sizes: [disk_utils]efi_system_partition_size and
// bios_boot_partition_size, and the fixed PReP size, in MiB.
const (
	espMiB      = 550
	biosBootMiB = 1
	prepMiB     = 8
)

// PartitionLayout is what make_partitions is given.
type PartitionLayout struct {
	RootMiB        int64
	SwapMiB        int64
	EphemeralMiB   int64
	ConfigDriveMiB int64
	// BootMode is "bios" or "uefi".
	BootMode string
	// DiskLabel is "msdos" or "gpt"; "" picks gpt for UEFI, else msdos.
	DiskLabel string
	// CPUArch is the inventory's architecture (ppc64* gets a PReP
	// partition instead of a BIOS boot partition).
	CPUArch string
}

// PlannedPartition is one partition of the layout.
type PlannedPartition struct {
	Role   string
	Number int
	Start  int64 // bytes from the start of the disk
	Size   int64 // bytes
	// FSType is parted's fs-type argument ("fat32", "linux-swap" or ""),
	// which decides the partition type as parted sets it.
	FSType string
	// Flags are the parted flags set on: "boot", "bios_grub", "prep".
	Flags []string
}

func (p PlannedPartition) hasFlag(f string) bool {
	for _, x := range p.Flags {
		if x == f {
			return true
		}
	}
	return false
}

// PlanPartitions computes IPA's layout: a 1 MiB lead-in, then in this
// order the ESP (UEFI), the BIOS boot partition (BIOS on GPT, not ppc64),
// the PReP partition (ppc64 BIOS), ephemeral, swap, config drive, and the
// root partition last so that growroot can extend it. Partitions follow
// each other without gaps, each starting on a MiB boundary. It returns
// the disk label to write.
func PlanPartitions(l PartitionLayout) (string, []PlannedPartition, error) {
	label := l.DiskLabel
	if label == "" {
		label = "msdos"
		if l.BootMode == "uefi" {
			label = "gpt"
		}
	}
	if label != "msdos" && label != "gpt" {
		return "", nil, fmt.Errorf("unsupported disk label %q: want msdos or gpt", l.DiskLabel)
	}
	if l.BootMode != "bios" && l.BootMode != "uefi" {
		return "", nil, fmt.Errorf("unsupported boot mode %q: want bios or uefi", l.BootMode)
	}
	for _, v := range []struct {
		name string
		mib  int64
	}{{"root_mb", l.RootMiB}, {"swap_mb", l.SwapMiB}, {"ephemeral_mb", l.EphemeralMiB}, {"configdrive size", l.ConfigDriveMiB}} {
		if v.mib < 0 || v.mib > 1<<40 {
			return "", nil, fmt.Errorf("%s %d MiB is out of range", v.name, v.mib)
		}
	}
	if l.RootMiB <= 0 {
		return "", nil, fmt.Errorf("root_mb must be positive, got %d", l.RootMiB)
	}
	ppc := strings.HasPrefix(l.CPUArch, "ppc64")
	var parts []PlannedPartition
	next := int64(1) // MiB: room for the partition table
	add := func(role string, sizeMiB int64, fsType string, flags ...string) {
		parts = append(parts, PlannedPartition{Role: role, Number: len(parts) + 1, Start: next * blockdev.MiB, Size: sizeMiB * blockdev.MiB, FSType: fsType, Flags: flags})
		next += sizeMiB
	}
	if l.BootMode == "uefi" {
		add(RoleESP, espMiB, "fat32", "boot")
	}
	if l.BootMode == "bios" && label == "gpt" && !ppc {
		add(RoleBIOSBoot, biosBootMiB, "", "bios_grub")
	}
	if ppc && l.BootMode == "bios" {
		if label == "msdos" {
			add(RolePReP, prepMiB, "", "boot", "prep")
		} else {
			add(RolePReP, prepMiB, "", "prep")
		}
	}
	if l.EphemeralMiB > 0 {
		add(RoleEphemeral, l.EphemeralMiB, "")
	}
	if l.SwapMiB > 0 {
		add(RoleSwap, l.SwapMiB, "linux-swap")
	}
	if l.ConfigDriveMiB > 0 {
		add(RoleConfigDrive, l.ConfigDriveMiB, "")
	}
	if !ppc && l.BootMode == "bios" && label == "msdos" {
		add(RoleRoot, l.RootMiB, "", "boot")
	} else {
		add(RoleRoot, l.RootMiB, "")
	}
	if label == "msdos" && len(parts) > 4 {
		return "", nil, fmt.Errorf("an msdos label holds 4 primary partitions, the layout needs %d (%s)", len(parts), roleList(parts))
	}
	return label, parts, nil
}

func roleList(parts []PlannedPartition) string {
	var s []string
	for _, p := range parts {
		s = append(s, p.Role)
	}
	return strings.Join(s, ", ")
}

// Partition type GUIDs parted gives GPT partitions.
const (
	gptPReP = "9E1A2D38-C612-4316-AA26-8B49521E5A8B"
)

// gptType is the type parted writes for a partition on GPT: the boot flag
// makes an ESP, bios_grub and prep their own types, else the fs-type.
func gptType(p PlannedPartition) gpt.Type {
	switch {
	case p.hasFlag("bios_grub"):
		return gpt.BIOSBoot
	case p.hasFlag("prep"):
		return gptPReP
	case p.hasFlag("boot"):
		return gpt.EFISystemPartition
	case p.FSType == "fat32":
		return gpt.MicrosoftBasicData
	case p.FSType == "linux-swap":
		return gpt.LinuxSwap
	}
	return gpt.LinuxFilesystem
}

// mbrType is the type byte parted writes on an msdos label.
func mbrType(p PlannedPartition) mbr.Type {
	switch {
	case p.hasFlag("prep"):
		return 0x41
	case p.FSType == "fat32":
		return mbr.Fat32LBA
	case p.FSType == "linux-swap":
		return mbr.LinuxSwap
	}
	return mbr.Linux
}

// checkFits refuses a layout that does not fit the disk, as parted would
// ("the location is outside of the device"), naming both sizes.
func checkFits(dev, label string, parts []PlannedPartition, size int64, sector int) error {
	last := parts[len(parts)-1]
	end := last.Start + last.Size
	limit := size
	if label == "gpt" {
		limit = size - 33*int64(sector) // backup entries and header
	}
	if end > limit {
		return fmt.Errorf("the partitions (%s) need %d MiB but %s holds %d MiB", roleList(parts), (end+blockdev.MiB-1)/blockdev.MiB, dev, size/blockdev.MiB)
	}
	if label == "msdos" && end/int64(sector) > 1<<32 {
		return fmt.Errorf("the partitions end at %d MiB, beyond the 2 TiB an msdos label on %s can address", end/blockdev.MiB, dev)
	}
	return nil
}

// writePartitionTable writes a fresh label with parts onto dev with
// go-diskfs and has the kernel re-read it. An msdos label gets a random
// disk identifier, as parted gives it.
func writePartitionTable(ctx context.Context, g *blockdev.Guard, dev, label string, parts []PlannedPartition, size int64, sector int) error {
	if err := g.Check(dev); err != nil {
		return err
	}
	if err := checkFits(dev, label, parts, size, sector); err != nil {
		return err
	}
	d, err := openForPartitioning(dev, size, sector)
	if err != nil {
		return err
	}
	defer d.Close()
	s := int64(sector)
	var table partition.Table
	switch label {
	case "gpt":
		t := &gpt.Table{LogicalSectorSize: sector, PhysicalSectorSize: sector, ProtectiveMBR: true}
		for _, p := range parts {
			t.Partitions = append(t.Partitions, &gpt.Partition{
				Index: p.Number,
				Start: uint64(p.Start / s),
				End:   uint64((p.Start+p.Size)/s - 1),
				Size:  uint64(p.Size),
				Type:  gptType(p),
				// parted's mkpart takes the partition name first on
				// GPT; IPA passes "primary".
				Name: "primary",
			})
		}
		table = t
	default:
		t := &mbr.Table{LogicalSectorSize: sector, PhysicalSectorSize: sector}
		for i := 1; i <= 4; i++ {
			mp := &mbr.Partition{Index: i, Type: mbr.Empty}
			if i <= len(parts) {
				p := parts[i-1]
				mp = &mbr.Partition{Index: i, Type: mbrType(p), Bootable: p.hasFlag("boot"),
					Start: uint32(p.Start / s), Size: uint32(p.Size / s)}
				// Past what CHS can address: the conventional
				// 1023/254/63 marker, as parted writes it.
				mp.StartHead, mp.StartSector, mp.StartCylinder = 0xfe, 0xff, 0xff
				mp.EndHead, mp.EndSector, mp.EndCylinder = 0xfe, 0xff, 0xff
			}
			t.Partitions = append(t.Partitions, mp)
		}
		table = t
	}
	// Written without go-diskfs' re-read: the kernel learns the partitions
	// below (re-read, then BLKPG where it has no parser for the label).
	f, err := writeTable(d, table, dev, size)
	if err != nil {
		return err
	}
	defer f.Close()
	if label == "msdos" {
		var id [4]byte
		for binary.LittleEndian.Uint32(id[:]) == 0 {
			if _, err := rand.Read(id[:]); err != nil {
				return err
			}
		}
		if _, err := f.WriteAt(id[:], 440); err != nil {
			return fmt.Errorf("writing the disk identifier of %s (4 bytes at offset 440): %w", dev, err)
		}
	} else {
		// The protective entry as parted writes it: CHS 0/0/2 to the
		// maximum, covering the disk up to 0xffffffff sectors (go-diskfs
		// leaves CHS zero and truncates the size of larger disks).
		e := []byte{0x00, 0x00, 0x02, 0x00, 0xee, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0}
		binary.LittleEndian.PutUint32(e[12:16], uint32(min(size/s-1, 0xffffffff)))
		if _, err := f.WriteAt(e, 446); err != nil {
			return fmt.Errorf("writing the protective MBR entry of %s (16 bytes at offset 446): %w", dev, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dev, err)
	}
	return blockdev.RereadPartitions(ctx, f)
}

// validFSName keeps the mkfs.<format> program name a plain name: the
// format comes from the node, and must not name a path.
func validFSName(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// PartitionImageOptions configures WorkOnDisk.
type PartitionImageOptions struct {
	Guard  *blockdev.Guard
	Device string
	Layout PartitionLayout
	// EphemeralFormat is the filesystem made on the ephemeral partition
	// (mkfs.<format>); "" means ext4, Ironic's [pxe]default_ephemeral_format.
	EphemeralFormat string
	// PreserveEphemeral keeps the existing partition table and the
	// ephemeral partition's contents (a rebuild with --preserve-ephemeral).
	PreserveEphemeral bool
	// ConfigDrive is the configdrive parameter (base64 gzip ISO or URL);
	// "" for none. HTTPClient fetches a URL.
	ConfigDrive string
	HTTPClient  *http.Client
	// WriteRoot writes the image into the root partition; nil leaves it
	// empty.
	WriteRoot func(ctx context.Context, rootPartition string) error
	// Runner runs mkfs.<format> for ext2/3/4 and xfs (FAT and swap are
	// written in Go, deploy/mkfs); nil runs it.
	Runner blockdev.Runner
	Logger *slog.Logger
}

// PartitionImageResult is what WorkOnDisk made.
type PartitionImageResult struct {
	Label      string
	Partitions []PlannedPartition
	// Paths maps each role to its device node (IPA's part_dict).
	Paths    map[string]string
	RootUUID string
	ESPUUID  string // "" without an ESP
	PRePUUID string // "" without a PReP partition
}

// UUIDs is the dict IPA's work_on_disk returns and get_partition_uuids
// reports: "partitions", "root uuid", "efi system partition uuid" (null
// without an ESP) and, on ppc64, "PReP Boot partition uuid".
func (r *PartitionImageResult) UUIDs(cpuArch string) map[string]any {
	parts := map[string]any{}
	for k, v := range r.Paths {
		parts[k] = v
	}
	out := map[string]any{"partitions": parts, "root uuid": r.RootUUID, "efi system partition uuid": nil}
	if r.ESPUUID != "" {
		out["efi system partition uuid"] = r.ESPUUID
	}
	if strings.HasPrefix(cpuArch, "ppc") {
		out["PReP Boot partition uuid"] = nil
		if r.PRePUUID != "" {
			out["PReP Boot partition uuid"] = r.PRePUUID
		}
	}
	return out
}

// WorkOnDisk partitions dev for a partition image and fills it: metadata
// wipe and a fresh table (unless preserving the ephemeral partition, when
// the existing table must match the layout), a FAT filesystem labelled
// efi-part on the ESP, the config drive, the image in the root partition,
// swap labelled swap1, the ephemeral filesystem labelled ephemeral0 (not
// when preserved); then the UUIDs Ironic asks for.
func WorkOnDisk(ctx context.Context, o PartitionImageOptions) (*PartitionImageResult, error) {
	log := logging.OrDiscard(o.Logger)
	runner := o.Runner
	if runner == nil {
		runner = blockdev.ExecRunner{}
	}
	if o.Guard == nil {
		return nil, errors.New("no device guard configured")
	}
	dev := o.Device
	if err := o.Guard.Check(dev); err != nil {
		return nil, err
	}
	format := o.EphemeralFormat
	if format == "" {
		format = "ext4"
	}
	if o.Layout.EphemeralMiB > 0 && !validFSName(format) {
		return nil, fmt.Errorf("invalid ephemeral_format %q: want a filesystem name such as ext4", format)
	}
	var iso []byte
	layout := o.Layout
	if o.ConfigDrive != "" {
		var err error
		if iso, err = loadConfigDrive(ctx, o.HTTPClient, o.ConfigDrive, maxConfigDriveDownload); err != nil {
			return nil, err
		}
		layout.ConfigDriveMiB = (int64(len(iso)) + blockdev.MiB - 1) / blockdev.MiB
	}
	label, parts, err := PlanPartitions(layout)
	if err != nil {
		return nil, err
	}
	bd, err := blockdev.Open(o.Guard, dev)
	if err != nil {
		return nil, err
	}
	size, sector := bd.Size, bd.SectorSize
	bd.Close()
	if int64(blockdev.MiB)%int64(sector) != 0 {
		return nil, fmt.Errorf("%s has %d-byte sectors, which do not divide a MiB", dev, sector)
	}

	if parts, err = partitionDisk(ctx, o, log, label, parts, size, sector); err != nil {
		return nil, err
	}
	res := &PartitionImageResult{Label: label, Partitions: parts, Paths: map[string]string{}}
	for _, p := range parts {
		path := blockdev.PartitionPath(dev, p.Number)
		if err := kernelKnowsPartition(dev, p.Number, sector); err != nil {
			return nil, err
		}
		if err := waitForDevice(ctx, path); err != nil {
			return nil, err
		}
		if err := checkPartitionDevice(path, p); err != nil {
			return nil, err
		}
		res.Paths[p.Role] = path
	}
	if err := fillPartitions(ctx, o, runner, log, res.Paths, iso, format); err != nil {
		return nil, err
	}
	if err := rescanPartitions(ctx, dev, parts, sector, res.Paths); err != nil {
		return nil, err
	}
	if err := readPartitionUUIDs(res); err != nil {
		return nil, err
	}
	return res, nil
}

// partitionDisk writes the planned table (after a metadata wipe), or, to
// preserve the ephemeral partition, takes the disk's existing layout. It
// returns the partitions as they are on the disk.
func partitionDisk(ctx context.Context, o PartitionImageOptions, log *slog.Logger, label string, parts []PlannedPartition, size int64, sector int) ([]PlannedPartition, error) {
	dev := o.Device
	if o.PreserveEphemeral {
		parts, err := existingLayout(dev, label, parts, sector)
		if err != nil {
			return nil, fmt.Errorf("preserve_ephemeral: %w", err)
		}
		log.Info("preserving the partition table and the ephemeral partition", "device", dev)
		return parts, nil
	}
	if err := checkFits(dev, label, parts, size, sector); err != nil {
		return nil, err
	}
	if _, err := blockdev.WipeMetadata(ctx, o.Guard, dev); err != nil {
		return nil, fmt.Errorf("metadata wipe of %s: %w", dev, err)
	}
	if err := writePartitionTable(ctx, o.Guard, dev, label, parts, size, sector); err != nil {
		return nil, err
	}
	log.Info("partitioned disk", "device", dev, "label", label, "partitions", roleList(parts))
	return parts, nil
}

// fillPartitions writes each partition of paths (by role) in IPA's order:
// the ESP's FAT, the config drive, the root (o.WriteRoot), swap and the
// ephemeral filesystem (unless preserved).
func fillPartitions(ctx context.Context, o PartitionImageOptions, runner blockdev.Runner, log *slog.Logger, paths map[string]string, iso []byte, format string) error {
	if esp, ok := paths[RoleESP]; ok {
		// IPA's mkfs.vfat -n efi-part, in Go.
		if err := fsmake.FAT(ctx, o.Guard, esp, "efi-part"); err != nil {
			return fmt.Errorf("EFI system partition: %w", err)
		}
	}
	if cd, ok := paths[RoleConfigDrive]; ok {
		if err := writeImageToPartition(o.Guard, cd, iso); err != nil {
			return fmt.Errorf("config drive partition: %w", err)
		}
		log.Info("config drive written", "partition", cd, "bytes", len(iso))
	}
	if o.WriteRoot != nil {
		if err := o.WriteRoot(ctx, paths[RoleRoot]); err != nil {
			return err
		}
	}
	if swap, ok := paths[RoleSwap]; ok {
		// IPA's mkswap -L swap1, in Go.
		if err := fsmake.Swap(ctx, o.Guard, swap, "swap1"); err != nil {
			return fmt.Errorf("swap partition: %w", err)
		}
	}
	if eph, ok := paths[RoleEphemeral]; ok && !o.PreserveEphemeral {
		if err := makeEphemeral(ctx, o.Guard, runner, eph, format); err != nil {
			return fmt.Errorf("ephemeral partition: %w", err)
		}
	}
	return nil
}

// makeEphemeral makes the ephemeral partition's filesystem, labelled
// ephemeral0: FAT in Go, anything else with its mkfs program.
func makeEphemeral(ctx context.Context, g *blockdev.Guard, runner blockdev.Runner, eph, format string) error {
	if format == "vfat" || format == "msdos" {
		// IPA's mkfs.<vfat|msdos> -n ephemeral0, in Go.
		return fsmake.FAT(ctx, g, eph, "ephemeral0")
	}
	args := []string{"mkfs." + format}
	if format == "ext3" || format == "ext4" {
		args = append(args, "-F")
	}
	args = append(args, "-L", "ephemeral0")
	if err := g.Check(eph); err != nil {
		return err
	}
	if _, err := runner.Run(ctx, args[0], append(args[1:], eph)...); err != nil {
		return err
	}
	return nil
}

// rescanPartitions re-reads dev's table (IPA's trigger_device_rescan) so
// udev sees the new filesystems; a kernel without a parser for the label
// drops the partitions on a re-read, so they are added back with BLKPG
// and waited for.
func rescanPartitions(ctx context.Context, dev string, parts []PlannedPartition, sector int, paths map[string]string) error {
	if f, err := os.Open(dev); err == nil {
		_ = blockdev.RereadPartitions(ctx, f)
		f.Close()
	}
	for _, p := range parts {
		if err := kernelKnowsPartition(dev, p.Number, sector); err != nil {
			return err
		}
		if err := waitForDevice(ctx, paths[p.Role]); err != nil {
			return err
		}
	}
	return nil
}

// readPartitionUUIDs records the filesystem UUIDs of the root, the ESP and
// the PReP partition in res.
func readPartitionUUIDs(res *PartitionImageResult) error {
	var err error
	if res.RootUUID, err = blockdev.BlockUUID(res.Paths[RoleRoot]); err != nil {
		return err
	}
	if esp, ok := res.Paths[RoleESP]; ok {
		if res.ESPUUID, err = blockdev.BlockUUID(esp); err != nil {
			return err
		}
	}
	if prep, ok := res.Paths[RolePReP]; ok {
		if res.PRePUUID, err = blockdev.BlockUUID(prep); err != nil {
			return err
		}
	}
	return nil
}

// existingLayout is the plan as the table already on dev holds it, for
// preserve_ephemeral: IPA writes no table then and fills the partitions of
// the old one by number. The ephemeral partition, and those before it,
// must be exactly where the plan puts them, or the data kept would not be
// the ephemeral filesystem; the later ones (swap, config drive, root) are
// used where the old table has them (all of them when there is no
// ephemeral partition, as IPA does).
func existingLayout(dev, label string, parts []PlannedPartition, sector int) ([]PlannedPartition, error) {
	t, err := blockdev.ReadPartTable(dev, sector)
	if err != nil {
		return nil, err
	}
	want := map[string]string{"gpt": "gpt", "msdos": "dos"}[label]
	if t.Kind != want {
		kind := t.Kind
		if kind == "" {
			kind = "none"
		}
		return nil, fmt.Errorf("%s has partition table %s, the layout needs %s", dev, kind, label)
	}
	have := map[int]blockdev.PartEntry{}
	for _, p := range t.Partitions {
		if t.Kind == "dos" {
			p.Start, p.Size = p.Start/512*int64(sector), p.Size/512*int64(sector)
		}
		have[p.Number] = p
	}
	fixed := 0 // partitions up to and including ephemeral
	for i, p := range parts {
		if p.Role == RoleEphemeral {
			fixed = i + 1
		}
	}
	out := make([]PlannedPartition, len(parts))
	for i, p := range parts {
		h, ok := have[p.Number]
		if !ok || h.Size <= 0 {
			return nil, fmt.Errorf("%s has no partition %d (%s) where the layout needs it: the disk layout changed", dev, p.Number, p.Role)
		}
		if i < fixed && (h.Start != p.Start || h.Size != p.Size) {
			return nil, fmt.Errorf("partition %d (%s) of %s spans bytes %d-%d, the layout needs %d-%d: the disk layout changed",
				p.Number, p.Role, dev, h.Start, h.Start+h.Size, p.Start, p.Start+p.Size)
		}
		p.Start, p.Size = h.Start, h.Size
		out[i] = p
	}
	return out, nil
}

// checkPartitionDevice makes sure the kernel's partition device has the
// planned size before anything is written to it.
func checkPartitionDevice(path string, p PlannedPartition) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := f.Seek(0, 2)
	if err != nil {
		return fmt.Errorf("size of %s: %w", path, err)
	}
	if n != p.Size {
		return fmt.Errorf("%s (%s) is %d bytes, the table says %d: the kernel's view of the partitions is stale", path, p.Role, n, p.Size)
	}
	return nil
}
