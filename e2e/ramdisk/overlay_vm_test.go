package ramdisk_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/overlay"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestOverlayModuleInVM boots the agent ramdisk with an overlay
// (cmd/mkoverlay's archive, concatenated as an operator boots it) that
// adds kernel modules of the ramdisk's kernel the ramdisk lacks, softdog
// and the watchdog core it needs, and a configuration file: the init reads the overlay's module
// list and loads the module (the kernel says so), and the file is there
// for the agent.
func TestOverlayModuleInVM(t *testing.T) {
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
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	k, err := qemu.FetchKernel(ctx, cache)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := kmod.Open(k.ModulesDir)
	if err != nil {
		t.Fatal(err)
	}
	if !tree.Has("softdog") {
		t.Skipf("SKIPPED: kernel %s has no softdog module", k.Version)
	}
	for _, m := range rd.Modules {
		if m == "softdog" || m == "watchdog" {
			t.Fatalf("the ramdisk carries softdog already: pick another module for this test")
		}
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "site.conf")
	if err := os.WriteFile(conf, []byte("[DEFAULT]\ndebug = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ov bytes.Buffer
	// softdog needs the watchdog core, which the ramdisk lacks too.
	if _, err := overlay.Build(overlay.Spec{Base: rd.Initrd, Modules: []string{filepath.Join(k.ModulesDir, tree.Path("softdog")), filepath.Join(k.ModulesDir, tree.Path("watchdog"))},
		Files: []string{"etc/ironic-python-agent.d/site.conf=" + conf}}, &ov); err != nil {
		t.Fatal(err)
	}
	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-overlay"
	m.Dir = filepath.Join(dir, "vm")
	m.Disks = nil
	m.NICs = nil
	base, err := os.ReadFile(rd.InitrdFor(m.Firmware))
	if err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(dir, "initrd+overlay")
	if err := os.WriteFile(initrd, append(base, ov.Bytes()...), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), initrd
	// loglevel=7: softdog's pr_info line on the console.
	m.Append = "loglevel=7 ipa-standalone=1 ipa-disk-wait-attempts=0 ironic_agent.dhcp_timeout=1"
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.WaitFor(ctx, "softdog: initialized"); err != nil {
		t.Fatalf("the overlay's module never loaded: %v\n%s", err, consoleTail(vm))
	}
	l, err := vm.WaitFor(ctx, "overlay_lists=")
	if err != nil || !strings.Contains(l.Text, "overlay_lists=modules.d/overlay.list") {
		t.Errorf("the init did not name the overlay's module list: %v %q", err, l.Text)
	}
	if _, err := vm.WaitFor(ctx, "site.conf"); err != nil {
		t.Errorf("the agent never read the overlay's config file: %v\n%s", err, consoleTail(vm))
	}
}
