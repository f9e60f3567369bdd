package collector

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkCollectFixture measures the whole inventory over each recorded
// tree (file reads only, no netlink).
func BenchmarkCollectFixture(b *testing.B) {
	for _, m := range fixtureMachines(b) {
		b.Run(m, func(b *testing.B) {
			opts := Options{Root: filepath.Join(fixturesDir, m, "root")}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Collect(context.Background(), opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCollectLive measures the inventory of this machine, netlink and
// ethtool included.
func BenchmarkCollectLive(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Collect(context.Background(), Options{Root: "/"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInspectionCollectors measures each inspection collector of
// IPA's that reads files, over the server fixture (extra-hardware given
// the inventory, as the agent does).
func BenchmarkInspectionCollectors(b *testing.B) {
	ctx := context.Background()
	opts := Options{Root: filepath.Join(fixturesDir, "server-sas-md-bond", "root")}
	inv, err := Collect(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"dmi-decode", func() error { _, err := DMIDecode(ctx, opts); return err }},
		{"usb-devices", func() error { _, err := USBDevices(ctx, opts); return err }},
		{"extra-hardware", func() error { _, err := ExtraHardware(ctx, opts, inv); return err }},
		{"pci-devices", func() error { _, err := PCIDevices(ctx, opts); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.run(); err != nil && c.name != "pci-devices" {
					b.Fatal(err)
				}
			}
		})
	}
}
