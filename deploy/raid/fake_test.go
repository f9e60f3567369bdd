package raid

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/partition"
	"github.com/ironic-go/ironic-agent/inventory"
)

// fakeMachine is a sysfs tree, the md superblocks on its devices and the
// mdadm it answers to: what the steps see of a machine, recorded.
type fakeMachine struct {
	t    *testing.T
	root string
	// members maps a device to the md array its superblock names.
	members map[string]string
	// names maps an md device to its array name (mdadm --detail).
	names map[string]string
	calls []string
	// fail maps a command line prefix to the error it gets.
	fail map[string]error
	// dropMember leaves this component out of a created array.
	dropMember string
}

func newFakeMachine(t *testing.T, disks ...string) *fakeMachine {
	t.Helper()
	m := &fakeMachine{t: t, root: t.TempDir(), members: map[string]string{}, names: map[string]string{}, fail: map[string]error{}}
	for _, d := range []string{"sys/block", "sys/class/block", "sys/devices"} {
		if err := os.MkdirAll(filepath.Join(m.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range disks {
		m.addDisk(d)
	}
	return m
}

func (m *fakeMachine) mkdir(rel string) {
	if err := os.MkdirAll(filepath.Join(m.root, rel), 0o755); err != nil {
		m.t.Fatal(err)
	}
}

func (m *fakeMachine) link(target, rel string) {
	p := filepath.Join(m.root, rel)
	_ = os.Remove(p)
	if err := os.Symlink(target, p); err != nil {
		m.t.Fatal(err)
	}
}

func (m *fakeMachine) addDisk(name string) {
	m.mkdir("sys/devices/" + name)
	m.link("../../devices/"+name, "sys/class/block/"+name)
	m.link("../devices/"+name, "sys/block/"+name)
}

func (m *fakeMachine) addPartition(disk string, n int) string {
	part := filepath.Base(blockdev.PartitionPath("/dev/"+disk, n))
	m.mkdir("sys/devices/" + disk + "/" + part)
	if err := os.WriteFile(filepath.Join(m.root, "sys/devices", disk, part, "partition"), []byte(fmt.Sprintf("%d\n", n)), 0o644); err != nil {
		m.t.Fatal(err)
	}
	m.link("../../devices/"+disk+"/"+part, "sys/class/block/"+part)
	return "/dev/" + part
}

// addArray makes an assembled array over existing devices.
func (m *fakeMachine) addArray(md, name string, components ...string) {
	base := filepath.Base(md)
	m.mkdir("sys/devices/virtual/" + base + "/slaves")
	for _, c := range components {
		m.mkdir("sys/devices/virtual/" + base + "/slaves/" + filepath.Base(c))
		m.members[c] = md
	}
	m.link("../../devices/virtual/"+base, "sys/class/block/"+base)
	m.link("../devices/virtual/"+base, "sys/block/"+base)
	m.names[md] = name
}

func (m *fakeMachine) stopArray(md string) {
	base := filepath.Base(md)
	for _, p := range []string{"sys/block/" + base, "sys/class/block/" + base} {
		_ = os.Remove(filepath.Join(m.root, p))
	}
	_ = os.RemoveAll(filepath.Join(m.root, "sys/devices/virtual", base))
	delete(m.names, md)
}

func (m *fakeMachine) record(s string) { m.calls = append(m.calls, s) }

// Run is mdadm.
func (m *fakeMachine) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	m.record(line)
	for prefix, err := range m.fail {
		if strings.HasPrefix(line, prefix) {
			return nil, err
		}
	}
	if name != "mdadm" {
		return nil, fmt.Errorf("unexpected program %s", name)
	}
	switch args[0] {
	case "--create":
		md := args[1]
		i := slices.Index(args, "--name")
		n := slices.Index(args, "--raid-devices")
		var comps []string
		for _, c := range args[n+2:] {
			if c != m.dropMember {
				comps = append(comps, c)
			}
		}
		m.addArray(md, args[i+1], comps...)
	case "--add":
		m.mkdir("sys/devices/virtual/" + filepath.Base(args[1]) + "/slaves/" + filepath.Base(args[2]))
		m.members[args[2]] = args[1]
	case "--stop":
		m.stopArray(args[1])
	case "--zero-superblock":
		delete(m.members, args[1])
	case "--detail":
		name, ok := m.names[args[1]]
		if !ok {
			return nil, fmt.Errorf("mdadm: cannot open %s", args[1])
		}
		return []byte(args[1] + ":\n           Version : 1.2\n              Name : host:" + name + "  (local to host host)\n"), nil
	case "--assemble":
		return nil, fmt.Errorf("exit status 1")
	}
	return nil, nil
}

// system is a System over the fake machine that records tables and wipes.
// A wipe through any guard but the System's fails the test: md arrays
// pass the agent's own guard (blockdev.Guard covers them through their
// members), so there is no second guard to build.
func (m *fakeMachine) system(allowed ...string) *System {
	var s *System
	s = &System{
		Root:   m.root,
		Runner: m,
		Guard:  blockdev.NewGuard(allowed),
		WriteTable: func(_ context.Context, _ *blockdev.Guard, dev, label string, parts []partition.PlannedPartition) error {
			var s []string
			for _, p := range parts {
				s = append(s, fmt.Sprintf("%d:%d-%d", p.Number, p.Start/blockdev.MiB, (p.Start+p.Size)/blockdev.MiB))
				m.addPartition(filepath.Base(dev), p.Number)
			}
			m.record(fmt.Sprintf("table %s %s %s", dev, label, strings.Join(s, " ")))
			return nil
		},
		DeletePartitions: func(_ context.Context, _ *blockdev.Guard, dev string, numbers []int) error {
			m.record(fmt.Sprintf("delete-partitions %s %v", dev, numbers))
			return nil
		},
		Wipe: func(_ context.Context, g *blockdev.Guard, dev string) error {
			m.record("wipe " + dev)
			if g != s.Guard {
				m.t.Errorf("wipe %s: through a guard other than the System's", dev)
			}
			return nil
		},
		Probe: func(dev string) (string, error) {
			if _, ok := m.members[dev]; ok {
				return "linux_raid_member", nil
			}
			return "", nil
		},
		Check:      func(string) error { return nil },
		WaitDevice: func(context.Context, string) error { return nil },
		RetryDelay: 1,
	}
	return s
}

func disk(name string, gib int64) inventory.Disk {
	sector := 512
	return inventory.Disk{Name: name, Size: gib << 30, LogicalSectors: &sector}
}

func mustJSON(js string) any {
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		panic(err)
	}
	return v
}
