package mkfs

import "testing"

// FuzzChooseFAT checks, for any size and sector size, that a layout
// ChooseFAT accepts is one the FAT type's rules allow: the cluster count
// in the type's range, the structures inside the size, the FAT large
// enough for every cluster.
func FuzzChooseFAT(f *testing.F) {
	for _, s := range []int64{0, 1 << 20, 20 << 20, 511 << 20, 550 << 20, 9 << 30, 2 << 40} {
		f.Add(s, 512)
		f.Add(s, 4096)
	}
	f.Add(int64(16<<40), 4096)
	f.Fuzz(func(t *testing.T, size int64, sectorSize int) {
		l, err := ChooseFAT(size, sectorSize)
		if err != nil {
			return
		}
		switch {
		case l.Bits == 12 && l.Clusters <= fat12MaxClusters,
			l.Bits == 16 && l.Clusters > fat12MaxClusters && l.Clusters <= fat16MaxClusters,
			l.Bits == 32 && l.Clusters > fat16MaxClusters && l.Clusters <= fat32MaxClusters:
		default:
			t.Fatalf("FAT%d with %d clusters", l.Bits, l.Clusters)
		}
		root := (l.RootEntries*32 + l.SectorSize - 1) / l.SectorSize
		used := int64(l.Reserved+fatNumFATs*l.FATSectors+root) + int64(l.Clusters)*int64(l.SectorsPerCluster)
		if used > int64(l.TotalSectors) || int64(l.TotalSectors)*int64(l.SectorSize) > size {
			t.Fatalf("layout %+v does not fit %d bytes", l, size)
		}
		if (l.Clusters+2)*l.Bits > l.FATSectors*l.SectorSize*8 {
			t.Fatalf("FAT of %d sectors is too small for %d clusters", l.FATSectors, l.Clusters)
		}
	})
}

// FuzzSwapHeader: any size, page size and label either fails or gives a
// page of the page size with the signature at its end.
func FuzzSwapHeader(f *testing.F) {
	f.Add(int64(64<<10), 4096, "swap1")
	f.Add(int64(1<<20), 65536, "")
	f.Add(int64(-1), 0, "x")
	f.Fuzz(func(t *testing.T, size int64, pageSize int, label string) {
		p, err := SwapHeader(size, pageSize, [16]byte{}, label)
		if err != nil {
			return
		}
		if len(p) != pageSize || string(p[pageSize-10:]) != swapSignature {
			t.Fatalf("%d bytes ending %q", len(p), p[len(p)-10:])
		}
	})
}
