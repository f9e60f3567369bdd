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
