package collector

import (
	"context"
	"testing"
)

// BenchmarkDisksFixture measures one disks[] collection over the hand-made
// QEMU tree (6 listed disks, 13 block devices), by each route.
func BenchmarkDisksFixture(b *testing.B) {
	for _, c := range []struct {
		name   string
		ignore bool
	}{{"udev", false}, {"sysfs-only", true}} {
		b.Run(c.name, func(b *testing.B) {
			opts := Options{Root: fixtureRoot("qemu"), IgnoreUdev: c.ignore}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Disks(context.Background(), opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDisksLive measures disks[] of this machine.
func BenchmarkDisksLive(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Disks(context.Background(), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
