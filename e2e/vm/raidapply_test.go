package vm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/deploy/bootloader"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage/grubimage"
)

// applyRAIDStep is the deploy step that builds software RAID at deploy
// time, as Ironic's agent raid interface takes it (AgentRAID
// apply_configuration: raid_config validated against Ironic's RAID
// schema, delete_existing): a RAID-1 over both disks in the shape of
// Metal3's softwareRAIDVolumes (controller software, physical_disks as
// "s== <name>" hints, size_gb MAX for "the rest of the disks"). No
// is_root_volume: false would make the agent, as IPA, drop the array and
// its holders from the install disks it chooses from, true would choose
// it whatever the root-device hints say; the hints name /dev/md0 here, so
// the deploy finds the array in the disk list. Priority 90: after
// deploy.deploy (100) has booted the agent, before write_image (80).
func applyRAIDStep() nodes.DeployStep {
	return nodes.DeployStep{Interface: nodes.InterfaceRAID, Step: "apply_configuration", Priority: 90,
		Args: map[string]any{
			"raid_config": map[string]any{"logical_disks": []any{map[string]any{
				"size_gb": "MAX", "raid_level": "1", "controller": "software",
				"physical_disks": []any{map[string]string{"name": "s== /dev/vda"}, map[string]string{"name": "s== /dev/vdb"}},
			}}},
			"delete_existing": true,
		}}
}

