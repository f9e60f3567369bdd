package raid

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/partition"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/inventory"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

// tableSummary is what IPA's parted calls decide about a table: each
// partition's number, place, size, type and name.
func tableSummary(t *testing.T, dev string) string {
	t.Helper()
	pt, err := blockdev.ReadPartTable(dev, 512)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, p := range pt.Partitions {
		s = append(s, fmt.Sprintf("%d: %d+%d mbr=%#x gpt=%s name=%q boot=%v", p.Number, p.Start/512, p.Size/512, p.MBRType, p.TypeGUID, p.Name, p.Boot))
	}
	return pt.Kind + "\n" + strings.Join(s, "\n")
}

// TestHolderTableMatchesParted writes a holder's RAID partitions with our
// plan and IPA's parted command lines (create_raid_partition_tables and
// the mkpart of _do_create_configuration, with sgdisk -F's 2048s on
// msdos) on two loop devices of the same size, and compares the tables;
// then removes partition 1 with DeletePartitions and with parted rm.
func TestHolderTableMatchesParted(t *testing.T) {
	looptest.RequireRoot(t, "parted")
	const size = 3 << 30
	for _, tc := range []struct {
		mode, label string
		start       string // IPA's first start
	}{
		{"bios", "msdos", "2048s"},
		{"bios", "gpt", "8MiB"},
		{"uefi", "gpt", "551MiB"},
	} {
		t.Run(tc.mode+"-"+tc.label, func(t *testing.T) {
			ours, theirs := looptest.Attach(t, size, "--partscan"), looptest.Attach(t, size, "--partscan")
			// A 1 GiB RAID-1 then a MAX RAID-0, both over our disk and
			// another (whose table is not written here).
			c := mustConfig(t, `{"logical_disks":[{"size_gb":1,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`)
			disks := []inventory.Disk{{Name: ours, Size: size}, {Name: "/dev/other", Size: size}}
			holders := map[string]Holder{ours: {ours, size, 512}, "/dev/other": {"/dev/other", size, 512}}
			p, err := MakePlan(c.LogicalDisks, disks, holders, tc.mode, tc.label, nil)
			if err != nil {
				t.Fatal(err)
			}
			g := blockdev.NewGuard([]string{ours})
			if err := partition.WritePartitionTable(context.Background(), g, ours, tc.label, p.Disks[0].Partitions); err != nil {
				t.Fatal(err)
			}
			looptest.Run(t, "parted", theirs, "-s", "--", "mklabel", tc.label)
			looptest.Run(t, "parted", theirs, "-s", "-a", "optimal", "--", "mkpart", "primary", tc.start, "1GiB")
			looptest.Run(t, "parted", theirs, "-s", "-a", "optimal", "--", "mkpart", "primary", "1GiB", "-1")
			if a, b := tableSummary(t, ours), tableSummary(t, theirs); a != b {
				t.Errorf("table differs from parted's:\nours:\n%s\nparted:\n%s", a, b)
			}
			if err := partition.DeletePartitions(context.Background(), g, ours, []int{1}); err != nil {
				t.Fatal(err)
			}
			looptest.Run(t, "parted", theirs, "-s", "rm", "1")
			if a, b := tableSummary(t, ours), tableSummary(t, theirs); a != b {
				t.Errorf("after removing partition 1:\nours:\n%s\nparted:\n%s", a, b)
			}
		})
	}
}

// TestBootPartitionMatchesSgdisk adds the boot partition of a holder
// (IPA's prepare_boot_partitions_for_softraid) with partition.AddPartition
// on one loop device and with IPA's sgdisk -F then sgdisk -n/-t/-c on
// another, both holding the same RAID partitions, and compares the tables.
func TestBootPartitionMatchesSgdisk(t *testing.T) {
	looptest.RequireRoot(t, "sgdisk")
	const size = 3 << 30
	for _, mode := range []string{"uefi", "bios"} {
		t.Run(mode, func(t *testing.T) {
			ours, theirs := looptest.Attach(t, size, "--partscan"), looptest.Attach(t, size, "--partscan")
			c := mustConfig(t, `{"logical_disks":[{"size_gb":1,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`)
			var p Plan
			for _, dev := range []string{ours, theirs} {
				disks := []inventory.Disk{{Name: dev, Size: size}, {Name: "/dev/other", Size: size}}
				holders := map[string]Holder{dev: {dev, size, 512}, "/dev/other": {"/dev/other", size, 512}}
				var err error
				if p, err = MakePlan(c.LogicalDisks, disks, holders, mode, "gpt", nil); err != nil {
					t.Fatal(err)
				}
				if err := partition.WritePartitionTable(context.Background(), blockdev.NewGuard([]string{dev}), dev, "gpt", p.Disks[0].Partitions); err != nil {
					t.Fatal(err)
				}
			}
			bp, name, _ := BootPartition(mode, "gpt", 0, 0)
			n, err := partition.AddPartition(context.Background(), blockdev.NewGuard([]string{ours}), ours, bp.Size, bp, name)
			if err != nil {
				t.Fatal(err)
			}
			if n != 3 {
				t.Errorf("boot partition number %d, want 3", n)
			}
			first := strings.Fields(looptest.Run(t, "sgdisk", "-F", theirs))
			typ := "ef00"
			if mode == "bios" {
				typ = "ef02"
			}
			looptest.Run(t, "sgdisk", "-n", fmt.Sprintf("0:%ss:+%dMiB", first[len(first)-1], bp.Size/blockdev.MiB), "-t", "0:"+typ, "-c", "0:"+name, theirs)
			if a, b := tableSummary(t, ours), tableSummary(t, theirs); a != b {
				t.Errorf("AddPartition:\n%s\nsgdisk:\n%s", a, b)
			}
		})
	}
}
