// Package modules boots the agent ramdisk in QEMU and loads every module
// of its manifest: a driver whose hardware is absent must still load.
package modules

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

func TestMain(m *testing.M) {
	// QEMU runs this test binary as its guestfwd relay.
	qemu.MaybeRelay()
	os.Exit(m.Run())
}

// TestLoadEveryModule boots the ramdisk with ironic_agent.modules=all,
// which makes the init load every module of the initramfs with
// finit_module (dependencies first), whatever the devices, then run
// `ironic-agent version` and power off. It fails naming each module the
// init reports it could not load, and when the count the init loaded is
// not the count the build put in.
func TestLoadEveryModule(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	requireVM(t)
	ctx := t.Context()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-modules"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.NICs = []qemu.NIC{
		{Model: "virtio-net-pci", MAC: "52:54:00:12:34:01", Backend: qemu.NICIsolated},
		{Model: "e1000", MAC: "52:54:00:12:34:02", Backend: qemu.NICIsolated},
	}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "ironic_agent.modules=all ironic_agent.cmd=version ironic_agent.dhcp=none ironic_agent.exit=poweroff"
	vm := runVM(t, m)
	failed, loaded, summary := loadResults(vm.Lines())
	if summary == "" {
		t.Fatalf("the init never said \"modules loaded\":\n%s", tail(vm.Lines(), 60))
	}
	t.Logf("%d modules in the initramfs; %s", len(rd.Modules), summary)
	for _, f := range failed {
		t.Errorf("module %s did not load: %s", f[0], f[1])
	}
	if loaded != len(rd.Modules)-len(failed) {
		t.Errorf("the init loaded %d modules and reports %d failures; the initramfs has %d", loaded, len(failed), len(rd.Modules))
	}
}

var (
	finitErr = regexp.MustCompile(`finit_module (\S+)\.ko(?:\.xz|\.zst|\.gz)?: (.*)$`)
	countRE  = regexp.MustCompile(`\bcount=(\d+)`)
)

// loadResults reads the init's log: each module it could not load (name,
// error), how many it loaded, and its summary line.
func loadResults(lines []qemu.Line) (failed [][2]string, loaded int, summary string) {
	for _, l := range lines {
		switch {
		case strings.Contains(l.Text, logtext.Msg(rdinit.EventModule)+" ") && finitErr.MatchString(l.Text):
			m := finitErr.FindStringSubmatch(l.Text)
			failed = append(failed, [2]string{path.Base(m[1]), strings.Trim(m[2], `"`)})
		case strings.Contains(l.Text, logtext.Msg(rdinit.EventModulesLoaded)):
			summary = strings.TrimSpace(l.Text)
			if m := countRE.FindStringSubmatch(l.Text); m != nil {
				loaded, _ = strconv.Atoi(m[1])
			}
		}
	}
	return failed, loaded, summary
}

func tail(lines []qemu.Line, n int) string {
	var b strings.Builder
	for _, l := range lines[max(0, len(lines)-n):] {
		fmt.Fprintf(&b, "%8.3f %s\n", l.At.Seconds(), l.Text)
	}
	return b.String()
}

// requireVM skips the test under -short or without QEMU and the programs
// named.
func requireVM(t *testing.T, programs ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine (1-3 minutes under TCG)")
	}
	for _, p := range append([]string{"qemu-system-x86_64"}, programs...) {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (./test.sh installs it): %v", p, err)
		}
	}
}

// runVM boots m and waits until it powers off.
func runVM(t *testing.T, m qemu.Machine) *qemu.VM {
	t.Helper()
	vm, err := qemu.Start(t.Context(), m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if err := vm.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("VM ran %v", vm.Elapsed().Round(time.Second))
	return vm
}
