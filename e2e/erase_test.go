package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// gptDisk returns a 64 MiB loop device holding a GPT with one partition
// whose area carries an ext4 filesystem: metadata an erase must remove. The
// filesystem is made at the partition's offset rather than on a partition
// device because the CI kernel has no partition-table support (no loopNp1
// ever appears).
func gptDisk(t *testing.T) string {
	t.Helper()
	dev := loopDevice(t, 64<<20)
	run(t, "sgdisk", "--new=1:2048:0", "--typecode=1:8300", dev)
	run(t, "mkfs.ext4", "-q", "-F", "-E", "offset=1048576", dev, "32M")
	if sig := signatures(t, dev); !strings.Contains(sig, "gpt") {
		t.Fatalf("wipefs %s after sgdisk = %q, want a gpt signature", dev, sig)
	}
	return dev
}

// ext4Disk returns a 32 MiB loop device with an ext4 filesystem on the
// whole device.
func ext4Disk(t *testing.T) string {
	t.Helper()
	dev := loopDevice(t, 32<<20)
	run(t, "mkfs.ext4", "-q", "-F", dev)
	if sig := signatures(t, dev); !strings.Contains(sig, "ext4") {
		t.Fatalf("wipefs %s after mkfs = %q, want an ext4 signature", dev, sig)
	}
	return dev
}

// assertWiped checks that dev has no partition table or filesystem
// signature left, by wipefs and by a low-level blkid probe.
func assertWiped(t *testing.T, dev string) {
	t.Helper()
	if sig := signatures(t, dev); sig != "" {
		t.Errorf("wipefs still finds signatures on %s:\n%s", dev, sig)
	}
	out, err := exec.Command("blkid", "--probe", "--output", "export", dev).CombinedOutput()
	// blkid exits 2 when it finds nothing.
	if err == nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("blkid --probe %s finds: %s (%v)", dev, out, err)
	}
}

// TestAutomatedCleaning is scenario (a): provide runs automated cleaning
// (erase_devices_metadata at priority 99, erase_devices disabled), the agent
// cleans its loop device and the node becomes available.
func TestAutomatedCleaning(t *testing.T) {
	s := need(t)
	dev := gptDisk(t)
	const mac = "52:54:e2:0a:00:01"
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "e2e-automated-clean"}, mac)
	s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, Devices: []string{dev}}).Provide(stepTimeout)
	assertWiped(t, dev)
}

// TestManualCleaning is scenario (b): manual cleaning with
// erase_devices_metadata returns the node to manageable, and the partition
// table of one loop device and the filesystem of another are really gone.
func TestManualCleaning(t *testing.T) {
	s := need(t)
	gpt, ext4 := gptDisk(t), ext4Disk(t)
	const mac = "52:54:e2:0b:00:01"
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "e2e-manual-clean"}, mac)
	s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, Devices: []string{gpt, ext4}}).
		Clean(stepTimeout, nodes.CleanStep{Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"})
	assertWiped(t, gpt)
	assertWiped(t, ext4)
}

// run runs a command and fails the test with its output on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// signatures lists what wipefs finds on dev (empty: no partition table or
// filesystem signature left).
func signatures(t *testing.T, dev string) string {
	t.Helper()
	out, err := exec.Command("wipefs", "--no-act", "--noheadings", dev).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wipefs %s: %v", dev, err)
	}
	return strings.TrimSpace(string(out))
}
