package erase

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// Overwrite writes passes random passes and, with zeroize, a final pass
// of zeroes over the whole device (IPA's shred --force [--zero]
// --iterations N). The random data comes from ChaCha8 seeded from the
// kernel's CSPRNG, fast enough not to slow the disk.
func (e *Eraser) Overwrite(ctx context.Context, dev string, passes int, zeroize bool) (DeviceResult, error) {
	d, err := blockdev.Open(e.Guard, dev)
	if err != nil {
		return DeviceResult{}, err
	}
	defer d.Close()
	total := passes
	if zeroize {
		total++
	}
	const chunk = 4 * blockdev.MiB
	buf, free, err := blockdev.AlignedBuffer(chunk)
	if err != nil {
		return DeviceResult{}, err
	}
	defer free()
	var written int64
	for pass := 1; pass <= total; pass++ {
		random := pass <= passes
		var rng *mrand.ChaCha8
		if random {
			var seed [32]byte
			if _, err := rand.Read(seed[:]); err != nil {
				return DeviceResult{}, fmt.Errorf("seed random pass: %w", err)
			}
			rng = mrand.NewChaCha8(seed)
		} else {
			clear(buf)
		}
		for off := int64(0); off < d.Size; {
			if err := ctx.Err(); err != nil {
				return DeviceResult{}, err
			}
			n := int64(chunk)
			if d.Size-off < n {
				n = d.Size - off
			}
			if random {
				_, _ = rng.Read(buf[:n])
			}
			if _, err := d.File.WriteAt(buf[:n], off); err != nil {
				return DeviceResult{}, fmt.Errorf("overwrite pass %d/%d of %s at byte %d: %w", pass, total, dev, off, err)
			}
			off += n
			written += n
			if e.Progress != nil {
				e.Progress(dev, pass, total, off, d.Size)
			}
		}
		if err := d.File.Sync(); err != nil {
			return DeviceResult{}, fmt.Errorf("sync %s after pass %d: %w", dev, pass, err)
		}
	}
	detail := fmt.Sprintf("%d random pass(es)", passes)
	if zeroize {
		detail += " + zero pass"
	}
	if d.IsBlock() {
		if err := blockdev.RereadPartitions(ctx, d.File); err != nil {
			return DeviceResult{}, err
		}
	}
	return DeviceResult{Method: MethodOverwrite, Detail: detail, Bytes: written}, nil
}
