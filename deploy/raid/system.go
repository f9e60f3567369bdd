package raid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/partition"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/programs"
)

// System is what the steps touch: sysfs below Root, mdadm through Runner,
// partition tables, wipes and superblock probes through the deploy
// packages. Tests replace the function fields; nil ones are the real
// thing.
type System struct {
	// Root is the directory /sys is read below ("" is "/").
	Root string
	// Runner runs mdadm.
	Runner blockdev.Runner
	// Guard confines every write: holder disks must pass it, and when it
	// lists allowed devices, arrays with a member elsewhere are not seen.
	Guard *blockdev.Guard
	Log   *slog.Logger

	// WriteTable writes a fresh label with parts on a holder disk (nil:
	// partition.WritePartitionTable).
	WriteTable func(ctx context.Context, g *blockdev.Guard, dev, label string, parts []partition.PlannedPartition) error
	// DeletePartitions removes the numbered partitions from a disk's
	// table, keeping the others (nil: partition.DeletePartitions).
	DeletePartitions func(ctx context.Context, g *blockdev.Guard, dev string, numbers []int) error
	// Wipe zeroes a device's metadata regions, IPA's wipefs -af (nil:
	// blockdev.WipeMetadata).
	Wipe func(ctx context.Context, g *blockdev.Guard, dev string) error
	// Probe names the signature on a device, "linux_raid_member" for an
	// md superblock of any version (nil: blockdev.Probe).
	Probe func(dev string) (string, error)
	// Check is the guard's verdict on a device to write (nil:
	// Guard.Check).
	Check func(dev string) error
	// WaitDevice waits for a device node to appear after a table is
	// written (nil: partition.WaitForDevice).
	WaitDevice func(ctx context.Context, path string) error
	// AddPartition adds a partition to a holder's GPT in its first free
	// space, returning its number (nil: partition.AddPartition).
	AddPartition func(ctx context.Context, g *blockdev.Guard, dev string, size int64, p partition.PlannedPartition, name string) (int, error)
	// FSType names the filesystem on a device, "vfat" for FAT (nil:
	// blockdev.FSType).
	FSType func(dev string) (string, error)
	// RetryDelay is the pause between mdadm --add attempts (0: 1 s).
	RetryDelay time.Duration
}

func (s *System) root() string {
	if s.Root == "" {
		return "/"
	}
	return s.Root
}

func (s *System) log() *slog.Logger { return logging.OrDiscard(s.Log) }

func (s *System) writeTable(ctx context.Context, dev, label string, parts []partition.PlannedPartition) error {
	if s.WriteTable != nil {
		return s.WriteTable(ctx, s.Guard, dev, label, parts)
	}
	return partition.WritePartitionTable(ctx, s.Guard, dev, label, parts)
}

func (s *System) deletePartitions(ctx context.Context, dev string, numbers []int) error {
	if s.DeletePartitions != nil {
		return s.DeletePartitions(ctx, s.Guard, dev, numbers)
	}
	return partition.DeletePartitions(ctx, s.Guard, dev, numbers)
}

// wipe zeroes dev's metadata through the agent's guard, which passes an
// md array exactly when every member is allowed.
func (s *System) wipe(ctx context.Context, dev string) error {
	if s.Wipe != nil {
		return s.Wipe(ctx, s.Guard, dev)
	}
	_, err := blockdev.WipeMetadata(ctx, s.Guard, dev)
	return err
}

func (s *System) check(dev string) error {
	if s.Check != nil {
		return s.Check(dev)
	}
	return s.Guard.Check(dev)
}

func (s *System) waitDevice(ctx context.Context, path string) error {
	if s.WaitDevice != nil {
		return s.WaitDevice(ctx, path)
	}
	return partition.WaitForDevice(ctx, path)
}

func (s *System) probe(dev string) (string, error) {
	if s.Probe != nil {
		return s.Probe(dev)
	}
	return blockdev.Probe(dev)
}

func (s *System) mdadm(ctx context.Context, args ...string) ([]byte, error) {
	if s.Runner == nil {
		return nil, errors.New("no program runner for mdadm")
	}
	return s.Runner.Run(ctx, "mdadm", args...)
}

// isMDMember reports whether dev carries an md superblock (IPA's
// `mdadm --examine` succeeding), read in Go at every version's offset.
func (s *System) isMDMember(dev string) (bool, error) {
	sig, err := s.probe(dev)
	if err != nil {
		return false, fmt.Errorf("probe %s for an md superblock: %w", dev, err)
	}
	return sig == "linux_raid_member", nil
}

// sysBlock is /sys/class/block below the root.
func (s *System) sysBlock(name string) string {
	return filepath.Join(s.root(), "sys/class/block", name)
}

