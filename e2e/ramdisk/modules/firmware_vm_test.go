package modules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestFirmwareLoads boots the agent ramdisk's init with fwguest as its
// command, which asks the kernel's firmware loader (through the kernel's
// test_firmware module) for every firmware file the build put in, for an
// XZ-compressed one, and for one that is not there. Debian's kernel loads
// firmware from /lib/firmware itself, with no udev helper: every shipped
// file must come back byte for byte, the .xz one decompressed
// (CONFIG_FW_LOADER_COMPRESS_XZ), and the missing one must fail at once,
// not after the 60 s a user-space helper fallback would wait.
func TestFirmwareLoads(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	requireVM(t, "xz")
	ctx := t.Context()
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	// The kernel the ramdisk is built with is the one FetchKernel has
	// cached (the build fetched it, so this does not download).
	k, err := qemu.FetchKernel(ctx, cache)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	xzPlain := bytes.Repeat([]byte("ironic-agent firmware xz test\n"), 1000)
	xzFile := filepath.Join(work, "xz-test.bin")
	if err := os.WriteFile(xzFile, xzPlain, 0o644); err != nil {
		t.Fatal(err)
	}
	// The kernel's XZ decoder wants CRC32 (or no) integrity checks, as
	// the kernel's firmware documentation says.
	if out, err := exec.CommandContext(ctx, "xz", "--check=crc32", "-f", xzFile).CombinedOutput(); err != nil {
		t.Fatalf("xz: %v: %s", err, out)
	}
	// A first build to learn which firmware goes in (a cache hit for the
	// VM test beside this one).
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rd.Firmware) == 0 {
		t.Fatal("the ramdisk holds no firmware")
	}
	want := map[string]string{"ironic-agent-xz-test.bin": sha(xzPlain)}
	names := []string{"ironic-agent-xz-test.bin", "ironic-agent-absent.bin"}
	flavour, err := qemu.KernelFlavour()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := ramdisk.FetchFirmware(ctx, cache, flavour, ramdisk.FirmwarePackages())
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	for _, p := range pkgs {
		dirs[p.Name] = p.Dir
	}
	for _, f := range rd.Firmware {
		var data []byte
		for _, root := range []string{"lib/firmware", "usr/lib/firmware"} {
			if data, err = os.ReadFile(filepath.Join(dirs[f.Package], root, f.Name)); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("%s of %s: %v", f.Name, f.Package, err)
		}
		// Debian 13 and later ship firmware XZ-compressed: the kernel is
		// asked for the plain name and hands back the decompressed bytes.
		name := f.Name
		if plain, ok := strings.CutSuffix(f.Name, ".xz"); ok {
			cmd := exec.CommandContext(ctx, "xz", "-dc")
			cmd.Stdin = bytes.NewReader(data)
			if data, err = cmd.Output(); err != nil {
				t.Fatalf("xz -dc %s of %s: %v", f.Name, f.Package, err)
			}
			name = plain
		}
		want[name] = sha(data)
		names = append(names, name)
	}
	// The kernel's test module, decompressed as the build does with every
	// module (Debian 13 ships them XZ-compressed).
	tree, err := kmod.Open(k.ModulesDir)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := tree.Resolve([]string{"test_firmware"})
	if err != nil {
		t.Fatal(err)
	}
	tfData, err := kmod.ReadModule(filepath.Join(k.ModulesDir, tf[len(tf)-1].Path))
	if err != nil {
		t.Fatal(err)
	}
	testFirmwareKo := filepath.Join(work, "test_firmware.ko")
	if err := os.WriteFile(testFirmwareKo, tfData, 0o644); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(work, "names")
	if err := os.WriteFile(list, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rd, err = qemu.BuildGuestRamdisk(ctx, "./internal/testbed/guest/firmware", map[string]string{
		"lib/modules/test_firmware.ko":             testFirmwareKo,
		"lib/firmware/ironic-agent-xz-test.bin.xz": xzFile + ".xz",
		"etc/fwguest-names":                        list,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-firmware"
	m.Dir = filepath.Join(work, "vm")
	m.Disks = nil
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: "52:54:00:12:34:01", Backend: qemu.NICIsolated}}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "ironic_agent.cmd=check ironic_agent.dhcp=none ironic_agent.exit=poweroff"
	vm := runVM(t, m)
	got := map[string][]string{}
	done := false
	for _, l := range vm.Lines() {
		f := strings.Fields(l.Text)
		if len(f) >= 2 && f[0] == "fwguest:" {
			done = done || f[1] == "done"
			if len(f) >= 3 {
				got[f[2]] = f[1:]
			}
		}
	}
	if !done {
		t.Fatalf("fwguest did not finish:\n%s", tail(vm.Lines(), 60))
	}
	for name, sum := range want {
		r := got[name]
		switch {
		case r == nil:
			t.Errorf("%s: no result", name)
		case r[0] != "ok":
			t.Errorf("%s: the kernel did not load it: %s", name, strings.Join(r, " "))
		case r[len(r)-1] != sum:
			t.Errorf("%s: loaded %s bytes with SHA-256 %s, the package's file has %s", name, r[2], r[3], sum)
		}
	}
	r := got["ironic-agent-absent.bin"]
	if len(r) < 4 || r[0] != "fail" {
		t.Errorf("ironic-agent-absent.bin: %v, want a failure", r)
	} else if s, err := strconv.ParseFloat(r[len(r)-1], 64); err != nil || s > 10 {
		t.Errorf("ironic-agent-absent.bin failed after %s s: a user-space helper fallback waited", r[len(r)-1])
	} else {
		t.Logf("a missing file fails at once: %s", strings.Join(r, " "))
	}
	t.Logf("%d firmware files loaded by the kernel from /lib/firmware", len(want))
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
