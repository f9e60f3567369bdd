package vmedia

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// Options say where Load looks and writes; the init's are the machine's
// own paths, a test's its own directories.
type Options struct {
	SysBlock  string // /sys/class/block
	SysUSB    string // /sys/bus/usb/devices
	DevDir    string // /dev
	MountDir  string // where a medium is mounted while read (made and removed)
	Etc       string // /etc: where the configuration directories go
	Publisher string // ir_pub_id of the kernel command line: an ISO of another publisher is not the boot medium
	// LoadModule loads a kernel module by name: usb_storage, for a USB
	// stick the BMC attached after the init's coldplug.
	LoadModule func(name string) error
	// USBWait bounds the wait for USB mass-storage devices to show their
	// disks (usb-storage scans a device a second after it binds).
	USBWait time.Duration
}

// The directories of the boot medium copied into Options.Etc, as IPA's
// _copy_config_from does.
var configDirs = []string{"etc/ironic-python-agent", "etc/ironic-python-agent.d"}

// Load does what IPA does with virtual media before the agent starts, when
// cmdline (the kernel's) has boot_method=vmedia: it copies the boot
// medium's configuration into o.Etc and returns the parameters of
// parameters.txt for the caller to merge (nil when there are none). Every
// device passed over, file not copied and entry not taken is logged with
// its reason; none stops the boot.
func Load(ctx context.Context, log *slog.Logger, cmdline map[string]string, o Options) map[string]string {
	if m := cmdline[ParamBootMethod]; m != BootMethodVmedia {
		log.Info(EventNotBooted, ParamBootMethod, m)
		return nil
	}
	t := time.Now()
	waitUSBStorage(ctx, log, o)
	if dev, vol, ok := find(log, o, ConfigDriveLabel, BootISOLabel); ok {
		if err := withMounted(dev, vol.FSType, filepath.Join(o.MountDir, "boot"), func(root string) error {
			copyConfig(log, dev, root, o.Etc)
			return nil
		}); err != nil {
			log.Error("virtual media configuration not copied", "device", dev, "label", vol.Label, "error", err)
		}
	} else {
		log.Info("no virtual media boot device with configuration", "labels", ConfigDriveLabel+","+BootISOLabel)
	}
	dev, vol, ok := find(log, o, ParametersLabel)
	if ok {
		labelLink(log, o.DevDir, dev)
	}
	if !ok {
		// IPA's fallback: the device a BMC names "virtual media".
		dev, vol, ok = findByModel(log, o)
	}
	if !ok {
		log.Info(EventNoParameters, "label", ParametersLabel, "seconds", logging.Seconds(time.Since(t)))
		return nil
	}
	var params map[string]string
	err := withMounted(dev, vol.FSType, filepath.Join(o.MountDir, "params"), func(root string) error {
		b, err := readLimited(filepath.Join(root, ParametersFile), 1<<20)
		if err != nil {
			return err
		}
		var problems []Problem
		params, problems = ParseParameters(b)
		for _, p := range problems {
			log.Error("virtual media parameter not taken", "device", dev, "file", ParametersFile, "entry", p.String())
		}
		return nil
	})
	if err != nil {
		log.Error("virtual media parameters not read", "device", dev, "file", ParametersFile, "error", err)
		return nil
	}
	keys := slices.Sorted(maps.Keys(params))
	var overridden []string
	for _, k := range keys {
		if v, ok := cmdline[k]; ok && v != params[k] {
			overridden = append(overridden, k)
		}
	}
	log.Info(EventParameters, "device", dev, "file", ParametersFile, "count", len(params),
		"keys", strings.Join(keys, ","), "overriding", strings.Join(overridden, ","), "seconds", logging.Seconds(time.Since(t)))
	return params
}

// labelLink makes /dev/disk/by-label/ir-vfd-dev, the link udev would
// make for the parameters' medium: the erase steps pass over the device it
// names, as IPA's do, since the medium is the BMC's and read-only.
func labelLink(log *slog.Logger, devDir, dev string) {
	link := filepath.Join(devDir, "disk", "by-label", ParametersLabel)
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		log.Error("virtual media: label link not made", "link", link, "device", dev, "error", err)
		return
	}
	rel, err := filepath.Rel(filepath.Dir(link), dev)
	if err != nil {
		rel = dev
	}
	os.Remove(link)
	if err := os.Symlink(rel, link); err != nil {
		log.Error("virtual media: label link not made", "link", link, "device", dev, "error", err)
	}
}

