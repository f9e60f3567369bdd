package modules

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestKernelAsksForModules boots the agent ramdisk's init with modguest
// (internal/testbed/guest/modprobe) as its command: the file systems of
// partition images (ext4, XFS, btrfs) and a device-mapper target (zero),
// which the manifest marks ondemand, are not loaded at boot, and each is
// loaded when the kernel asks for it (a mount, a table) through the
// ramdisk's modprobe; a name no module answers is refused by name.
func TestKernelAsksForModules(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	requireVM(t)
	rd, err := qemu.BuildGuestRamdisk(t.Context(), "./internal/testbed/guest/modprobe", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-modprobe"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "ironic_agent.cmd=check ironic_agent.dhcp=none ironic_agent.exit=poweroff"
	vm := runVM(t, m)
	ok, done := map[string]string{}, false
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, logtext.Msg(rdinit.EventModulesLoaded)) {
			t.Logf("boot: %s", strings.TrimSpace(l.Text)) // what the boot loaded, and its time
		}
		rest, found := strings.CutPrefix(strings.TrimSpace(l.Text), "modguest: ")
		if !found {
			continue
		}
		f := strings.SplitN(rest, " ", 2)
		switch f[0] {
		case "done":
			done = true
		case "ok":
			name, detail, _ := strings.Cut(f[1], " ")
			ok[name] = detail
			t.Logf("%s", rest)
		case "fail":
			t.Errorf("%s", rest)
		}
	}
	if !done {
		t.Fatalf("modguest did not finish:\n%s", tail(vm.Lines(), 60))
	}
	for _, name := range []string{"ext4", "xfs", "btrfs", "dm_zero"} {
		switch d, found := ok[name]; {
		case !found:
			t.Errorf("%s: modguest said nothing about it", name)
		case d != "before=false":
			t.Errorf("%s: %s, want it left out of the boot (ondemand) and loaded when the kernel asked", name, d)
		}
	}
	if _, found := ok["unknown"]; !found {
		t.Errorf("modprobe of a name no module answers: not refused by name")
	}
}
