package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// raidToken is the pre-shared agent token of the standalone RAID VM.
const raidToken = "raid0123456789abcdef0123456789abcdef"

// raidConfig is a target_raid_config in Metal3's softwareRAIDVolumes
// shape: a RAID-1 root on two named disks, a RAID-0 over all three.
const raidConfig = `{"logical_disks": [
	{"size_gb": 1, "raid_level": "1", "controller": "software", "volume_name": "root",
	 "physical_disks": [{"name": "/dev/vda"}, {"name": "/dev/vdb"}]},
	{"size_gb": "MAX", "raid_level": "0", "controller": "software", "volume_name": "data"}]}`

// TestVMSoftwareRAID runs IPA's software RAID steps in the agent ramdisk
// (SeaBIOS, three 4 GiB virtio disks, the agent standalone): boot 1
// creates a RAID-1 on two disks and a RAID-0 on all three
// (create_configuration), /proc/mdstat and the inventory show them, and
// the agent powers off; boot 2 finds them assembled at start-up (as IPA's
// initialize), then delete_configuration and erase_devices_metadata
// leave none; on the host afterwards no disk file holds an md superblock
// where the arrays had them, nor at any version's place at either end.
func TestVMSoftwareRAID(t *testing.T) {
	seriesIndependent(t) // the agent's software RAID, alike in every series
	rd := ramdisk(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	port := newAgentPort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	mac := newMACs(t)[0]
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-raid"
	m.MemoryMB = 768
	m.Dir = vmDir(t)
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Disks = []qemu.Disk{
		{ID: "vda", Kind: qemu.DiskVirtioBlk, SizeMB: 4 << 10, Serial: "RAID-VDA"},
		{ID: "vdb", Kind: qemu.DiskVirtioBlk, SizeMB: 4 << 10, Serial: "RAID-VDB"},
		{ID: "vdc", Kind: qemu.DiskVirtioBlk, SizeMB: 4 << 10, Serial: "RAID-VDC"},
	}
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: mac, Backend: qemu.NICUser}}
	m.HostFwd = map[int]int{port: 9999}
	m.Append = "ipa-standalone=1 ipa-agent-token=" + raidToken + " ironic_agent.dhcp=" + mac
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	node := map[string]any{"uuid": "4c616273-0000-4000-8000-0000000000aa",
		"properties":         map[string]any{"capabilities": "boot_mode:bios"},
		"target_raid_config": json.RawMessage(raidConfig)}

	startAgent := func(what string) *qemu.VM {
		t.Helper()
		start := time.Now()
		vm := boot(t, ctx, m, qemu.Options{})
		if _, err := vm.WaitFor(ctx, logtext.Msg(agent.EventAPIListening)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		reportSeconds(t, time.Since(start), what, "agent_api_up_s")
		return vm
	}
	powerOff := func(vm *qemu.VM) {
		t.Helper()
		// The agent powers off without waiting for its reply to reach us:
		// post and do not wait (wait=false), and take an error for an answer.
		_, _ = (&agentclient.Client{Base: base, Token: raidToken}).Post(ctx, "standby.power_off", nil, false)
		if err := vm.Wait(ctx); err != nil {
			t.Fatalf("the guest did not power off: %v", err)
		}
	}

	// Boot 1: create.
	vm := startAgent("boot 1")
	step := time.Now()
	res, err := cleanStep(ctx, base, "create_configuration", node)
	if err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(step), "create_configuration_s")
	var got struct {
		Result map[string]any `json:"clean_result"`
	}
	if json.Unmarshal(res, &got) != nil || got.Result["logical_disks"] == nil {
		t.Errorf("create_configuration returned %s, want the configuration as clean_result", res)
	}
	stat, err := mdstat(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("/proc/mdstat after create_configuration:\n%s", stat)
	for _, want := range [][]string{{"md0 : active raid1 ", "vda1[", "vdb1["}, {"md1 : active raid0 ", "vda2[", "vdb2[", "vdc1["}} {
		ok := false
		for _, line := range strings.Split(stat, "\n") {
			if strings.HasPrefix(line, want[0]) {
				ok = true
				for _, member := range want[1:] {
					ok = ok && strings.Contains(line, member)
				}
			}
		}
		if !ok {
			t.Errorf("mdstat has no line %q with members %q", want[0], want[1:])
		}
	}
	disks, err := inventoryDisks(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	// md0: partition 1 ends at 1 GiB, less the 1 MiB lead-in and md's
	// 1.2 data offset; md1: vda2 and vdb2 (1 to 4 GiB) and vdc1 (1 MiB to
	// 4 GiB) striped, RAID-0 using all of each.
	if s := disks["/dev/md0"]; s < 1000<<20 || s > 1<<30 {
		t.Errorf("inventory md0 size %d, want a little under 1 GiB (disks %v)", s, disks)
	}
	if s := disks["/dev/md1"]; s < 9<<30 || s > 10<<30 {
		t.Errorf("inventory md1 size %d, want a little under 3 + 3 + 4 GiB (disks %v)", s, disks)
	}
	for _, d := range []string{"/dev/vda", "/dev/vdb", "/dev/vdc"} {
		if _, ok := disks[d]; !ok {
			t.Errorf("holder %s missing from the inventory (IPA lists md members): %v", d, disks)
		}
	}
	powerOff(vm)
	reportSeconds(t, vm.Elapsed(), "boot_1_s")

	// assembled checks that the agent assembled both arrays at start-up.
	assembled := func(vm *qemu.VM, what string) {
		t.Helper()
		if l, ok := vm.Find(logtext.Msg(raid.EventArraysAssembled)); ok {
			t.Logf("%s: %s", what, l.Text)
		} else {
			t.Errorf("%s: the agent did not assemble the arrays at start-up", what)
		}
		disks, err := inventoryDisks(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		var mds []string
		for name := range disks {
			if strings.HasPrefix(name, "/dev/md") {
				mds = append(mds, name)
			}
		}
		if len(mds) != 2 {
			t.Errorf("%s: the agent assembled %v, want two arrays (disks %v)", what, mds, disks)
		}
	}

	// Boot 2: assembled at start-up; erase_devices_metadata for a node
	// that keeps "root" by volume_name (skip_block_devices) erases
	// neither it nor "data", which shares its holders, nor the holder
	// disks (their partitions are members).
	vm = startAgent("boot 2")
	assembled(vm, "boot 2")
	keepRoot := map[string]any{"uuid": node["uuid"], "properties": map[string]any{"capabilities": "boot_mode:bios",
		"skip_block_devices": []any{map[string]any{"volume_name": "root"}}}}
	step = time.Now()
	if _, err := cleanStep(ctx, base, "erase_devices_metadata", keepRoot); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(step), "erase_devices_metadata_keeping_root_s")
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, logtext.Msg(erase.EventDeviceEraseFinished)) && !strings.Contains(l.Text, "skipped") {
			t.Errorf("erase_devices_metadata keeping root erased a device: %s", l.Text)
		}
	}
	powerOff(vm)
	reportSeconds(t, vm.Elapsed(), "boot_2_s")

	// Boot 3: both arrays are still there to assemble; then deleted and
	// erased.
	vm = startAgent("boot 3")
	assembled(vm, "boot 3")
	step = time.Now()
	if _, err := cleanStep(ctx, base, "delete_configuration", node); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(step), "delete_configuration_s")
	step = time.Now()
	if _, err := cleanStep(ctx, base, "erase_devices_metadata", node); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(step), "erase_devices_metadata_s")
	if stat, err = mdstat(ctx, base); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stat, " : active") || strings.Contains(stat, " : inactive") {
		t.Errorf("arrays left after delete_configuration:\n%s", stat)
	}
	if disks, err = inventoryDisks(ctx, base); err != nil {
		t.Fatal(err)
	}
	for name := range disks {
		if strings.HasPrefix(name, "/dev/md") {
			t.Errorf("%s still in the inventory", name)
		}
	}
	powerOff(vm)
	reportSeconds(t, vm.Elapsed(), "boot_3_s")

	// On the host: no superblock where the arrays had theirs (1.2: 4 KiB
	// into each member partition), none at any version's place on the
	// disks, and mdadm agrees.
	members := map[string][]int64{
		"vda": {1 << 20, 1 << 30},
		"vdb": {1 << 20, 1 << 30},
		"vdc": {1 << 20},
	}
	magic := []byte{0xfc, 0x4e, 0x2b, 0xa9}
	for id, starts := range members {
		p := m.DiskPath(id)
		for _, s := range starts {
			if b := readAt(t, p, s+4096, 4); bytes.Equal(b, magic) {
				t.Errorf("%s: md superblock left at %d", id, s+4096)
			}
		}
		if sig, err := blockdev.Probe(p); err != nil || sig != "" {
			t.Errorf("%s: signature %q left (%v)", id, sig, err)
		}
		if out, err := exec.CommandContext(ctx, "mdadm", "--examine", p).CombinedOutput(); err == nil {
			t.Errorf("%s: mdadm --examine finds a superblock:\n%s", id, out)
		}
	}
}