// readLimited reads a file of at most limit bytes: parameters.txt is a
// few hundred; a bigger one is not Ironic's.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: over %d bytes", path, limit)
	}
	return b, nil
}

// blockNames are the block devices below sysBlock in name order, but
// loop, RAM and zram devices, which no BMC attaches.
func blockNames(sysBlock string) []string {
	ents, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "loop") || strings.HasPrefix(n, "ram") || strings.HasPrefix(n, "zram") {
			continue
		}
		names = append(names, n)
	}
	return names
}

// find is IPA's _find_vmedia_device_by_labels: the first block device
// whose label is one of labels (without case) and that passes Check. An
// ISO of another publisher than o.Publisher (when set) is a medium left
// from an earlier boot, passed over as the init's network data does.
func find(log *slog.Logger, o Options, labels ...string) (string, Volume, bool) {
	for _, name := range blockNames(o.SysBlock) {
		dev := filepath.Join(o.DevDir, name)
		vol, err := Probe(dev)
		if err != nil {
			if !errors.Is(err, unix.ENOMEDIUM) {
				// A device gone between the listing and the read, or one
				// that cannot be read: it might have been the medium.
				log.Warn("virtual media: device not readable", "device", dev, "error", err)
			}
			continue
		}
		if vol.FSType == "" || !slices.ContainsFunc(labels, func(l string) bool { return strings.EqualFold(l, vol.Label) }) {
			continue
		}
		if err := Check(o.SysBlock, name); err != nil {
			log.Warn("virtual media: candidate passed over", "device", dev, "label", vol.Label, "reason", err)
			continue
		}
		if o.Publisher != "" && vol.FSType == "iso9660" && !strings.EqualFold(vol.Publisher, o.Publisher) {
			log.Warn("virtual media: candidate passed over", "device", dev, "label", vol.Label,
				"reason", fmt.Sprintf("ISO publisher %q is not the kernel command line's %q", vol.Publisher, o.Publisher))
			continue
		}
		return dev, vol, true
	}
	return "", Volume{}, false
}

// findByModel is IPA's _get_vmedia_device: the block device whose model
// (sysfs) contains "virtual media", when it passes Check and holds a file
// system that can be mounted.
func findByModel(log *slog.Logger, o Options) (string, Volume, bool) {
	for _, name := range blockNames(o.SysBlock) {
		b, err := os.ReadFile(filepath.Join(o.SysBlock, name, "device", "model"))
		if err != nil || !strings.Contains(strings.ToLower(string(b)), "virtual media") {
			continue
		}
		dev := filepath.Join(o.DevDir, name)
		if err := Check(o.SysBlock, name); err != nil {
			log.Warn("virtual media: candidate passed over", "device", dev, "model", strings.TrimSpace(string(b)), "reason", err)
			continue
		}
		vol, err := Probe(dev)
		if err != nil || vol.FSType == "" {
			log.Warn("virtual media: candidate passed over", "device", dev, "model", strings.TrimSpace(string(b)),
				"reason", fmt.Sprintf("no ISO 9660 or FAT file system (%v)", err))
			continue
		}
		return dev, vol, true
	}
	return "", Volume{}, false
}

// withMounted mounts dev (fstype) read-only on dir, runs f with it and
// unmounts it.
func withMounted(dev, fstype, dir string, f func(root string) error) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := MountReadOnly(dev, fstype, dir); err != nil {
		return err
	}
	defer unix.Unmount(dir, 0)
	return f(dir)
}

// MountReadOnly mounts dev, a file system of type fstype, read-only on
// dir, as nothing on a medium is to be run or trusted as a device.
func MountReadOnly(dev, fstype, dir string) error {
	if err := unix.Mount(dev, dir, fstype, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", dev, fstype, dir, err)
	}
	return nil
}

