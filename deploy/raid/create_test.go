package raid

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

func bootNode(mode, label string, raid string) map[string]any {
	caps := "boot_mode:" + mode
	if label != "" {
		caps += ",disk_label:" + label
	}
	n := map[string]any{"uuid": "node-1", "properties": map[string]any{"capabilities": caps}}
	if raid != "" {
		n["target_raid_config"] = mustConfigRaw(raid)
	}
	return n
}

func mustConfigRaw(js string) map[string]any {
	c, err := ParseConfig(mustJSON(js))
	if err != nil {
		panic(err)
	}
	return c.Raw
}

const raid1Raid0 = `{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`

// The command lines of IPA's test_create_configuration* (parted's
// partitions as the table written, in MiB), per boot mode and label.
func TestCreateConfiguration(t *testing.T) {
	for _, c := range []struct {
		name, mode, label, raid string
		disks                   []inventory.Disk
		want                    []string
	}{
		{"bios msdos", "bios", "", raid1Raid0, []inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}, []string{
			"table /dev/sda msdos 1:1-10240 2:10240-102399",
			"table /dev/sdb msdos 1:1-10240 2:10240-102399",
			"mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name md0 --raid-devices 2 /dev/sda1 /dev/sdb1",
			"mdadm --create /dev/md1 --force --run --metadata=1 --level 0 --name md1 --raid-devices 2 /dev/sda2 /dev/sdb2",
		}},
		{"uefi", "uefi", "", raid1Raid0, []inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}, []string{
			// MAX ends at the last MiB boundary before the last usable sector
			// (parted -a optimal of "-1"; checked in parted_loop_test.go).
			"table /dev/sda gpt 1:551-10240 2:10240-102399",
			"table /dev/sdb gpt 1:551-10240 2:10240-102399",
			"mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name md0 --raid-devices 2 /dev/sda1 /dev/sdb1",
			"mdadm --create /dev/md1 --force --run --metadata=1 --level 0 --name md1 --raid-devices 2 /dev/sda2 /dev/sdb2",
		}},
		{"bios gpt", "bios", "gpt", raid1Raid0, []inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}, []string{
			"table /dev/sda gpt 1:8-10240 2:10240-102399",
			"table /dev/sdb gpt 1:8-10240 2:10240-102399",
			"mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name md0 --raid-devices 2 /dev/sda1 /dev/sdb1",
			"mdadm --create /dev/md1 --force --run --metadata=1 --level 0 --name md1 --raid-devices 2 /dev/sda2 /dev/sdb2",
		}},
		{"no max", "bios", "", `{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software"},{"size_gb":"20","raid_level":"0","controller":"software"}]}`,
			[]inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}, []string{
				"table /dev/sda msdos 1:1-10240 2:10240-30720",
				"table /dev/sdb msdos 1:1-10240 2:10240-30720",
				"mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name md0 --raid-devices 2 /dev/sda1 /dev/sdb1",
				"mdadm --create /dev/md1 --force --run --metadata=1 --level 0 --name md1 --raid-devices 2 /dev/sda2 /dev/sdb2",
			}},
		{"max first", "bios", "", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"},{"size_gb":"10","raid_level":"0","controller":"software"}]}`,
			[]inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}, []string{
				"table /dev/sda msdos 1:1-10240 2:10240-102399",
				"table /dev/sdb msdos 1:1-10240 2:10240-102399",
				"mdadm --create /dev/md0 --force --run --metadata=1 --level 0 --name md0 --raid-devices 2 /dev/sda1 /dev/sdb1",
				"mdadm --create /dev/md1 --force --run --metadata=1 --level 1 --name md1 --raid-devices 2 /dev/sda2 /dev/sdb2",
			}},
		{"nvme", "uefi", "", raid1Raid0, []inventory.Disk{disk("/dev/nvme0n1", 100), disk("/dev/nvme1n1", 100)}, []string{
			"table /dev/nvme0n1 gpt 1:551-10240 2:10240-102399",
			"table /dev/nvme1n1 gpt 1:551-10240 2:10240-102399",
			"mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name md0 --raid-devices 2 /dev/nvme0n1p1 /dev/nvme1n1p1",
			"mdadm --create /dev/md1 --force --run --metadata=1 --level 0 --name md1 --raid-devices 2 /dev/nvme0n1p2 /dev/nvme1n1p2",
		}},
		{"raid 5 and names", "bios", "", `{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software","volume_name":"root"},{"size_gb":"MAX","raid_level":"5","controller":"software","volume_name":"data"}]}`,
			[]inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100), disk("/dev/sdc", 100)}, []string{
				"table /dev/sda msdos 1:1-10240 2:10240-102399",
				"table /dev/sdb msdos 1:1-10240 2:10240-102399",
				"table /dev/sdc msdos 1:1-10240 2:10240-102399",
				"mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name root --raid-devices 3 /dev/sda1 /dev/sdb1 /dev/sdc1",
				"mdadm --create /dev/md1 --force --run --metadata=1 --level 5 --name data --raid-devices 3 /dev/sda2 /dev/sdb2 /dev/sdc2",
			}},
		{"1+0", "bios", "", `{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"1+0","controller":"software"}]}`,
			[]inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}, []string{
				"table /dev/sda msdos 1:1-10240 2:10240-102399",
				"table /dev/sdb msdos 1:1-10240 2:10240-102399",
				"mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name md0 --raid-devices 2 /dev/sda1 /dev/sdb1",
				"mdadm --create /dev/md1 --force --run --metadata=1 --level 10 --name md1 --raid-devices 2 /dev/sda2 /dev/sdb2",
			}},
		// test_create_configuration_with_hints: the hints pick two of
		// four disks, in hint order.
		{"hints", "bios", "", `{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software","physical_disks":[{"size":">= 50"},{"size":">= 50"}]},{"size_gb":"MAX","raid_level":"0","controller":"software","physical_disks":[{"size":">= 50"},{"size":">= 50"}]}]}`,
			[]inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdc", 20), disk("/dev/sdb", 100), disk("/dev/sdd", 20)}, []string{
				"table /dev/sda msdos 1:1-10240 2:10240-102399",
				"table /dev/sdb msdos 1:1-10240 2:10240-102399",
				"mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name md0 --raid-devices 2 /dev/sda1 /dev/sdb1",
				"mdadm --create /dev/md1 --force --run --metadata=1 --level 0 --name md1 --raid-devices 2 /dev/sda2 /dev/sdb2",
			}},
		// test_create_configuration_with_different_disks: each volume on
		// its own pair; every disk's first RAID partition is number 1.
		{"different disks", "bios", "", `{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software","physical_disks":[{"name":"/dev/sda"},{"name":"/dev/sdb"}]},{"size_gb":"MAX","raid_level":"0","controller":"software","physical_disks":[{"name":"/dev/sdc"},{"name":"/dev/sdd"}]}]}`,
			[]inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100), disk("/dev/sdc", 20), disk("/dev/sdd", 20)}, []string{
				"table /dev/sda msdos 1:1-10240",
				"table /dev/sdb msdos 1:1-10240",
				"table /dev/sdc msdos 1:1-20479",
				"table /dev/sdd msdos 1:1-20479",
				"mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name md0 --raid-devices 2 /dev/sda1 /dev/sdb1",
				"mdadm --create /dev/md1 --force --run --metadata=1 --level 0 --name md1 --raid-devices 2 /dev/sdc1 /dev/sdd1",
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var names []string
			for _, d := range c.disks {
				names = append(names, strings.TrimPrefix(d.Name, "/dev/"))
			}
			m := newFakeMachine(t, names...)
			node := bootNode(c.mode, c.label, c.raid)
			got, err := m.system().CreateFromNode(context.Background(), Request{Node: node, Disks: c.disks})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if got.Config == nil {
				t.Fatal("no configuration returned")
			}
			if strings.Join(m.calls, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(m.calls, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestCreateConfigurationRefuses(t *testing.T) {
	two := []inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}
	for _, c := range []struct {
		name, raid string
		disks      []inventory.Disk
		parts      bool
		want       string
	}{
		{"partitions left", raid1Raid0, two, true, "Partitions detected on devices /dev/sda, /dev/sdb during RAID config"},
		{"no candidates", `{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software","physical_disks":[{"size":">= 500"},{"size":">= 500"}]}]}`, two, false, "No candidates for physical disk"},
		{"mismatching hints", `{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software","physical_disks":[{"name":"/dev/sda"},{"name":"/dev/sda"}]}]}`, two, false, "No candidates left for physical disk"},
		{"one holder", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`, two[:1], false, "RAID level 1 needs at least 2 holder disks"},
		{"too big", `{"logical_disks":[{"size_gb":"200","raid_level":"1","controller":"software"}]}`, two, false, "past the"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newFakeMachine(t, "sda", "sdb")
			if c.parts {
				m.addPartition("sda", 1)
				m.addPartition("sdb", 1)
			}
			_, err := m.system().CreateFromNode(context.Background(), Request{Node: bootNode("bios", "", c.raid), Disks: c.disks})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("create = %v, want %q", err, c.want)
			}
			for _, call := range m.calls {
				if strings.HasPrefix(call, "table") || strings.Contains(call, "--create") {
					t.Errorf("wrote despite the error: %s", call)
				}
			}
		})
	}
}

func TestCreateConfigurationNothingToDo(t *testing.T) {
	m := newFakeMachine(t, "sda", "sdb")
	two := []inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}
	for _, raid := range []string{"", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"megaraid"}]}`} {
		got, err := m.system().CreateFromNode(context.Background(), Request{Node: bootNode("bios", "", raid), Disks: two})
		if err != nil || got.Config != nil || len(m.calls) != 0 {
			t.Errorf("create(%q) = %+v, %v; calls %q", raid, got, err, m.calls)
		}
	}
}

// A member the new array does not list is re-added (IPA's
// _get_actual_component_devices check); a re-add that keeps failing is
// the step's error.
func TestCreateReaddsMissingMember(t *testing.T) {
	two := []inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}
	m := newFakeMachine(t, "sda", "sdb")
	m.dropMember = "/dev/sdb1"
	if _, err := m.system().CreateFromNode(context.Background(), Request{Node: bootNode("bios", "", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`), Disks: two}); err != nil {
		t.Fatal(err)
	}
	if last := m.calls[len(m.calls)-1]; last != "mdadm --add /dev/md0 /dev/sdb1" {
		t.Errorf("last call %q", last)
	}
	m = newFakeMachine(t, "sda", "sdb")
	m.dropMember = "/dev/sdb1"
	m.fail["mdadm --add"] = errors.New("busy")
	_, err := m.system().CreateFromNode(context.Background(), Request{Node: bootNode("bios", "", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`), Disks: two})
	if err == nil || !strings.Contains(err.Error(), "Failed re-add /dev/sdb1 to /dev/md0") {
		t.Fatalf("create = %v", err)
	}
	if n := strings.Count(strings.Join(m.calls, "\n"), "--add"); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

// The md numbers skip arrays that exist (kept by the skip list).
func TestMakePlanSkipsTakenNumbers(t *testing.T) {
	c := mustConfig(t, raid1Raid0)
	two := []inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}
	holders := map[string]Holder{"/dev/sda": {"/dev/sda", 100 << 30, 512}, "/dev/sdb": {"/dev/sdb", 100 << 30, 512}}
	p, err := MakePlan(c.LogicalDisks, two, holders, "bios", "msdos", []string{"/dev/md0", "/dev/md2"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Volumes[0].Device != "/dev/md1" || p.Volumes[1].Device != "/dev/md3" || p.Volumes[1].Name != "md3" {
		t.Errorf("volumes %+v", p.Volumes)
	}
}

func TestBootPartition(t *testing.T) {
	p, name, ok := BootPartition("uefi", "gpt", 1, 3)
	if !ok || name != "uefi-holder-1" || p.Start != 1<<20 || p.Size != 550<<20 || p.Number != 3 {
		t.Errorf("uefi: %+v %q %v", p, name, ok)
	}
	p, name, ok = BootPartition("bios", "gpt", 0, 2)
	if !ok || name != "bios-boot-part-0" || p.Size != 2<<20 {
		t.Errorf("bios gpt: %+v %q %v", p, name, ok)
	}
	if _, _, ok := BootPartition("bios", "msdos", 0, 2); ok {
		t.Error("bios msdos: a boot partition")
	}
	// Each fits the room the RAID partitions leave.
	if raidStart("uefi", "gpt") < (1+550)<<20 || raidStart("bios", "gpt") < 3<<20 {
		t.Error("boot partitions do not fit before the RAID partitions")
	}
}
