package blockdev

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
)

// The kernel gives a device-mapper disk no partitions (BLKRRPART and BLKPG
// fail with EINVAL); for a multipath map kpartx makes them, as linear maps
// over the map named "<map>-part<N>" with the DM UUID "part<N>-<map's
// UUID>" (multipath-tools' udev rules), and the partition's path is
// /dev/mapper/<map>-part<N>. The functions here do kpartx's work where
// RereadPartitions, EnsurePartition, RemovePartition and PartitionPath
// would do the kernel's.

// multipathMap tells whether the whole device whose sysfs directory is
// sysDir is a multipath map, and gives its DM name and UUID.
func multipathMap(sysDir string) (name, uuid string, ok bool) {
	u, err := os.ReadFile(filepath.Join(sysDir, "dm", "uuid"))
	if err != nil {
		return "", "", false
	}
	uuid = strings.TrimSpace(string(u))
	if !strings.HasPrefix(strings.ToLower(uuid), "mpath-") {
		return "", "", false
	}
	n, err := os.ReadFile(filepath.Join(sysDir, "dm", "name"))
	if err != nil {
		return "", "", false
	}
	name = strings.TrimSpace(string(n))
	return name, uuid, name != ""
}

// IsMultipathMap says whether dev is a device-mapper multipath map.
func IsMultipathMap(dev string) bool {
	sys, err := SysBlockDir("/", dev)
	if err != nil {
		return false
	}
	_, _, ok := multipathMap(sys)
	return ok
}

// partitionMapName and partitionMapUUID are kpartx's name and UUID of
// partition n of the map.
func partitionMapName(mapName string, n int) string { return fmt.Sprintf("%s-part%d", mapName, n) }
func partitionMapUUID(mapUUID string, n int) string { return fmt.Sprintf("part%d-%s", n, mapUUID) }