// copyConfig copies the files of root's configDirs into etc, as IPA's
// _copy_config_from: each directory's regular files, replacing what is
// there. A missing directory is said; a file that cannot be copied is an
// error line naming it, and the others are still copied.
func copyConfig(log *slog.Logger, dev, root, etc string) {
	for _, d := range configDirs {
		src := filepath.Join(root, d)
		dst := filepath.Join(etc, strings.TrimPrefix(d, "etc/"))
		ents, err := os.ReadDir(src)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				log.Info("virtual media: no configuration directory", "device", dev, "dir", "/"+d)
			} else {
				log.Error("virtual media configuration not copied", "device", dev, "dir", "/"+d, "error", err)
			}
			continue
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			log.Error("virtual media configuration not copied", "device", dev, "dir", "/"+d, "error", err)
			continue
		}
		var copied []string
		for _, e := range ents {
			if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				log.Error("virtual media configuration file not copied", "device", dev, "file", "/"+d+"/"+e.Name(), "error", err)
				continue
			}
			copied = append(copied, e.Name())
		}
		log.Info(EventConfigCopied, "device", dev, "from", "/"+d, "to", dst, "files", strings.Join(copied, ","))
	}
}

// copyFile copies the regular file src to dst with its permission bits
// (shutil.copy's).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	tmp := dst + ".vmedia-tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	return nil
}

// usbQuiet is how long the USB devices must stay the same before the
// bus is taken as enumerated: the hub driver finds a device on a port some
// time after its host controller's driver loaded.
const usbQuiet = time.Second

// waitUSBStorage waits, at most o.USBWait, until the USB devices have
// stayed the same for usbQuiet and every USB mass-storage interface (class
// 08) has its disk: a BMC's virtual stick may enumerate after the init's
// coldplug ended (usb_storage, then sd_mod or sr_mod for its SCSI device,
// are then loaded here), and usb-storage scans
// a device only a second after binding it. A machine without USB does not
// wait.
func waitUSBStorage(ctx context.Context, log *slog.Logger, o Options) {
	t := time.Now()
	deadline := t.Add(o.USBWait)
	loaded := map[string]bool{}
	lastCount, changed := -1, t
	for {
		var unbound, waiting, need []string
		ents, _ := os.ReadDir(o.SysUSB)
		if len(ents) != lastCount {
			lastCount, changed = len(ents), time.Now()
		}
		if len(ents) > 0 && time.Since(changed) < usbQuiet {
			waiting = append(waiting, "enumeration")
		}
		for _, e := range ents {
			dir := filepath.Join(o.SysUSB, e.Name())
			if b, err := os.ReadFile(filepath.Join(dir, "bInterfaceClass")); err != nil || strings.TrimSpace(string(b)) != "08" {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, "driver")); err != nil {
				unbound = append(unbound, e.Name())
				continue
			}
			if disks, _ := filepath.Glob(filepath.Join(dir, "host*", "target*", "*", "block", "*")); len(disks) == 0 {
				waiting = append(waiting, e.Name())
				// Its SCSI device needs the disk (or CD-ROM) driver,
				// which the coldplug loaded only if such a device
				// existed then.
				types, _ := filepath.Glob(filepath.Join(dir, "host*", "target*", "*", "type"))
				for _, f := range types {
					if b, err := os.ReadFile(f); err == nil {
						switch strings.TrimSpace(string(b)) {
						case "0":
							need = append(need, "sd_mod")
						case "5":
							need = append(need, "sr_mod")
						}
					}
				}
			}
		}
		if len(unbound) > 0 {
			need = append(need, "usb_storage")
		}
		for _, m := range need {
			if loaded[m] || o.LoadModule == nil {
				continue
			}
			loaded[m] = true
			if err := o.LoadModule(m); err != nil {
				log.Error("virtual media: USB mass storage driver not loaded", "module", m, "error", err)
			}
		}
		if len(unbound)+len(waiting) == 0 {
			if len(ents) > 0 {
				log.Info("virtual media: USB devices settled", "devices", len(ents), "seconds", logging.Seconds(time.Since(t)))
			}
			return
		}
		if time.Now().After(deadline) {
			log.Warn("virtual media: USB mass storage without a disk", "unbound", strings.Join(unbound, ","),
				"scanning", strings.Join(waiting, ","), "waited_seconds", logging.Seconds(time.Since(t)))
			return
		}
		if clock.Sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
}
