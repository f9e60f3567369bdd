package vmedia

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// testCA stands for the CA bundle of [agent]api_ca_file.
const testCA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// tlsConf is what Ironic's prepare_deploy_iso writes beside it.
const tlsConf = "[DEFAULT]\ncafile = /etc/ironic-python-agent/ironic.crt\n"

// bootISO makes the ISO Ironic builds with [agent]api_ca_file set (its
// inject_files, through xorriso's mkisofs as Ironic's genisoimage call).
func bootISO(t *testing.T, label, publisher string) string {
	t.Helper()
	src := t.TempDir()
	for f, data := range map[string]string{"etc/ironic-python-agent/ironic.crt": testCA, "etc/ironic-python-agent.d/ironic-tls.conf": tlsConf,
		"isolinux/isolinux.cfg": "default boot\n"} {
		os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(src, f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	iso := filepath.Join(t.TempDir(), "boot.iso")
	args := []string{"-as", "mkisofs", "-quiet", "-r", "-J", "-l", "-V", label, "-o", iso}
	if publisher != "" {
		args = append(args, "-publisher", publisher)
	}
	looptest.Run(t, "xorriso", append(args, src)...)
	return iso
}

// paramsImage makes Ironic's create_vfat_image: 1440 KiB, mkfs.vfat
// labelled ir-vfd-dev, parameters.txt copied in with mcopy.
func paramsImage(t *testing.T, label, params string) string {
	t.Helper()
	dir := t.TempDir()
	img := filepath.Join(dir, "floppy.img")
	if err := os.WriteFile(img, make([]byte, 1440<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	looptest.Run(t, "mkfs.vfat", "-n", label, img)
	p := filepath.Join(dir, ParametersFile)
	if err := os.WriteFile(p, []byte(params), 0o644); err != nil {
		t.Fatal(err)
	}
	looptest.Run(t, "mcopy", "-i", img, p, "::")
	return img
}

// fakeBlock is one block device of the test's sysfs: its devices path
// (below sys/devices: a USB one has "usb" in it) and attributes; dev the
// loop device standing in for /dev/NAME ("" for none).
type fakeBlock struct {
	devpath string
	attrs   map[string]string
	dev     string
}

// fakeSys makes sys/class/block with the devices and dev/ with links to
// their loop devices, and returns the Options reading them.
func fakeSys(t *testing.T, blocks map[string]fakeBlock) Options {
	t.Helper()
	root := t.TempDir()
	o := Options{SysBlock: filepath.Join(root, "sys/class/block"), SysUSB: filepath.Join(root, "sys/bus/usb/devices"),
		DevDir: filepath.Join(root, "dev"), MountDir: filepath.Join(root, "run/vmedia"), Etc: filepath.Join(root, "etc"), USBWait: time.Second}
	for _, d := range []string{o.SysBlock, o.SysUSB, o.DevDir} {
		os.MkdirAll(d, 0o755)
	}
	for name, b := range blocks {
		real := filepath.Join(root, "sys/devices", b.devpath, "block", name)
		os.MkdirAll(real, 0o755)
		for a, v := range b.attrs {
			os.MkdirAll(filepath.Dir(filepath.Join(real, a)), 0o755)
			os.WriteFile(filepath.Join(real, a), []byte(v+"\n"), 0o644)
		}
		if err := os.Symlink(real, filepath.Join(o.SysBlock, name)); err != nil {
			t.Fatal(err)
		}
		if b.dev != "" {
			os.Symlink(b.dev, filepath.Join(o.DevDir, name))
		}
	}
	return o
}

const (
	usbPath = "pci0000:00/0000:00:1d.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0"
	sataCD  = "pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0"
	virtio  = "pci0000:00/0000:00:04.0/virtio2"
)

// ironicMedia are the devices of a machine Ironic booted from virtual
// media with config_via_removable, as the images Ironic makes (devs: the
// files or loop devices holding them): the boot ISO on a SATA CD-ROM
// beside a stale one of another publisher, the parameters' stick on USB,
// and decoys carrying the labels that are no virtual media: a partition
// and a big USB disk.
func ironicMedia(t *testing.T, attach func(img string) string) Options {
	t.Helper()
	iso := attach(bootISO(t, BootISOLabel, testPublisher))
	stale := attach(bootISO(t, ConfigDriveLabel, "0000-old"))
	stick := attach(paramsImage(t, "ir-vfd-dev", ironicParameters+"\nnoequals\n"))
	decoy := attach(paramsImage(t, "IR-VFD-DEV", "ipa-api-url=http://decoy\n"))
	o := fakeSys(t, map[string]fakeBlock{
		"sr0":  {devpath: sataCD, attrs: map[string]string{"device/type": "5", "size": "1000"}, dev: stale},
		"sr1":  {devpath: sataCD, attrs: map[string]string{"device/type": "5", "size": "1000"}, dev: iso},
		"sda":  {devpath: usbPath, attrs: map[string]string{"device/type": "0", "size": "9000000"}, dev: decoy}, // 4.6 GB
		"sdb":  {devpath: usbPath, attrs: map[string]string{"device/type": "0", "size": "2880"}, dev: stick},
		"vda":  {devpath: virtio, attrs: map[string]string{"size": "2880"}},
		"vda1": {devpath: virtio + "/block/vda", attrs: map[string]string{"partition": "1", "size": "2880"}, dev: decoy},
	})
	o.Publisher = testPublisher
	return o
}

const testPublisher = "6f1b3a52-0c8e-4c5e-9b1d-2f0e6c1a7d44"

// TestFind picks the media among ironicMedia's devices (image files stand
// in for them) as IPA's _find_vmedia_device_by_labels and
// _check_vmedia_device do, and names every candidate passed over with
// its reason.
func TestFind(t *testing.T) {
	looptest.RequireTools(t, "xorriso", "mkfs.vfat", "mcopy")
	o := ironicMedia(t, func(img string) string { return img })
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	if dev, vol, ok := find(log, o, ConfigDriveLabel, BootISOLabel); !ok || dev != filepath.Join(o.DevDir, "sr1") || vol.FSType != "iso9660" {
		t.Errorf("boot medium %q %+v %v, want sr1", dev, vol, ok)
	}
	if dev, vol, ok := find(log, o, ParametersLabel); !ok || dev != filepath.Join(o.DevDir, "sdb") || vol.FSType != "vfat" {
		t.Errorf("parameters medium %q %+v %v, want sdb", dev, vol, ok)
	}
	l := logBuf.String()
	t.Logf("log:\n%s", l)
	for _, want := range []string{
		`"virtual media: candidate passed over" device=` + filepath.Join(o.DevDir, "sr0") + ` label=config-2 reason="ISO publisher`,
		`device=` + filepath.Join(o.DevDir, "sda") + ` label=IR-VFD-DEV reason="a USB disk of 4608000000 bytes, not under 4 GiB"`,
	} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if strings.Contains(l, "vda1") {
		// Listed after sdb, which was taken.
		t.Errorf("vda1 looked at after the medium was found")
	}
	// The link udev would make, which the erase steps look for.
	labelLink(log, o.DevDir, filepath.Join(o.DevDir, "sdb"))
	if got, _ := os.Readlink(filepath.Join(o.DevDir, "disk/by-label/ir-vfd-dev")); got != "../../sdb" {
		t.Errorf("by-label link points to %q, want ../../sdb", got)
	}
	// Without the stick, the partition is passed over too.
	os.Remove(filepath.Join(o.SysBlock, "sdb"))
	logBuf.Reset()
	if dev, _, ok := find(log, o, ParametersLabel); ok {
		t.Errorf("found %s", dev)
	}
	if want := `device=` + filepath.Join(o.DevDir, "vda1") + ` label=IR-VFD-DEV reason="a partition"`; !strings.Contains(logBuf.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, logBuf.String())
	}
	// IPA's fallback: the model a BMC gives its device.
	os.WriteFile(filepath.Join(o.SysBlock, "sr1", "device", "model"), []byte("Virtual Media   \n"), 0o644)
	if dev, _, ok := findByModel(log, o); !ok || dev != filepath.Join(o.DevDir, "sr1") {
		t.Errorf("by model: %q %v, want sr1", dev, ok)
	}
}

// TestLoad boots "from virtual media" on loop devices holding ironicMedia:
// the boot ISO's configuration is copied, the stick's parameters.txt is
// read with the medium's values winning, and the malformed entry is
// logged with device, file and reason.
func TestLoad(t *testing.T) {
	looptest.RequireRoot(t, "losetup", "xorriso", "mkfs.vfat", "mcopy")
	if fss, _ := os.ReadFile("/proc/filesystems"); !bytes.Contains(fss, []byte("\tvfat\n")) || !bytes.Contains(fss, []byte("\tiso9660\n")) {
		t.Skip("SKIPPED: this kernel cannot mount vfat and iso9660 (not in /proc/filesystems); TestFind covers the choice, TestVMRedfishRemovableConfig (e2e/vm) all of it")
	}
	o := ironicMedia(t, func(img string) string { return looptest.AttachFile(t, img, "--read-only") })
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	cmdline := map[string]string{"boot_method": "vmedia", "ipa-debug": "0", "BOOTIF": "52:54:00:6d:33:01"}
	params := Load(context.Background(), log, cmdline, o)
	t.Logf("log:\n%s", logBuf.String())
	if params["ipa-api-url"] != "http://10.99.0.1:6385" || params["ipa-agent-token"] != "Aw3Qh-t0k3n" || params["ipa-debug"] != "1" || len(params) != 5 {
		t.Errorf("parameters %v, want the stick's", params)
	}
	for f, want := range map[string]string{"ironic-python-agent/ironic.crt": testCA, "ironic-python-agent.d/ironic-tls.conf": tlsConf} {
		if b, err := os.ReadFile(filepath.Join(o.Etc, f)); err != nil || string(b) != want {
			t.Errorf("/etc/%s: %q, %v; want the ISO's", f, b, err)
		}
	}
	l := logBuf.String()
	for _, want := range []string{
		logtext.Msg(EventConfigCopied) + " device=" + filepath.Join(o.DevDir, "sr1") + " from=/etc/ironic-python-agent ",
		logtext.Msg(EventConfigCopied) + " device=" + filepath.Join(o.DevDir, "sr1") + " from=/etc/ironic-python-agent.d ",
		`"virtual media parameter not taken" device=` + filepath.Join(o.DevDir, "sdb") + ` file=parameters.txt entry="line 6: \"noequals\": no '='`,
		logtext.Msg(EventParameters) + " device=" + filepath.Join(o.DevDir, "sdb") + " file=parameters.txt count=5 ",
		"overriding=ipa-debug ",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if ents, _ := os.ReadDir(o.MountDir); len(ents) != 0 {
		t.Errorf("mount directories left: %v", ents)
	}
}

// TestLoadNotVmedia: without boot_method=vmedia nothing is read or copied,
// and the log says so.
func TestLoadNotVmedia(t *testing.T) {
	o := fakeSys(t, nil)
	var logBuf bytes.Buffer
	if p := Load(context.Background(), slog.New(slog.NewTextHandler(&logBuf, nil)), map[string]string{"BOOTIF": "x"}, o); p != nil {
		t.Errorf("parameters %v", p)
	}
	if !strings.Contains(logBuf.String(), logtext.Msg(EventNotBooted)) {
		t.Errorf("log: %s", logBuf.String())
	}
	if _, err := os.Stat(o.Etc); err == nil {
		t.Error("the configuration directory was made")
	}
}

// TestLoadNoMedia: booted from virtual media with neither medium (the
// parameters on the kernel's line alone), and a device that vanished
// between the listing and the read, which is named.
func TestLoadNoMedia(t *testing.T) {
	o := fakeSys(t, map[string]fakeBlock{"sdc": {devpath: usbPath, attrs: map[string]string{"size": "2880"}, dev: "/nonexistent/sdc"}})
	var logBuf bytes.Buffer
	if p := Load(context.Background(), slog.New(slog.NewTextHandler(&logBuf, nil)), map[string]string{"boot_method": "vmedia"}, o); p != nil {
		t.Errorf("parameters %v", p)
	}
	for _, want := range []string{logtext.Msg(EventNoParameters), `"virtual media: device not readable" device=` + filepath.Join(o.DevDir, "sdc")} {
		if !strings.Contains(logBuf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logBuf.String())
		}
	}
}

// TestWaitUSBStorage: a mass-storage interface without a driver has
// usb_storage loaded, then sd_mod for its SCSI disk, and one still
// without its disk is waited for, at most USBWait, then named.
func TestWaitUSBStorage(t *testing.T) {
	o := fakeSys(t, nil)
	iface := filepath.Join(o.SysUSB, "2-1:1.0")
	os.MkdirAll(iface, 0o755)
	os.WriteFile(filepath.Join(iface, "bInterfaceClass"), []byte("08\n"), 0o644)
	hid := filepath.Join(o.SysUSB, "1-1:1.0")
	os.MkdirAll(hid, 0o755)
	os.WriteFile(filepath.Join(hid, "bInterfaceClass"), []byte("03\n"), 0o644)
	var loads []string
	o.LoadModule = func(name string) error {
		loads = append(loads, name)
		if name == "usb_storage" {
			// Bound; its SCSI disk is there, without its driver.
			os.MkdirAll(filepath.Join(iface, "host6/target6:0:0/6:0:0:0"), 0o755)
			os.WriteFile(filepath.Join(iface, "host6/target6:0:0/6:0:0:0/type"), []byte("0\n"), 0o644)
			return os.Mkdir(filepath.Join(iface, "driver"), 0o755)
		}
		return nil
	}
	o.USBWait = 300 * time.Millisecond
	var logBuf bytes.Buffer
	waitUSBStorage(context.Background(), slog.New(slog.NewTextHandler(&logBuf, nil)), o)
	if strings.Join(loads, ",") != "usb_storage,sd_mod" {
		t.Errorf("modules loaded: %v", loads)
	}
	if !strings.Contains(logBuf.String(), `"virtual media: USB mass storage without a disk" unbound="" scanning=enumeration,2-1:1.0`) {
		t.Errorf("log: %s", logBuf.String())
	}
	// Its disk appears: the wait is the bus's quiet second.
	os.MkdirAll(filepath.Join(iface, "host6/target6:0:0/6:0:0:0/block/sdb"), 0o755)
	logBuf.Reset()
	o.USBWait = 10 * time.Second
	start := time.Now()
	waitUSBStorage(context.Background(), slog.New(slog.NewTextHandler(&logBuf, nil)), o)
	if !strings.Contains(logBuf.String(), `"virtual media: USB devices settled" devices=2`) || time.Since(start) > 5*time.Second {
		t.Errorf("log: %s", logBuf.String())
	}
	// No USB at all: no wait, nothing said.
	o = fakeSys(t, nil)
	logBuf.Reset()
	waitUSBStorage(context.Background(), slog.New(slog.NewTextHandler(&logBuf, nil)), o)
	if logBuf.Len() != 0 {
		t.Errorf("log: %s", logBuf.String())
	}
}
