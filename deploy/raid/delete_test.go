package raid

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

// twoArrays is what create_configuration leaves on two disks: md0 over
// the first partitions, md1 over the second.
func twoArrays(t *testing.T, names ...string) *fakeMachine {
	m := newFakeMachine(t, "sda", "sdb")
	a1, b1 := m.addPartition("sda", 1), m.addPartition("sdb", 1)
	a2, b2 := m.addPartition("sda", 2), m.addPartition("sdb", 2)
	if len(names) == 0 {
		names = []string{"md0", "md1"}
	}
	m.addArray("/dev/md0", names[0], a1, b1)
	m.addArray("/dev/md1", names[1], a2, b2)
	return m
}

var twoDisks = []inventory.Disk{disk("/dev/sda", 100), disk("/dev/sdb", 100)}

// IPA's test_delete_configuration: each array wiped, stopped, its
// members' superblocks zeroed; then the sweep finds nothing more and the
// holders' tables are wiped.
func TestDeleteConfiguration(t *testing.T) {
	m := twoArrays(t)
	m.members["/dev/sdb"] = "/dev/md9" // an old whole-disk member
	got, err := m.system().Delete(context.Background(), Request{Node: map[string]any{}, Disks: twoDisks})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mdadm --assemble --scan --verbose",
		"wipe /dev/md0",
		"mdadm --stop /dev/md0",
		"mdadm --zero-superblock /dev/sda1",
		"mdadm --zero-superblock /dev/sdb1",
		"wipe /dev/md1",
		"mdadm --stop /dev/md1",
		"mdadm --zero-superblock /dev/sda2",
		"mdadm --zero-superblock /dev/sdb2",
		"mdadm --zero-superblock /dev/sdb",
		"wipe /dev/sda",
		"wipe /dev/sdb",
		"mdadm --assemble --scan --verbose",
	}
	if strings.Join(m.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(m.calls, "\n"), strings.Join(want, "\n"))
	}
	if !maps.Equal(got, map[string]string{"/dev/md0": ActionDelete, "/dev/md1": ActionDelete}) {
		t.Errorf("decisions %v", got)
	}
	if len(m.members) != 0 {
		t.Errorf("superblocks left: %v", m.members)
	}
}

// IPA's test_delete_configuration_failure_blocks_remaining: an array that
// will not stop fails the step after two passes.
func TestDeleteConfigurationRemaining(t *testing.T) {
	m := twoArrays(t)
	m.fail["mdadm --stop /dev/md1"] = errors.New("mdadm: Cannot get exclusive access to /dev/md1")
	_, err := m.system().Delete(context.Background(), Request{Node: map[string]any{}, Disks: twoDisks})
	if err == nil || !strings.Contains(err.Error(), "Unable to clean all softraid correctly. Remaining [/dev/md1]") {
		t.Fatalf("delete = %v", err)
	}
	if n := strings.Count(strings.Join(m.calls, "\n"), "mdadm --stop /dev/md1"); n != 2 {
		t.Errorf("%d stop attempts, want 2", n)
	}
}

// IPA's test_delete_configuration_skip_list: the skipped volume stays,
// its neighbour on the same holders is wiped but kept, and the holders
// keep their tables.
func TestDeleteConfigurationSkipList(t *testing.T) {
	m := twoArrays(t, "root", "data")
	node := map[string]any{"properties": map[string]any{"skip_block_devices": []any{map[string]any{"volume_name": "data"}}}}
	got, err := m.system().Delete(context.Background(), Request{Node: node, Disks: twoDisks})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, map[string]string{"/dev/md0": ActionWipe, "/dev/md1": ActionKeep}) {
		t.Errorf("decisions %v", got)
	}
	all := strings.Join(m.calls, "\n")
	for _, bad := range []string{"--stop", "--zero-superblock", "wipe /dev/sda", "wipe /dev/sdb", "wipe /dev/md1"} {
		if strings.Contains(all, bad) {
			t.Errorf("%q done:\n%s", bad, all)
		}
	}
	if !strings.Contains(all, "wipe /dev/md0") {
		t.Errorf("md0 not wiped:\n%s", all)
	}
}