// partitionMaps lists the partition maps of the map at sysDir (holders
// whose UUID is "part<N>-<uuid>"), by DM name.
func partitionMaps(sysDir, uuid string) []string {
	ents, err := os.ReadDir(filepath.Join(sysDir, "holders"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		h := filepath.Join(sysDir, "holders", e.Name())
		u, err := os.ReadFile(filepath.Join(h, "dm", "uuid"))
		if err != nil {
			continue
		}
		prefix, rest, ok := strings.Cut(strings.TrimSpace(string(u)), "-")
		if !ok || rest != uuid || !strings.HasPrefix(prefix, "part") {
			continue
		}
		if n, err := os.ReadFile(filepath.Join(h, "dm", "name")); err == nil {
			out = append(out, strings.TrimSpace(string(n)))
		}
	}
	return out
}

// removePartitionMaps removes the given partition maps; one still open
// fails with EBUSY after about 2 s, as RereadPartitions gives up on a
// partition in use.
func removePartitionMaps(ctx context.Context, ctl *devmapper.Control, names []string) error {
	for _, n := range names {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := ctl.Remove(rctx, n)
		cancel()
		if err != nil {
			return fmt.Errorf("removing partition map %s: %w", n, err)
		}
	}
	return nil
}

// createPartitionMap maps partition n (start and length in bytes) of the
// map name/uuid, device number devno ("253:0").
func createPartitionMap(ctx context.Context, ctl *devmapper.Control, name, uuid, devno string, n int, start, length int64) error {
	if start%512 != 0 || length%512 != 0 || length <= 0 {
		return fmt.Errorf("partition %d of %s: start %d and length %d are not whole 512-byte sectors", n, name, start, length)
	}
	t := devmapper.Linear(0, uint64(length/512), devno, uint64(start/512))
	if _, err := ctl.Create(ctx, partitionMapName(name, n), partitionMapUUID(uuid, n), []devmapper.Target{t}); err != nil {
		return fmt.Errorf("partition map %d of %s: %w", n, name, err)
	}
	return nil
}

// partitionBytes is a table entry's start and length in bytes (MBR
// entries are read in 512-byte units and are logical sectors).
func partitionBytes(t PartTable, p PartEntry) (start, length int64) {
	if t.Kind == "dos" {
		return p.Start / 512 * int64(t.SectorSize), p.Size / 512 * int64(t.SectorSize)
	}
	return p.Start, p.Size
}

// syncPartitionMaps is BLKRRPART for the multipath map dev: the partition
// maps are dropped (EBUSY when one is in use) and made again from the
// table on the map.
func syncPartitionMaps(ctx context.Context, dev, sysDir, name, uuid string) error {
	devno, err := os.ReadFile(filepath.Join(sysDir, "dev"))
	if err != nil {
		return fmt.Errorf("partitions of multipath map %s: %w", dev, err)
	}
	t, err := ReadPartTable(dev, sectorSizeOf(dev))
	if err != nil {
		return fmt.Errorf("partitions of multipath map %s: %w", dev, err)
	}
	ctl, err := devmapper.Open()
	if err != nil {
		return fmt.Errorf("partitions of multipath map %s: %w", dev, err)
	}
	defer ctl.Close()
	if err := removePartitionMaps(ctx, ctl, partitionMaps(sysDir, uuid)); err != nil {
		return fmt.Errorf("re-reading the partitions of multipath map %s: %w", dev, err)
	}
	var errs []error
	for _, p := range t.Partitions {
		if p.Size <= 0 || (t.Kind == "dos" && (p.MBRType == 0x05 || p.MBRType == 0x0f || p.MBRType == 0x85)) {
			continue
		}
		start, length := partitionBytes(t, p)
		errs = append(errs, createPartitionMap(ctx, ctl, name, uuid, strings.TrimSpace(string(devno)), p.Number, start, length))
	}
	return errors.Join(errs...)
}

// DropPartitionMaps removes the partition maps of the multipath map dev
// (nothing for other devices), so the map can be opened exclusively to be
// rewritten as a whole (a partition map holds it as a partition never
// holds a disk); RereadPartitions makes them again.
func DropPartitionMaps(ctx context.Context, dev string) error {
	sys, err := SysBlockDir("/", dev)
	if err != nil {
		return nil
	}
	_, uuid, ok := multipathMap(sys)
	if !ok {
		return nil
	}
	parts := partitionMaps(sys, uuid)
	if len(parts) == 0 {
		return nil
	}
	ctl, err := devmapper.Open()
	if err != nil {
		return fmt.Errorf("partitions of multipath map %s: %w", dev, err)
	}
	defer ctl.Close()
	return removePartitionMaps(ctx, ctl, parts)
}

// ensurePartitionMap is BLKPG's add for a multipath map: partition pno
// (start and length in bytes) gets its map unless it has one.
func ensurePartitionMap(sysDir, name, uuid string, pno int, start, length int64) error {
	if slices.Contains(partitionMaps(sysDir, uuid), partitionMapName(name, pno)) {
		return nil
	}
	devno, err := os.ReadFile(filepath.Join(sysDir, "dev"))
	if err != nil {
		return fmt.Errorf("partition %d of multipath map %s: %w", pno, name, err)
	}
	ctl, err := devmapper.Open()
	if err != nil {
		return fmt.Errorf("partition %d of multipath map %s: %w", pno, name, err)
	}
	defer ctl.Close()
	// The wait for the new /dev/dm-N node, bounded as WaitForDevice is.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return createPartitionMap(ctx, ctl, name, uuid, strings.TrimSpace(string(devno)), pno, start, length)
}

// removePartitionMap is BLKPG's delete for a multipath map; a partition
// without a map is already gone.
func removePartitionMap(sysDir, name, uuid string, pno int) error {
	part := partitionMapName(name, pno)
	if !slices.Contains(partitionMaps(sysDir, uuid), part) {
		return nil
	}
	ctl, err := devmapper.Open()
	if err != nil {
		return fmt.Errorf("partition %d of multipath map %s: %w", pno, name, err)
	}
	defer ctl.Close()
	return removePartitionMaps(context.Background(), ctl, []string{part})
}
