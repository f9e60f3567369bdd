package ramdisk_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestFIPSInVM boots the agent ramdisk with fips=1, as Metal3 passes it
// from a host in FIPS mode: the kernel enters its FIPS mode (its crypto
// self-tests pass), the agent restarts itself in Go's FIPS 140-3 mode,
// says so with the module's version (the certified v1.0.0) and the
// kernel's state, and serves its API.
func TestFIPSInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-fips"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Disks = nil
	m.NICs = nil
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "fips=1 ipa-standalone=1 ipa-disk-wait-attempts=0 ironic_agent.dhcp_timeout=1"
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	l, err := vm.WaitFor(ctx, logtext.Msg(agent.EventFIPSMode))
	if err != nil {
		t.Fatalf("the agent never said it runs in FIPS mode: %v\n%s", err, consoleTail(vm))
	}
	if !strings.Contains(l.Text, "kernel_fips_enabled=1") {
		t.Errorf("the kernel is not in FIPS mode: %s", l.Text)
	}
	// The ramdisk's agent links the certified module (GOFIPS140).
	if !strings.Contains(l.Text, "module=v1.0.0") {
		t.Errorf("the agent does not run the certified module v1.0.0: %s", l.Text)
	}
	if _, err := vm.WaitFor(ctx, logtext.Msg(agent.EventAPIListening)); err != nil {
		t.Fatalf("the agent in FIPS mode never served its API: %v\n%s", err, consoleTail(vm))
	}
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "alg: self-tests") && strings.Contains(l.Text, "failed") {
			t.Errorf("guest: %s", l.Text)
		}
	}
	t.Logf("FIPS mode on after %v: %s", vm.Elapsed().Round(time.Second), strings.TrimSpace(l.Text))
}
