package image

import (
	"context"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkWriteImageRaw measures the raw pipeline (HTTP, sha256, zero
// detection, O_DIRECT writes) from a loopback server into a file; the
// bench script measures it against dd on a loop device.
func BenchmarkWriteImageRaw(b *testing.B) {
	benchWrite(b, testImage(256<<20, 50), "disk.raw")
}

// BenchmarkWriteImageQcow2 is the same image as compressed-free qcow2.
func BenchmarkWriteImageQcow2(b *testing.B) {
	benchWrite(b, makeQcow2(b, testImage(256<<20, 50)), "disk.qcow2")
}

func benchWrite(b *testing.B, data []byte, name string) {
	srv := newImageServer(b)
	u := srv.put(name, data)
	target := targetFile(b, 300<<20)
	opts := testOptions(target)
	info := imageInfo("img", []string{u}, sha256hex(data))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := WriteImage(context.Background(), info, target, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkImageHash is the image writer's checksum (newHash) of SHA-256
// and SHA-512 on 4 MiB buffers, each named by the implementation the
// process runs: the agent's own assembly (internal/fastsha2), or in FIPS
// mode the standard library's module. Run it both ways:
//
//	go test -run - -bench ImageHash ./deploy/image
//	GOFIPS140=certified GODEBUG=fips140=on go test -run - -bench ImageHash ./deploy/image
//
// the second with the module the product links (internal/ramdisk.BuildAgent);
// GODEBUG=cpu.avx2=off,cpu.sha=off added to either shows a CPU without
// AVX2 and SHA extensions, such as QEMU's qemu64. scripts/bench-hash.sh
// runs every combination for the performance page.
func BenchmarkImageHash(b *testing.B) {
	buf := make([]byte, 4<<20)
	for _, algo := range []string{"sha256", "sha512"} {
		name := strings.NewReplacer(" ", "_", "(", "", ")", "").Replace(algo + "/" + hashImplementation(algo))
		b.Run(name, func(b *testing.B) {
			h := newHash(algo)
			b.SetBytes(int64(len(buf)))
			cpu0 := cpuSeconds(b)
			for b.Loop() {
				h.Write(buf)
			}
			// CPU time, not wall time: what the hash costs does not move
			// with what else the machine runs.
			if cpu := cpuSeconds(b) - cpu0; cpu > 0 {
				b.ReportMetric(float64(b.N)*float64(len(buf))/cpu/1e6, "MB/cpu-s")
			}
		})
	}
}

// cpuSeconds is the user and system CPU time of this process so far.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
