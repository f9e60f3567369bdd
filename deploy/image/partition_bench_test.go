package image

import (
	"context"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/partition"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// BenchmarkWorkOnDisk is a whole partition image deploy on a loop device:
// metadata wipe, table, mkfs of ESP/swap/ephemeral, a 128 MiB raw root
// image streamed from a local HTTP server and verified, UUIDs. SetBytes
// counts the image, so MB/s compares with BenchmarkWriteImageRaw; the
// "layout-only" case leaves root empty and measures the partitioning and
// mkfs overhead alone.
func BenchmarkWorkOnDisk(b *testing.B) {
	looptest.RequireRoot(b, "mkfs.ext4")
	img := testImage(128<<20, 11)
	srv := newImageServerOn(b, partServerLo, partServerHi)
	url := srv.put("root.img", img)
	for _, bc := range []struct {
		name   string
		layout partition.PartitionLayout
		image  bool
	}{
		{"bios-msdos", partition.PartitionLayout{RootMiB: 256, SwapMiB: 64, EphemeralMiB: 64, BootMode: "bios"}, true},
		{"uefi-gpt", partition.PartitionLayout{RootMiB: 256, SwapMiB: 64, BootMode: "uefi"}, true},
		{"layout-only-uefi", partition.PartitionLayout{RootMiB: 256, SwapMiB: 64, EphemeralMiB: 64, BootMode: "uefi"}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dev := looptest.Attach(b, 1<<30, "--partscan")
			g := blockdev.NewGuard([]string{dev})
			opts := testOptions(dev)
			opts.Guard = g
			info := imageInfo("root.img", []string{url}, sha256hex(img))
			o := partition.PartitionImageOptions{Guard: g, Device: dev, Layout: bc.layout}
			if bc.image {
				b.SetBytes(int64(len(img)))
				o.WriteRoot = func(ctx context.Context, root string) error {
					_, err := WriteImage(ctx, info, root, opts)
					return err
				}
			}
			for b.Loop() {
				if _, err := partition.WorkOnDisk(context.Background(), o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
