package vm

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/lockdown"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
)

// TestVMRedfishSecureBootCapability is Ironic's secure_boot capability
// flowing through the redfish hardware type to the machine's firmware, as
// with IPA: the node has capabilities boot_mode:uefi,secure_boot:true,
// the deploy asks for it (instance_info capabilities secure_boot true);
// its machine has Secure Boot firmware with Microsoft's keys but the
// setting off (the BMC's SecureBoot resource: SecureBootEnable false).
// The ramdisk boots through the release's ESP with nothing verified (the
// agent says Secure Boot is disabled) and deploys the Secure Boot
// whole-disk image; before the boot into it Ironic's redfish management
// reads the SecureBoot resource and PATCHes SecureBootEnable true, so the
// firmware enforces Secure Boot from that boot on: shim through the
// agent's entry, GRUB, the signed kernel, and the OS finds Secure Boot on.
// Undeploy (automated cleaning off) PATCHes it false again. Slow
// (E2E_VM_SLOW): two boots under OVMF with SMM.
func TestVMRedfishSecureBootCapability(t *testing.T) {
	slowScenario(t)
	requireSecureBootFirmware(t)
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	r := newRedfishNode(t, ctx, "uefi", redfishSecureBootCapabilityNode, redfishCase{secureBoot: true, secureBootOff: true})
	r.l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, 2*time.Minute)

	// The instance asks for Secure Boot as Nova (a flavor's
	// capabilities:secure_boot) and Metal3 (bootMode UEFISecureBoot) ask
	// for it: instance_info capabilities; the node's property
	// advertises that it can.
	if err := nodes.Update(ctx, r.s.ironic.Service, r.node.UUID, nodes.UpdateOpts{nodes.UpdateOperation{
		Op: nodes.AddOp, Path: "/instance_info/capabilities", Value: map[string]any{"secure_boot": "true"}}}).Err; err != nil {
		t.Fatal(err)
	}
	const hostname, userData = "secureboot-capability", "#!/bin/sh\necho secure_boot capability\n"
	vm, diskVM := r.deploySecureBootOS(hostname, userData)
	r.checkISOBoot(vm)
	if !vm.Machine.SecureBoot || !vm.Machine.SecureBootDisabled {
		t.Errorf("the ramdisk's boot: SecureBoot %v, SecureBootDisabled %v; want the firmware with its setting off", vm.Machine.SecureBoot, vm.Machine.SecureBootDisabled)
	}
	if l, ok := vm.Find(logtext.Msg(lockdown.EventBootSecurity)); !ok || !strings.Contains(l.Text, "secure_boot=disabled") {
		t.Errorf("the agent did not find Secure Boot disabled: %q", l.Text)
	}
	if diskVM.Machine.SecureBootDisabled {
		t.Errorf("the boot after the deploy had Secure Boot still switched off: Ironic did not switch it on")
	}
	checkSecureBootOS(t, ctx, diskVM, agentShimEntry, hostname, userData)
	if !slices.Contains(r.bmc.Events(), "SecureBootEnable true") {
		t.Errorf("Ironic never enabled Secure Boot through the BMC: %s", strings.Join(r.bmc.Events(), "; "))
	}

	r.l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, 5*time.Minute)
	if events := r.bmc.Events(); !slices.Contains(events, "SecureBootEnable false") {
		t.Errorf("undeploy did not disable Secure Boot through the BMC: %s", strings.Join(events, "; "))
	}
	t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}
