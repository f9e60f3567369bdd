package modules

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/programs"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestProgramsStart boots the agent ramdisk's init with progguest as its
// command, which runs every registered program's harmless invocation
// (nvme version, mkfs.ext4 -V, ...) through ExecRunner with
// the agent's environment. It fails naming each program that does not
// start: not on PATH, a library or the loader missing, or a non-zero exit.
func TestProgramsStart(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	requireVM(t)
	rd, err := qemu.BuildGuestRamdisk(t.Context(), "./internal/testbed/guest/programs", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-programs"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "ironic_agent.cmd=check ironic_agent.dhcp=none ironic_agent.exit=poweroff"
	vm := runVM(t, m)
	ok, failed, done := map[string]bool{}, map[string]string{}, false
	for _, l := range vm.Lines() {
		rest, found := strings.CutPrefix(strings.TrimSpace(l.Text), "progguest: ")
		if !found {
			continue
		}
		f := strings.SplitN(rest, " ", 3)
		switch {
		case f[0] == "PATH":
			t.Logf("the agent's %s", rest)
		case f[0] == "done":
			done = true
		case f[0] == "ok" && len(f) >= 2:
			ok[f[1]] = true
		case f[0] == "fail" && len(f) == 3:
			failed[f[1]] = f[2]
		}
	}
	if !done {
		t.Fatalf("progguest did not finish:\n%s", tail(vm.Lines(), 60))
	}
	for _, p := range programs.All() {
		switch {
		case ok[p.Name]:
		case failed[p.Name] != "":
			t.Errorf("%s (package %s) does not start in the ramdisk: %s", p.Name, p.Package, failed[p.Name])
		default:
			t.Errorf("%s (package %s): progguest said nothing about it", p.Name, p.Package)
		}
	}
	t.Logf("%d of %d registered programs start", len(ok), len(programs.All()))
}
