package image

import (
	"context"
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