// MDDevices lists the md arrays the kernel knows (/sys/block/md*, active
// or not), in md number order: what IPA's lsblk of types raid* and md
// finds, minus partitions of arrays, which go with their array.
func (s *System) MDDevices() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.root(), "sys/block"))
	if err != nil {
		return nil, fmt.Errorf("list md devices: %w", err)
	}
	var out []string
	for _, e := range ents {
		if n, ok := mdNumber(e.Name()); ok && n >= 0 {
			out = append(out, e.Name())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := mdNumber(out[i])
		b, _ := mdNumber(out[j])
		return a < b
	})
	for i := range out {
		out[i] = "/dev/" + out[i]
	}
	return out, nil
}

// mdNumber is N of "mdN".
func mdNumber(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "md")
	if !ok || rest == "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && strconv.Itoa(n) == rest
}

// Components are the member devices of an md array (its slaves in
// sysfs), in name order.
func (s *System) Components(md string) []string {
	ents, err := os.ReadDir(filepath.Join(s.sysBlock(filepath.Base(md)), "slaves"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, "/dev/"+e.Name())
	}
	return out
}

// HolderDisk is the disk a member lives on: the disk of a partition, or
// the member itself when it is a whole disk.
func (s *System) HolderDisk(member string) string {
	dir := s.sysBlock(filepath.Base(member))
	if !blockdev.IsPartition(dir) {
		return member
	}
	return "/dev/" + filepath.Base(filepath.Dir(blockdev.ResolveLink(dir)))
}

// HolderDisks are the disks under an md array, each once, in order.
func (s *System) HolderDisks(md string) []string {
	var out []string
	for _, c := range s.Components(md) {
		if h := s.HolderDisk(c); !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// partitionNumber is a partition's number from sysfs (0 if unknown).
func (s *System) partitionNumber(part string) int {
	n, err := blockdev.ReadSysInt(filepath.Join(s.sysBlock(filepath.Base(part)), "partition"))
	if err != nil {
		return 0
	}
	return int(n)
}

// allowed reports whether the guard's allow list (if any) names dev.
func (s *System) allowed(dev string) bool {
	list := s.Guard.Allowed()
	if len(list) == 0 {
		return true
	}
	rd := blockdev.ResolveLink(dev)
	for _, a := range list {
		if blockdev.ResolveLink(a) == rd {
			return true
		}
	}
	return false
}

// ours reports whether every holder of md is a disk the agent may touch.
func (s *System) ours(md string) bool {
	for _, h := range s.HolderDisks(md) {
		if !s.allowed(h) {
			return false
		}
	}
	return true
}

// Arrays are the md arrays the steps may act on: MDDevices with members,
// minus, for a confined agent, those with a member outside the allowed
// devices.
func (s *System) Arrays() ([]string, error) {
	all, err := s.MDDevices()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, md := range all {
		if len(s.Components(md)) == 0 {
			// A stopped array's node lingering without members: nothing
			// to stop or zero, and gone by the next look.
			continue
		}
		if s.ours(md) {
			out = append(out, md)
		} else {
			s.log().Info("ignoring md array with members outside the allowed devices", "device", md, "holders", s.HolderDisks(md))
		}
	}
	return out, nil
}

// VolumeName is IPA's get_volume_name_of_raid_device: the array name
// mdadm --detail reports, without the "host:" prefix and the comment
// after it; "" when mdadm fails or names none.
func (s *System) VolumeName(ctx context.Context, md string) string {
	out, err := s.mdadm(ctx, "--detail", md)
	if err != nil {
		s.log().Warn("cannot read the volume name of an md device", "device", md, "error", err)
		return ""
	}
	return ParseDetailName(out)
}

// ParseDetailName reads the Name line of `mdadm --detail` (or
// --examine) output as IPA does: "Name : host:name (comment)" or
// "Name : name (comment)" gives name.
func ParseDetailName(out []byte) string {
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "Name") {
			continue
		}
		parts := strings.Split(line, ":")
		var cand string
		switch len(parts) {
		case 3:
			cand = parts[2]
		case 2:
			cand = strings.TrimSpace(parts[1])
		default:
			return ""
		}
		cand, _, _ = strings.Cut(cand, " ")
		return cand
	}
	return ""
}

// Assemble is IPA's _md_scan_and_assemble at start-up (and delete's
// rescan): `mdadm --assemble --scan --verbose`, which starts every array
// whose members are present. It never fails the caller: mdadm exits
// non-zero when there was nothing to assemble. A confined agent does not
// assemble: arrays on the host's own disks are not its business.
func (s *System) Assemble(ctx context.Context) {
	if len(s.Guard.Allowed()) > 0 {
		s.log().Info("not assembling md arrays: the agent is confined to its allowed devices")
		return
	}
	if _, err := s.mdadm(ctx, "--assemble", "--scan", "--verbose"); err != nil {
		var missing *programs.MissingError
		if errors.As(err, &missing) {
			s.log().Warn("mdadm has not been found, RAID devices will not be supported", "error", err)
			return
		}
		s.log().Info("no new RAID devices assembled", "detail", err)
		return
	}
	arrays, _ := s.MDDevices()
	s.log().Info(EventArraysAssembled, "arrays", arrays)
}
