package ramdisk_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/overlay"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestSecureBootUnsignedOverlayModuleInVM boots TestSecureBootInVM's ISO
// (Debian's signed chain, Secure Boot enforced) with an overlay appended
// to its initramfs, packed as cmd/mkoverlay -allow-unsigned-modules packs
// it: Debian's signed watchdog module and softdog with its signature
// stripped (strip --strip-debug drops it). The kernel loads the signed
// module and rejects the unsigned one ("Loading of unsigned module is
// rejected": Debian's kernel enforces module signatures under Secure
// Boot); the init's module warning names softdog and Secure Boot
// lockdown, and the agent still comes up and sends its inspection data.
func TestSecureBootUnsignedOverlayModuleInVM(t *testing.T) {
	slowSecureBootVM(t)
	strip, err := exec.LookPath("strip")
	if err != nil {
		t.Skip("SKIPPED: needs strip (Debian package binutils)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	const name = "softdog"
	rd, k, tree := ramdiskModules(t, ctx, name, "watchdog")
	data, err := kmod.ReadModule(filepath.Join(k.ModulesDir, tree.Path(name)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	unsigned := filepath.Join(dir, name+".ko")
	if err := os.WriteFile(unsigned, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, strip, "--strip-debug", unsigned).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v: %s", err, out)
	}
	initrd := overlaidInitrd(t, rd.Initrd, rd, overlay.Spec{
		Modules:              []string{filepath.Join(k.ModulesDir, tree.Path("watchdog")), unsigned},
		AllowUnsignedModules: true,
	})

	ironic, fwd := startLoopbackStandIn(t)
	m := secureBootMachine(t, "ironic-agent-secureboot-overlay")
	m.GuestFwd = fwd
	signedISO(t, ctx, rd.Kernel, initrd, secureBootCmdline, m.ISO)
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	fail := waitSecureBootAgent(t, ctx, vm)
	if _, err := ironic.wait(ctx, "continue", 15*time.Minute); err != nil {
		fail("the agent never sent inspection data after the refused module: %v; the stand-in saw %v", err, ironic.paths())
	}
	l, ok := vm.Find("module " + name + ": Secure Boot lockdown")
	if !ok {
		fail("the init did not say lockdown refused module %s", name)
	}
	t.Logf("init: %s", strings.TrimSpace(l.Text))
	if !strings.Contains(l.Text, "/updates/"+name+".ko") || !strings.Contains(l.Text, "refused it because it is unsigned") {
		t.Errorf("the init's refusal %q does not name the overlay's %s.ko and why", l.Text, name)
	}
	// Debian's kernel enforces module signatures under Secure Boot
	// (is_module_sig_enforced): it rejects the module with EKEYREJECTED
	// and says so itself, before lockdown's own check.
	if kl, ok := vm.Find("Loading of unsigned module is rejected"); !ok {
		t.Error("the kernel did not log that it rejected the unsigned module")
	} else {
		t.Logf("kernel: %s", strings.TrimSpace(kl.Text))
	}
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "Lockdown:") {
			t.Logf("kernel: %s", strings.TrimSpace(l.Text))
		}
	}
	vm.Kill()
}
