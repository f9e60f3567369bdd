package partition

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// planString renders a plan as IPA's parted arguments would read.
func planString(label string, parts []PlannedPartition) string {
	s := []string{label}
	for _, p := range parts {
		s = append(s, fmt.Sprintf("%d:%s:%d-%d:%s:%s", p.Number, p.Role, p.Start/blockdev.MiB, (p.Start+p.Size)/blockdev.MiB, p.FSType, strings.Join(p.Flags, "+")))
	}
	return strings.Join(s, " ")
}

// TestPlanPartitions pins IPA's make_partitions order, sizes and flags
// (the parted command lines of IPA's test_disk_utils).
func TestPlanPartitions(t *testing.T) {
	for _, tc := range []struct {
		l    PartitionLayout
		want string
	}{
		{PartitionLayout{RootMiB: 1024, SwapMiB: 512, EphemeralMiB: 0, BootMode: "bios"},
			"msdos 1:swap:1-513:linux-swap: 2:root:513-1537::boot"},
		{PartitionLayout{RootMiB: 1024, SwapMiB: 512, EphemeralMiB: 2048, ConfigDriveMiB: 64, BootMode: "bios"},
			"msdos 1:ephemeral:1-2049:: 2:swap:2049-2561:linux-swap: 3:configdrive:2561-2625:: 4:root:2625-3649::boot"},
		{PartitionLayout{RootMiB: 1024, SwapMiB: 512, BootMode: "uefi"},
			"gpt 1:efi system partition:1-551:fat32:boot 2:swap:551-1063:linux-swap: 3:root:1063-2087::"},
		{PartitionLayout{RootMiB: 1024, BootMode: "bios", DiskLabel: "gpt"},
			"gpt 1:BIOS Boot partition:1-2::bios_grub 2:root:2-1026::"},
		{PartitionLayout{RootMiB: 1024, SwapMiB: 512, BootMode: "bios", DiskLabel: "gpt", CPUArch: "ppc64le"},
			"gpt 1:PReP Boot partition:1-9::prep 2:swap:9-521:linux-swap: 3:root:521-1545::"},
		{PartitionLayout{RootMiB: 1024, BootMode: "bios", CPUArch: "ppc64"},
			"msdos 1:PReP Boot partition:1-9::boot+prep 2:root:9-1033::"},
		// UEFI with an explicit msdos label keeps it, as make_partitions does.
		{PartitionLayout{RootMiB: 10, BootMode: "uefi", DiskLabel: "msdos"},
			"msdos 1:efi system partition:1-551:fat32:boot 2:root:551-561::"},
	} {
		label, parts, err := PlanPartitions(tc.l)
		if err != nil {
			t.Errorf("%+v: %v", tc.l, err)
			continue
		}
		if got := planString(label, parts); got != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.l, got, tc.want)
		}
	}
}

func TestPlanPartitionsRefuses(t *testing.T) {
	for _, tc := range []struct {
		l    PartitionLayout
		want string
	}{
		{PartitionLayout{RootMiB: 0, BootMode: "bios"}, "root_mb must be positive"},
		{PartitionLayout{RootMiB: -5, BootMode: "bios"}, "out of range"},
		{PartitionLayout{RootMiB: 5, SwapMiB: -1, BootMode: "bios"}, "swap_mb -1 MiB is out of range"},
		{PartitionLayout{RootMiB: 5, BootMode: "legacy"}, "unsupported boot mode"},
		{PartitionLayout{RootMiB: 5, BootMode: "bios", DiskLabel: "sun"}, "unsupported disk label"},
		{PartitionLayout{RootMiB: 5, SwapMiB: 1, EphemeralMiB: 1, ConfigDriveMiB: 1, BootMode: "bios", CPUArch: "ppc64le"},
			"an msdos label holds 4 primary partitions, the layout needs 5"},
	} {
		if _, _, err := PlanPartitions(tc.l); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.l, err, tc.want)
		}
	}
}

func TestNodeBootModeAndLabel(t *testing.T) {
	for i, tc := range []struct {
		node        map[string]any
		ramdiskUEFI bool
		mode, label string
	}{
		{map[string]any{}, false, "bios", "msdos"},
		{map[string]any{}, true, "uefi", "gpt"},
		{map[string]any{"instance_info": map[string]any{"deploy_boot_mode": "UEFI"}}, false, "uefi", "gpt"},
		{map[string]any{"instance_info": map[string]any{"deploy_boot_mode": "bios"}}, true, "bios", "msdos"},
		{map[string]any{"instance_info": map[string]any{"deploy_boot_mode": nil}}, true, "uefi", "gpt"},
		{map[string]any{"instance_info": map[string]any{"deploy_boot_mode": "pxe"}}, false, "bios", "msdos"},
		{map[string]any{"properties": map[string]any{"capabilities": "boot_mode:uefi,disk_label:msdos"}}, false, "uefi", "gpt"},
		{map[string]any{"properties": map[string]any{"capabilities": "boot_mode:bios,disk_label:gpt"}}, true, "bios", "gpt"},
		{map[string]any{"properties": map[string]any{"capabilities": `{"disk_label": "gpt"}`}}, false, "bios", "gpt"},
		{map[string]any{"instance_info": map[string]any{"capabilities": map[string]any{"disk_label": "msdos"}},
			"properties": map[string]any{"capabilities": "disk_label:gpt"}}, false, "bios", "msdos"},
		{map[string]any{"instance_info": map[string]any{"capabilities": map[string]any{"secure_boot": true}, "deploy_boot_mode": "bios"}}, false, "uefi", "gpt"},
		{map[string]any{"properties": map[string]any{"capabilities": "secure_boot:TRUE"}}, false, "uefi", "gpt"},
		{map[string]any{"driver_internal_info": map[string]any{"deploy_boot_mode": "uefi"}}, false, "uefi", "gpt"},
		{map[string]any{"properties": map[string]any{"capabilities": "garbage,boot_mode:uefi:x,disk_label:gpt"}}, false, "bios", "gpt"},
	} {
		if got := NodeBootMode(tc.node, tc.ramdiskUEFI); got != tc.mode {
			t.Errorf("%d: boot mode %s, want %s", i, got, tc.mode)
		}
		if got := NodeDiskLabel(tc.node, tc.ramdiskUEFI); got != tc.label {
			t.Errorf("%d: disk label %s, want %s", i, got, tc.label)
		}
	}
}

func FuzzParseCapabilities(f *testing.F) {
	for _, s := range []string{"boot_mode:uefi,disk_label:gpt", `{"boot_mode": "uefi"}`, "[1,2]", ":,:", "a:b:c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		caps := ParseCapabilities(s)
		node := map[string]any{"properties": map[string]any{"capabilities": s}}
		if m := NodeBootMode(node, false); m != "bios" && m != "uefi" {
			t.Fatalf("boot mode %q", m)
		}
		if l := NodeDiskLabel(node, false); l != "gpt" && l != "msdos" {
			t.Fatalf("label %q", l)
		}
		for k, v := range caps {
			if !strings.HasPrefix(strings.TrimSpace(s), "{") && (k == "" || v == "") {
				t.Fatalf("empty capability %q:%q from %q", k, v, s)
			}
		}
	})
}