// Separate holders: the unskipped array is deleted and its disks wiped;
// the skipped one is untouched.
func TestDeleteConfigurationSkipListSeparateDisks(t *testing.T) {
	m := newFakeMachine(t, "sda", "sdb", "sdc", "sdd")
	m.addArray("/dev/md0", "root", m.addPartition("sda", 1), m.addPartition("sdb", 1))
	m.addArray("/dev/md1", "data", m.addPartition("sdc", 1), m.addPartition("sdd", 1))
	node := map[string]any{"properties": map[string]any{"skip_block_devices": []any{map[string]any{"volume_name": "data"}}}}
	disks := []inventory.Disk{disk("/dev/sda", 10), disk("/dev/sdb", 10), disk("/dev/sdc", 10), disk("/dev/sdd", 10)}
	got, err := m.system().Delete(context.Background(), Request{Node: node, Disks: disks})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, map[string]string{"/dev/md0": ActionDelete, "/dev/md1": ActionKeep}) {
		t.Errorf("decisions %v", got)
	}
	all := strings.Join(m.calls, "\n")
	for _, want := range []string{"mdadm --stop /dev/md0", "wipe /dev/sda", "wipe /dev/sdb"} {
		if !strings.Contains(all, want) {
			t.Errorf("%q not done:\n%s", want, all)
		}
	}
	for _, c := range m.calls {
		if c == "mdadm --detail /dev/md1" {
			continue // its name is read, nothing more
		}
		for _, bad := range []string{"/dev/sdc", "/dev/sdd", "/dev/md1"} {
			if strings.Contains(c, bad) {
				t.Errorf("%s touched: %s", bad, c)
			}
		}
	}
}

// A holder shared by a kept and a deleted array (the deleted one only
// partly there): only the deleted array's partitions go.
func TestDeleteConfigurationDropsPartitions(t *testing.T) {
	m := newFakeMachine(t, "sda", "sdb", "sdc")
	m.addArray("/dev/md0", "data", m.addPartition("sda", 1), m.addPartition("sdb", 1))
	m.addArray("/dev/md1", "scratch", m.addPartition("sdb", 2), m.addPartition("sdc", 1))
	node := map[string]any{"properties": map[string]any{"skip_block_devices": []any{map[string]any{"volume_name": "data"}}}}
	disks := []inventory.Disk{disk("/dev/sda", 10), disk("/dev/sdb", 10), disk("/dev/sdc", 10)}
	got, err := m.system().Delete(context.Background(), Request{Node: node, Disks: disks})
	if err != nil {
		t.Fatal(err)
	}
	// md1 shares sdb with the kept md0: IPA wipes it rather than deleting.
	if got["/dev/md1"] != ActionWipe {
		t.Errorf("decisions %v", got)
	}
}

// A confined agent neither assembles nor sees arrays with a member on a
// disk it may not touch.
func TestDeleteConfigurationConfined(t *testing.T) {
	m := twoArrays(t)
	s := m.system("/dev/sda")
	if _, err := s.Delete(context.Background(), Request{Node: map[string]any{}, Disks: twoDisks[:1]}); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.calls {
		if strings.Contains(c, "--assemble") || strings.Contains(c, "md0") || strings.Contains(c, "md1") || strings.Contains(c, "sdb") {
			t.Errorf("confined agent ran %q", c)
		}
	}
}

// IPA's test__handle_raid_skip_list_* cases.
func TestDecideSkips(t *testing.T) {
	for _, c := range []struct {
		name      string
		names     []string // md0, md1, md2
		skip      []string
		want, why map[string]string
	}{
		{"partial", []string{"root", "data"}, []string{"data"},
			map[string]string{"/dev/md0": ActionWipe, "/dev/md1": ActionKeep}, map[string]string{"/dev/md0": "data"}},
		{"complete", []string{"data1", "data2"}, []string{"data1", "data2"},
			map[string]string{"/dev/md0": ActionKeep, "/dev/md1": ActionKeep}, map[string]string{"/dev/md1": "data1"}},
		{"partial with esp", []string{"root", "data", "esp"}, []string{"data"},
			map[string]string{"/dev/md0": ActionWipe, "/dev/md1": ActionKeep, "/dev/md2": ActionKeep}, nil},
		{"nothing skipped", []string{"root", "data"}, []string{"other"},
			map[string]string{"/dev/md0": ActionDelete, "/dev/md1": ActionDelete}, map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newFakeMachine(t, "sda", "sdb")
			var arrays []string
			for i, n := range c.names {
				md := "/dev/md" + string(rune('0'+i))
				m.addArray(md, n, m.addPartition("sda", i+1), m.addPartition("sdb", i+1))
				arrays = append(arrays, md)
			}
			d := m.system().DecideSkips(context.Background(), arrays, c.skip)
			if !maps.Equal(d.Actions, c.want) {
				t.Errorf("actions %v, want %v", d.Actions, c.want)
			}
			if c.why != nil && !maps.Equal(d.Cause, c.why) {
				t.Errorf("causes %v, want %v", d.Cause, c.why)
			}
		})
	}
}