// TestVMSoftwareRAIDApplyUEFI builds the software RAID during the deploy,
// under OVMF: no cleaning, the provision request names the raid
// interface's apply_configuration deploy step (applyRAIDStep: a RAID-1
// over two 3 GiB disks), and then internal/testbed/osimage's partition image is
// laid out on the new array (/dev/md0: ESP md0p1, root md0p2). The agent's
// install_bootloader moves the ESP to a mirror of ESPs on both holders
// (md RAID-1, metadata 1.0), runs the image's grub-install onto it and
// writes one NVRAM entry per holder. Checked: the agent ran the step as a
// deploy step, Ironic stored the RAID configuration its post-step hook
// reads from the agent's deploy_result, the deploy found /dev/md0 in the
// agent's disk list through the root-device hint, each holder has its
// ESP with GRUB, and the OS boots from the mirror through the entry of
// one holder's ESP (and, under E2E_VM_SLOW, from the other disk alone,
// then an inspection lists the array among the disks).
func TestVMSoftwareRAIDApplyUEFI(t *testing.T) {
	seriesIndependent(t) // the agent's software RAID, alike in every series
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: the partition image needs %s (test.sh APT_PACKAGES)", m)
	}
	o, dir := deployedOS(t, ctx)
	_, img := deployedOSPartitionImage(t, ctx, o, dir)

	s := services(t)
	macs := newMACs(t)
	m := raidMachine(t, "uefi", newAgentPort(t), macs, raidLayout{disks: 2, sizeMB: 3 << 10})
	lc := raidNode(t, ctx, m, macs, ironic.NodeSpec{Name: "vm-raid-apply-uefi", InspectInterface: s.inspectInterface()})
	uuid := lc.node
	lc.Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, time.Minute)
	ops := append(serveImage(t, &lc.machine, img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_type", Value: "partition"},
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/instance_info/root_gb", Value: "1"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"name": "/dev/md0"}})
	deployed := deployOntoMD0(lc, ops, applyRAIDStep())

	if _, ok := deployed.Find(logtext.Msg(agent.EventExecutingStep) + ` kind=deploy step=apply_configuration`); !ok {
		t.Errorf("the agent did not run apply_configuration as a deploy step")
	}
	for _, l := range deployed.Lines() {
		if strings.Contains(l.Text, "step=apply_configuration") || strings.Contains(l.Text, logtext.Msg(raid.EventCreatingMD)) {
			t.Logf("agent: %s", l.Text)
		}
	}
	if _, ok := deployed.Find(logtext.Msg(raid.EventCreatingMD) + ` device=/dev/md0`); !ok {
		t.Errorf("apply_configuration did not create /dev/md0")
	}
	n, err := s.ironic.GetNode(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	if lds, _ := n.RAIDConfig["logical_disks"].([]any); len(lds) != 1 {
		t.Errorf("node raid_config after the deploy = %v, want the RAID-1 apply_configuration made", n.RAIDConfig)
	} else {
		t.Logf("Ironic's raid_config after the deploy step: %v", lds[0])
	}
	if l, ok := deployed.Find(logtext.Msg(agent.EventPartitionImageWritten) + ` device=/dev/md0 `); !ok || !strings.Contains(l.Text, "/dev/md0p2") {
		t.Errorf("the partition image was not laid out on /dev/md0 with its root on /dev/md0p2: %q", l.Text)
	}
	if _, ok := deployed.Find(logtext.Msg(bootloader.EventRelocatingESP) + ` from=/dev/md0p1`); !ok {
		t.Errorf("the agent did not move the ESP from /dev/md0p1 to a mirror on the holders")
	}

	// grub-install --removable put GRUB at the fallback path of the
	// mirror: the FAT directory entry "BOOTX64 EFI" on each holder's ESP.
	espDisk := holderESPs(t, m, []string{"vda", "vdb"}, []byte("BOOTX64 EFI"))
	first := bootThroughHolderEntry(t, ctx, m, []string{"vda", "vdb"}, "ironic1", espDisk)
	if !slowRun() {
		return
	}
	other := map[string]string{"vda": "vdb", "vdb": "vda"}[first]
	if got := bootThroughHolderEntry(t, ctx, m, []string{other}, "ironic1", espDisk); got != other {
		t.Errorf("with %s removed, the OS came through the entry of %s's ESP, want %s's", first, got, other)
	}

	// What an inspection reports afterwards: the agent assembles the
	// arrays at start (as IPA's initialize) and lists the RAID-1 as a
	// disk (md127 then, with no mdadm.conf) beside its holders.
	lc.Change(nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, 2*time.Minute)
	lc.Change(nodes.ProvisionStateOpts{Target: nodes.TargetManage}, 2*time.Minute)
	lc.machine.Append = s.inspectionArgs() + " ipa-disk-wait-attempts=1 no_timer_check ironic_agent.dhcp=" + macs[0]
	inspection := lc.Inspect(5 * time.Minute)
	lc.Stop()
	disks, _ := inspectedInventory(t, ctx, s, uuid)["disks"].([]any)
	sizes := map[string]float64{}
	for _, d := range disks {
		dm, _ := d.(map[string]any)
		name, _ := dm["name"].(string)
		sizes[name], _ = dm["size"].(float64)
	}
	t.Logf("inspection: inventory disks %v", sizes)
	reportSeconds(t, inspection.Took, "inspection_s")
	root := false
	for name, size := range sizes {
		// The RAID-1 holds each holder's disk from 551 MiB on: a little
		// under 2.5 GiB; the ESP mirror is 550 MiB.
		root = root || strings.HasPrefix(name, "/dev/md") && size > 2<<30 && size < 5<<29
	}
	if _, a := sizes["/dev/vda"]; !root || !a {
		t.Errorf("the inventory after the deploy lists no RAID-1 of about 2.5 GiB beside the holders: %v", sizes)
	}
}

// TestVMSoftwareRAIDServiceStep is RAID in servicing, where Ironic allows
// it: on 2026.1 (Ironic 35) the agent raid interface lists
// apply_configuration as a service step (create_configuration and
// delete_configuration are clean steps only), and it fails whatever the
// agent, for two reasons of Ironic's own, each shown on an adopted node
// (active, nothing deployed) through the real Ironic 35:
//
//  1. alone, it runs without a ramdisk: the validated step list keeps no
//     requires_ramdisk (conductor/steps.py), so servicing.py boots
//     nothing and the step finds no agent ("requires agent_url");
//  2. after an agent step (burnin_cpu) that makes Ironic boot the ramdisk,
//     the method sends task.node.deploy_step, empty while servicing, as a
//     deploy step, which the agent accepts and fails as malformed, as IPA
//     does, and servicing then fails on the method's return value (the
//     deploy's "wait call-back", no state servicing takes).
//
// Both end in "service failed", and no array is made on the disks.
func TestVMSoftwareRAIDServiceStep(t *testing.T) {
	s := services(t)
	if s.series != ironic.Series2026_1 {
		t.Skipf("SKIPPED: needs IRONIC_SERIES=2026.1: servicing is Ironic 23+, and Ironic 29.0 (2025.1) refuses a ramdisk's lookup in service wait; the series is %s", s.series)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	// Servicing is API 1.87.
	sc := *s.ironic.Service
	sc.Microversion = "1.87"
	api := &ironic.Client{Service: &sc}

	macs := newMACs(t)
	m := raidMachine(t, "bios", newAgentPort(t), macs, raidLayout{disks: 2, sizeMB: 2 << 10})
	lc := raidNode(t, ctx, m, macs, ironic.NodeSpec{Name: "vm-raid-service"})
	uuid := lc.node
	// Adoption takes the node to active without a deploy; the deploy
	// interface validates the image (Ironic asks the HTTP server for it).
	ops := append(serveImage(t, &m, make([]byte, 1<<20)),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/agent_burnin_cpu_timeout", Value: "2"})
	if err := nodes.Update(ctx, s.ironic.Service, uuid, ops).Err; err != nil {
		t.Fatal(err)
	}
	lc.Change(nodes.ProvisionStateOpts{Target: nodes.TargetAdopt}, time.Minute)
	lc.ironic = api
	step := applyRAIDStep()
	apply := nodes.ServiceStep{Interface: step.Interface, Step: step.Step, Args: step.Args}
	serviced := func(start time.Time, what, wantError string) {
		t.Helper()
		n := lc.driver().Ended(nodes.TargetService, 8*time.Minute)
		t.Logf("%s: %q; last_error: %s", what, n.ProvisionState, n.LastError)
		reportSeconds(t, time.Since(start), what+"_s")
		if n.ProvisionState != "service failed" || !strings.Contains(n.LastError, wantError) {
			t.Errorf("%s: %q with last_error %q, want \"service failed\" with %q (docs/steps.md: software RAID, service steps)", what, n.ProvisionState, n.LastError, wantError)
		}
	}

	// 1. apply_configuration alone: no ramdisk is booted, so the request
	// alone, and serviced waits for the servicing's end.
	start := time.Now()
	lc.driver().Request(nodes.ProvisionStateOpts{Target: nodes.TargetService, ServiceSteps: []nodes.ServiceStep{apply}})
	serviced(start, "servicing with apply_configuration alone", "requires agent_url")
	// A failed servicing puts the node in maintenance (fault "service
	// failure"): the operator's way out.
	if err := nodes.UnsetMaintenance(ctx, s.ironic.Service, uuid).ExtractErr(); err != nil {
		t.Fatal(err)
	}

	// 2. After burnin_cpu, with the agent up.
	start = time.Now()
	vm := lc.Start(nodes.ProvisionStateOpts{Target: nodes.TargetService,
		ServiceSteps: []nodes.ServiceStep{{Interface: nodes.InterfaceDeploy, Step: "burnin_cpu"}, apply}})
	serviced(start, "servicing with burnin_cpu, apply_configuration", "step returned invalid value: wait call-back")
	if _, ok := vm.Find(`Malformed deploy_step, no \"step\" key: {}`); !ok {
		t.Errorf("the agent did not fail Ironic's empty deploy step as malformed")
	}
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "step") && (strings.Contains(l.Text, "deploy") || strings.Contains(l.Text, "service")) {
			t.Logf("agent: %s", l.Text)
		}
	}
	if _, ok := vm.Find(`step=burnin_cpu`); !ok {
		t.Errorf("the agent never ran burnin_cpu: the ramdisk did not serve the servicing")
	}
	if _, ok := vm.Find(logtext.Msg(raid.EventCreatingMD)); ok {
		t.Errorf("the agent created an md array although servicing failed")
	}
	vm.Kill()
	for _, r := range mdRegions(t, m) {
		if at := mdSuperblocks(t, m, r); len(at) > 0 {
			t.Errorf("%s: md superblock after the failed servicing: %v", r.disk, at)
		}
	}
}
