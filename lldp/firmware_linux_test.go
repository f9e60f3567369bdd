package lldp

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeFlags records private-flag changes.
type fakeFlags struct {
	flags map[string]map[string]bool
	calls []string
	open  int
}

func (f *fakeFlags) Get(iface string) (map[string]bool, error) {
	m, ok := f.flags[iface]
	if !ok {
		return nil, os.ErrNotExist
	}
	return m, nil
}

func (f *fakeFlags) Set(iface, flag string, on bool) error {
	f.calls = append(f.calls, iface+" "+flag+"="+map[bool]string{true: "on", false: "off"}[on])
	f.flags[iface][flag] = on
	return nil
}

func (f *fakeFlags) Close() error { f.open--; return nil }

// nic lays out /sys/class/net/<name> -> a PCI device bound to driver, as
// the kernel does.
func nic(t *testing.T, root, name, pci, driver string) {
	t.Helper()
	dev := filepath.Join(root, "sys/devices/pci0000:00", pci)
	drv := filepath.Join(root, "sys/bus/pci/drivers", driver)
	for _, d := range []string{filepath.Join(dev, "net", name), drv} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		filepath.Join(root, "sys/class/net", name): "../../devices/pci0000:00/" + pci + "/net/" + name,
		filepath.Join(dev, "driver"):               "../../bus/pci/drivers/" + driver,
		filepath.Join(dev, "net", name, "device"):  "../../../" + pci,
	}
	for l, target := range links {
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStopFirmwareLLDP(t *testing.T) {
	root := t.TempDir()
	nic(t, root, "eth0", "0000:3b:00.0", "i40e")  // debugfs present: IPA's way
	nic(t, root, "eth1", "0000:3b:00.1", "i40e")  // no debugfs: private flag
	nic(t, root, "eth2", "0000:3b:00.2", "i40e")  // flag already on: left alone
	nic(t, root, "eth3", "0000:5e:00.0", "ixgbe") // not i40e: untouched
	cmd := filepath.Join(root, "sys/kernel/debug/i40e/0000:3b:00.0/command")
	if err := os.MkdirAll(filepath.Dir(cmd), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cmd, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ff := &fakeFlags{flags: map[string]map[string]bool{
		"eth1": {"disable-fw-lldp": false, "link-down-on-close": false},
		"eth2": {"disable-fw-lldp": true},
	}}
	open := func() (privateFlags, error) { ff.open++; return ff, nil }

	fw := stopFirmwareLLDP(t.Context(), root, []string{"eth0", "eth1", "eth2", "eth3", "missing"}, open, slog.New(slog.DiscardHandler))
	if b, _ := os.ReadFile(cmd); string(b) != "lldp stop" {
		t.Errorf("debugfs command file holds %q, want %q", b, "lldp stop")
	}
	if want := []string{"eth1 disable-fw-lldp=on"}; !reflect.DeepEqual(ff.calls, want) {
		t.Errorf("flag changes before the capture: %v, want %v", ff.calls, want)
	}
	fw.restore()
	if want := []string{"eth1 disable-fw-lldp=on", "eth1 disable-fw-lldp=off"}; !reflect.DeepEqual(ff.calls, want) {
		t.Errorf("flag changes after restore: %v, want %v", ff.calls, want)
	}
	if ff.open != 0 {
		t.Errorf("ethtool client opened %d times more than closed", ff.open)
	}
}

func TestStopFirmwareLLDPNoI40e(t *testing.T) {
	root := t.TempDir()
	nic(t, root, "eth0", "0000:01:00.0", "virtio-pci")
	// stopFirmwareLLDP only logs a failed open, so the fake itself fails
	// the test when it is called.
	open := func() (privateFlags, error) {
		t.Error("the ethtool client was opened for a machine without an i40e NIC")
		return nil, errors.New("must not be opened")
	}
	fw := stopFirmwareLLDP(t.Context(), root, []string{"eth0"}, open, slog.New(slog.DiscardHandler))
	fw.restore()
}

// TestStopFirmwareLLDPUnderLockdown: under Secure Boot's lockdown the
// kernel refuses debugfs writes (EPERM); the log names lockdown and the
// file, and the private flag stops the firmware agent instead. An
// immutable file (chattr +i, which refuses root's writes with EPERM too)
// stands in for the locked-down debugfs file.
func TestStopFirmwareLLDPUnderLockdown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: setting the immutable flag needs CAP_LINUX_IMMUTABLE")
	}
	root := t.TempDir()
	nic(t, root, "eth0", "0000:3b:00.0", "i40e")
	for p, content := range map[string]string{
		"sys/kernel/security/lockdown":               "none [integrity] confidentiality\n",
		"sys/kernel/debug/i40e/0000:3b:00.0/command": "",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := filepath.Join(root, "sys/kernel/debug/i40e/0000:3b:00.0/command")
	setFlags := func(fl int) error {
		f, err := os.Open(cmd)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, fl)
	}
	const immutable = 0x10 // FS_IMMUTABLE_FL
	if err := setFlags(immutable); err != nil {
		t.Skipf("SKIPPED: cannot set the immutable flag in %s: %v", root, err)
	}
	// Before the temporary directory's removal, which it would refuse.
	t.Cleanup(func() {
		if err := setFlags(0); err != nil {
			t.Errorf("clearing the immutable flag: %v", err)
		}
	})
	ff := &fakeFlags{flags: map[string]map[string]bool{"eth0": {"disable-fw-lldp": false}}}
	var log bytes.Buffer
	fw := stopFirmwareLLDP(t.Context(), root, []string{"eth0"}, func() (privateFlags, error) { ff.open++; return ff, nil },
		slog.New(slog.NewTextHandler(&log, nil)))
	out := log.String()
	if !strings.Contains(out, "refused by the kernel's lockdown (integrity mode") || !strings.Contains(out, "debugfs write "+cmd) {
		t.Errorf("the log does not name lockdown and the debugfs file:\n%s", out)
	}
	if want := []string{"eth0 disable-fw-lldp=on"}; !reflect.DeepEqual(ff.calls, want) {
		t.Errorf("flag changes after debugfs was refused: %v, want %v\n%s", ff.calls, want, out)
	}
	fw.restore()
}
