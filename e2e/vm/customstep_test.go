package vm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/overlay"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// customStepManifest is the steps-directory manifest of the test's
// install_coreos: a deploy step of priority 0, so it runs only when the
// provision request asks for it, as Metal3's custom deploy does.
const customStepManifest = `{"step": "install_coreos", "interface": "deploy", "priority": 0,
 "clean": false, "deploy": true, "timeout": 300,
 "argsinfo": {"label": {"description": "written into the marker", "required": false}}}
`

// customStepRamdisk is the agent ramdisk with ./internal/testbed/guest/installstep
// (static) and its manifest in the agent's default steps directory, added
// by an overlay, the way an operator adds a step to a released ramdisk.
func customStepRamdisk(t *testing.T, ctx context.Context) *qemu.Ramdisk {
	t.Helper()
	return stepRamdisk(t, ctx, "./internal/testbed/guest/installstep", "install_coreos", customStepManifest)
}

// stepRamdisk is the suite's agent ramdisk extended, without rebuilding
// it, by an overlay (cmd/mkoverlay's archive, concatenated to its
// initramfs as an operator boots it) holding the static program of pkg
// as the executable step name, manifest beside it, in the agent's
// default steps directory.
func stepRamdisk(t *testing.T, ctx context.Context, pkg, name, manifest string) *qemu.Ramdisk {
	t.Helper()
	base := ramdisk(t)
	dir := t.TempDir()
	bin, mf := filepath.Join(dir, name), filepath.Join(dir, name+".json")
	if err := qemu.BuildStatic(ctx, pkg, bin); err != nil {
		t.Fatalf("build the step: %v", err)
	}
	if err := os.WriteFile(mf, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var ov bytes.Buffer
	if _, err := overlay.Build(overlay.Spec{Files: []string{
		"etc/ironic-agent/steps.d/" + name + "=" + bin,
		"etc/ironic-agent/steps.d/" + name + ".json=" + mf,
	}}, &ov); err != nil {
		t.Fatalf("build the overlay with the step: %v", err)
	}
	rd := *base
	concat := func(initrd string) string {
		if initrd == "" {
			return ""
		}
		b, err := os.ReadFile(initrd)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, filepath.Base(initrd)+"+"+name)
		if err := os.WriteFile(out, append(b, ov.Bytes()...), 0o644); err != nil {
			t.Fatal(err)
		}
		return out
	}
	rd.Initrd, rd.InitrdRaw = concat(base.Initrd), concat(base.InitrdRaw)
	t.Logf("ramdisk with an overlay of %d bytes holding the step %s: %s", ov.Len(), name, sizes(&rd))
	reportSeconds(t, time.Since(start), "overlay_build_s")
	return &rd
}

// TestVMCustomDeployStep is Metal3's custom deploy: the node's deploy
// interface is custom-agent (no image, no write_image), the provision
// request names the ramdisk's executable deploy step install_coreos with
// an argument, the agent runs it from its steps directory and the node
// goes active; the host finds the step's marker, naming the node and the
// argument, at the start of the disk the root-device hint names and on no
// other disk.
func TestVMCustomDeployStep(t *testing.T) {
	needQEMU(t)
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	rd := customStepRamdisk(t, ctx)
	macs := newMACs(t)
	port := newAgentPort(t)
	m := serviceMachine(t, rd, "bios", port, macs)
	m.Append = agentArgs(port) + " ironic_agent.dhcp=" + macs[0]

	noClean := false
	node := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: "vm-custom-step", AutomatedClean: &noClean,
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs[:]...)
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/deploy_interface", Value: "custom-agent"},
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": deployTarget}},
	}).Err; err != nil {
		t.Fatal(err)
	}
	l := kernelLifecycle(t, ctx, s.ironic, node.UUID, m)
	l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, time.Minute)

	const label = "metal3-custom-deploy"
	deploy := l.Deploy(6*time.Minute, nodes.DeployStep{Interface: nodes.InterfaceDeploy, Step: "install_coreos", Priority: 80,
		Args: map[string]any{"label": label}})
	vm := deploy.VM
	reportSeconds(t, deploy.Took, "deploy_s")
	reportAgentStarted(t, vm, "bios", "deploy_agent_started_uptime_s")
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	want := fmt.Appendf(nil, "ironic-agent custom deploy step: node %s label %s\n", node.UUID, label)
	for _, d := range m.Disks {
		got := readAt(t, m.DiskPath(d.ID), 0, len(want))
		switch on := bytes.Equal(got, want); {
		case d.Serial == deployTarget && !on:
			t.Errorf("%s (%s), the root device, starts with %q, not the step's marker %q", d.ID, d.Serial, got, want)
		case d.Serial != deployTarget && on:
			t.Errorf("the step's marker also went to %s (%s)", d.ID, d.Serial)
		}
	}
}
