package collector

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/collector/internal/udev"
)

// These tests ask udev's own programs about this machine's block devices
// (without a running udevd: `udevadm test-builtin` and the scsi_id/ata_id
// helpers only read sysfs and send INQUIRY/IDENTIFY) and compare their
// properties with the ones the collector derives from sysfs.

// udevProps parses KEY=VALUE lines.
func udevProps(out []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && k != "" && !strings.ContainsAny(k, " :") {
			m[k] = v
		}
	}
	return m
}

func TestPathIDMatchesUdevadm(t *testing.T) {
	udevadm, err := exec.LookPath("udevadm")
	if err != nil {
		t.Skip("SKIPPED: udevadm (package udev) not installed; nothing to compare path_id with")
	}
	r := newSysReader("/", testLogger(t))
	names := r.entries("sys/class/block")
	if len(names) == 0 {
		t.Skip("SKIPPED: no block devices on this machine")
	}
	for _, name := range names {
		cmd := exec.Command(udevadm, "test-builtin", "path_id", "/sys/class/block/"+name)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, runErr := cmd.Output()
		want := udevProps(out)
		dev, err := r.resolve("sys/class/block/" + name)
		if err != nil {
			// Loop devices and their partitions come and go while other
			// tests run.
			t.Logf("%s: gone: %v", name, err)
			continue
		}
		got, ok := udev.PathID(udevSys{r}, dev)
		if _, err := os.Stat("/sys/class/block/" + name); err != nil {
			continue // removed meanwhile
		}
		if runErr != nil || want["ID_PATH"] == "" {
			// path_id fails for virtual devices and unknown buses.
			if ok {
				t.Errorf("%s: we name it %q, udev's path_id gives none (%v: %s)", name, got.Path, runErr, strings.TrimSpace(stderr.String()))
			}
			continue
		}
		if !ok || got.Path != want["ID_PATH"] || got.Compat != want["ID_PATH_ATA_COMPAT"] {
			t.Errorf("%s: ID_PATH %q compat %q, udev says %q compat %q", name, got.Path, got.Compat, want["ID_PATH"], want["ID_PATH_ATA_COMPAT"])
		} else {
			t.Logf("%s: ID_PATH=%s agrees with udevadm", name, got.Path)
		}
	}
}

// TestSCSIPropsMatchUdevHelpers compares, for each SCSI disk, what scsi_id
// or ata_id print with what the collector derives from sysfs.
func TestSCSIPropsMatchUdevHelpers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: scsi_id and ata_id open the disks (read-only INQUIRY/IDENTIFY)")
	}
	c := newDiskCollector(Options{Root: "/", IgnoreUdev: true, Logger: testLogger(t)})
	n := 0
	for _, name := range c.r.entries("sys/block") {
		if !strings.HasPrefix(name, "sd") {
			continue
		}
		d, ok := c.probe(name)
		if !ok {
			continue
		}
		vendorAttr, _ := c.r.attr(d.base + "/device/vendor")
		vendor := strings.TrimSpace(vendorAttr)
		helper, args := "/lib/udev/scsi_id", []string{"--export", "--whitelisted", "-d", "/dev/" + name}
		if vendor == "ATA" {
			helper, args = "/lib/udev/ata_id", []string{"--export", "/dev/" + name}
		}
		if _, err := os.Stat(helper); err != nil {
			t.Skipf("SKIPPED: %s (package udev) not installed", helper)
		}
		if udev.USBDevice(c.sys(), d.devPath) != "" {
			continue // usb_id, a udevd builtin, names USB disks
		}
		out, err := exec.Command(helper, args...).Output()
		if err != nil {
			t.Logf("%s %s: %v (device gives no identity; skipped)", helper, strings.Join(args, " "), err)
			continue
		}
		n++
		want := udevProps(out)
		got := c.deriveProps(d)
		for _, k := range []string{"ID_SERIAL", "ID_SERIAL_SHORT", "ID_WWN", "ID_WWN_WITH_EXTENSION", "ID_WWN_VENDOR_EXTENSION", "ID_SCSI_SERIAL"} {
			if strings.TrimSpace(want[k]) != got[k] {
				t.Errorf("%s: %s: derived %q, %s says %q", name, k, got[k], helper, want[k])
			}
		}
		if w, g := udev.NormalizeWhitespace(udev.Unhexmangle(want["ID_MODEL_ENC"])), udev.NormalizeWhitespace(udev.Unhexmangle(got["ID_MODEL_ENC"])); w != g {
			t.Errorf("%s: model %q, %s says %q", name, g, helper, w)
		}
	}
	if n == 0 {
		t.Skip("SKIPPED: no SCSI or ATA disk on this machine to ask scsi_id or ata_id about")
	}
}