// IPA's test_create_configuration_with_skip_list: the kept volume is not
// created again, the other one is, on the partitions after it.
func TestCreateConfigurationSkipList(t *testing.T) {
	m := twoArrays(t, "root", "data")
	node := bootNode("bios", "", `{"logical_disks":[{"size_gb":"10","raid_level":"1","controller":"software","volume_name":"root"},{"size_gb":"MAX","raid_level":"0","controller":"software","volume_name":"data"}]}`)
	node["properties"].(map[string]any)["skip_block_devices"] = []any{map[string]any{"volume_name": "root"}}
	// root is kept, data (its neighbour, wiped by delete_configuration)
	// stays as it is: neither is created again.
	if _, err := m.system().CreateFromNode(context.Background(), Request{Node: node, Disks: twoDisks}); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.calls {
		if strings.HasPrefix(c, "table") || strings.Contains(c, "--create") {
			t.Errorf("wrote: %s", c)
		}
	}
	// A volume to create on the holders of a kept one is refused, not
	// laid out over it.
	m = newFakeMachine(t, "sda", "sdb")
	m.addArray("/dev/md0", "root", m.addPartition("sda", 1), m.addPartition("sdb", 1))
	if _, err := m.system().CreateFromNode(context.Background(), Request{Node: node, Disks: twoDisks}); err == nil || !strings.Contains(err.Error(), "existing array that is kept") {
		t.Errorf("create beside a kept array = %v", err)
	}
	// An unnamed existing array is refused when volumes are skipped.
	m = twoArrays(t, "", "data")
	if _, err := m.system().CreateFromNode(context.Background(), Request{Node: node, Disks: twoDisks}); err == nil || !strings.Contains(err.Error(), "does not have a volume name") {
		t.Errorf("create with an unnamed array = %v", err)
	}
}

func TestParseDetailName(t *testing.T) {
	for in, want := range map[string]string{
		"/dev/md0:\n           Version : 1.2\n              Name : abc.xyz.com:this_name  (local to host abc.xyz.com)\n": "this_name",
		"              Name : this_name\n":              "this_name",
		"              Name : esp  (local to host h)\n": "esp",
		"/dev/md0:\n           Version : 1.2\n":         "",
		"              Name : a:b:c\n":                  "",
	} {
		if got := ParseDetailName([]byte(in)); got != want {
			t.Errorf("ParseDetailName(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseDetailName(f *testing.F) {
	f.Add("/dev/md0:\n              Name : host:root  (local to host host)\n")
	f.Add("Name :\n")
	f.Fuzz(func(t *testing.T, s string) {
		if n := ParseDetailName([]byte(s)); strings.Contains(n, " ") || strings.Contains(n, "\n") {
			t.Errorf("name %q", n)
		}
	})
}

// IPA's list_block_devices_check_skip_list with volume names: the kept
// array is never offered to a deploy or an erase, its wiped neighbour
// only to a deploy.
func TestWithoutSkippedArrays(t *testing.T) {
	m := twoArrays(t, "root", "data")
	disks := append(append([]inventory.Disk{}, twoDisks...), disk("/dev/md0", 10), disk("/dev/md1", 80))
	node := map[string]any{"properties": map[string]any{"skip_block_devices": []any{map[string]any{"volume_name": "data"}}}}
	names := func(ds []inventory.Disk) string {
		var s []string
		for _, d := range ds {
			s = append(s, d.Name)
		}
		return strings.Join(s, " ")
	}
	got, err := m.system().WithoutSkippedArrays(context.Background(), node, disks, false)
	if err != nil || names(got) != "/dev/sda /dev/sdb /dev/md0" {
		t.Errorf("deploy: %s, %v", names(got), err)
	}
	got, err = m.system().WithoutSkippedArrays(context.Background(), node, disks, true)
	if err != nil || names(got) != "/dev/sda /dev/sdb" {
		t.Errorf("erase: %s, %v", names(got), err)
	}
	m.calls = nil
	got, _ = m.system().WithoutSkippedArrays(context.Background(), map[string]any{}, disks, true)
	if len(got) != 4 || len(m.calls) != 0 {
		t.Errorf("no skip list: %s, calls %q", names(got), m.calls)
	}
}

// A confined agent's new arrays take numbers past the host's own, and an
// md node without members (a stopped array lingering) is not an array to
// delete.
func TestArraysConfinedAndMemberless(t *testing.T) {
	m := newFakeMachine(t, "sda", "sdb", "sdc", "sdd")
	m.addArray("/dev/md0", "host", m.addPartition("sdc", 1), m.addPartition("sdd", 1))
	m.addArray("/dev/md5", "gone")
	s := m.system("/dev/sda", "/dev/sdb")
	arrays, err := s.Arrays()
	if err != nil || len(arrays) != 0 {
		t.Errorf("Arrays() = %v, %v; want none (md0 is the host's, md5 has no members)", arrays, err)
	}
	node := bootNode("bios", "", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`)
	got, err := s.CreateFromNode(context.Background(), Request{Node: node, Disks: twoDisks})
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Plan.Volumes[0].Device; d != "/dev/md1" {
		t.Errorf("new array %s, want /dev/md1 (md0 and md5 exist)", d)
	}
}
