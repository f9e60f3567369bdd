package partition

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// partedOracle writes the layout with IPA's command line
// (DiskPartitioner.commit: parted -a optimal -s dev -- unit MiB mklabel L
// mkpart primary FS START END [set N FLAG on]...).
func partedOracle(t *testing.T, dev, label string, parts []PlannedPartition) {
	t.Helper()
	looptest.RequireTools(t, "parted")
	args := []string{"-a", "optimal", "-s", dev, "--", "unit", "MiB", "mklabel", label}
	for _, p := range parts {
		start, end := p.Start/blockdev.MiB, (p.Start+p.Size)/blockdev.MiB
		args = append(args, "mkpart", "primary", p.FSType, strconv.FormatInt(start, 10), strconv.FormatInt(end, 10))
		for _, f := range p.Flags {
			args = append(args, "set", strconv.Itoa(p.Number), f, "on")
		}
	}
	looptest.Run(t, "parted", args...)
}

// rawTable returns the bytes of the partition table that must agree with
// parted's: msdos entries without the CHS fields; GPT usable range and
// entries without the unique GUIDs.
func rawTable(t *testing.T, dev, label string) []byte {
	t.Helper()
	head := looptest.ReadAt(t, dev, 0, 34*512)
	var out []byte
	if label == "msdos" {
		if head[510] != 0x55 || head[511] != 0xaa {
			t.Fatalf("%s: no MBR signature", dev)
		}
		for i := 0; i < 4; i++ {
			e := head[446+16*i : 446+16*(i+1)]
			out = append(out, e[0], e[4])
			out = append(out, e[8:16]...)
		}
		return out
	}
	if string(head[512:520]) != "EFI PART" {
		t.Fatalf("%s: no GPT header", dev)
	}
	out = append(out, head[512+40:512+56]...) // first and last usable LBA
	for i := 0; i < 128; i++ {
		e := head[1024+128*i : 1024+128*(i+1)]
		out = append(out, e[0:16]...)   // type GUID
		out = append(out, e[32:128]...) // start, end, attributes, name
	}
	// The protective MBR entry.
	out = append(out, head[446:462]...)
	return out
}

func describeTable(b []byte, label string) string {
	var s []string
	if label == "msdos" {
		for i := 0; i < 4; i++ {
			e := b[10*i : 10*(i+1)]
			s = append(s, fmt.Sprintf("%d: boot=%#x type=%#x start=%d size=%d", i+1, e[0], e[1], binary.LittleEndian.Uint32(e[2:6]), binary.LittleEndian.Uint32(e[6:10])))
		}
		return strings.Join(s, "\n")
	}
	s = append(s, fmt.Sprintf("usable %d-%d", binary.LittleEndian.Uint64(b[0:8]), binary.LittleEndian.Uint64(b[8:16])))
	for i := 0; i < 128; i++ {
		e := b[16+112*i : 16+112*(i+1)]
		if bytes.Equal(e[0:16], make([]byte, 16)) {
			continue
		}
		s = append(s, fmt.Sprintf("%d: type=%s start=%d end=%d attrs=%#x name=%q", i+1, blockdev.GUIDString(e[0:16]),
			binary.LittleEndian.Uint64(e[16:24]), binary.LittleEndian.Uint64(e[24:32]), binary.LittleEndian.Uint64(e[32:40]), decodeUTF16Name(e[40:112])))
	}
	s = append(s, fmt.Sprintf("pmbr % x", b[len(b)-16:]))
	return strings.Join(s, "\n")
}

func decodeUTF16Name(b []byte) string {
	var r []rune
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		r = append(r, rune(c))
	}
	return string(r)
}

// TestPartitionTableMatchesParted writes each layout with our Go code and
// with IPA's parted command on two loop devices of the same size and
// compares the tables byte for byte (what parted decides: types, flags,
// geometry, names).
func TestPartitionTableMatchesParted(t *testing.T) {
	looptest.RequireRoot(t)
	looptest.RequireTools(t, "parted")
	for _, tc := range []struct {
		name   string
		layout PartitionLayout
	}{
		{"bios-msdos", PartitionLayout{RootMiB: 64, SwapMiB: 16, EphemeralMiB: 32, ConfigDriveMiB: 1, BootMode: "bios"}},
		{"bios-msdos-root-only", PartitionLayout{RootMiB: 100, BootMode: "bios"}},
		{"bios-gpt", PartitionLayout{RootMiB: 64, SwapMiB: 16, EphemeralMiB: 32, ConfigDriveMiB: 1, BootMode: "bios", DiskLabel: "gpt"}},
		{"uefi-gpt", PartitionLayout{RootMiB: 64, SwapMiB: 16, ConfigDriveMiB: 2, BootMode: "uefi"}},
		{"ppc64-bios-gpt", PartitionLayout{RootMiB: 64, SwapMiB: 8, BootMode: "bios", DiskLabel: "gpt", CPUArch: "ppc64le"}},
		{"ppc64-bios-msdos", PartitionLayout{RootMiB: 64, BootMode: "bios", CPUArch: "ppc64le"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			label, parts, err := PlanPartitions(tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			ours, theirs := looptest.Attach(t, 1<<30, "--partscan"), looptest.Attach(t, 1<<30, "--partscan")
			g := blockdev.NewGuard([]string{ours})
			if err := writePartitionTable(context.Background(), g, ours, label, parts, 1<<30, 512); err != nil {
				t.Fatal(err)
			}
			partedOracle(t, theirs, label, parts)
			a, b := rawTable(t, ours, label), rawTable(t, theirs, label)
			if !bytes.Equal(a, b) {
				t.Errorf("partition table differs from parted's:\nours:\n%s\nparted:\n%s", describeTable(a, label), describeTable(b, label))
			}
			// Kernels without partition table parsers (this machine's)
			// learn the partitions through BLKPG, as WorkOnDisk does.
			for _, p := range parts {
				if err := kernelKnowsPartition(ours, p.Number, 512); err != nil {
					t.Fatal(err)
				}
				looptest.WaitFor(t, blockdev.PartitionPath(ours, p.Number))
				if err := checkPartitionDevice(blockdev.PartitionPath(ours, p.Number), p); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
