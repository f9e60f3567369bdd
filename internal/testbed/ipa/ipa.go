// Package ipa builds a ramdisk of Ironic Python Agent 13 itself, from
// Debian forky's packages, for the VM harness (internal/testbed/qemu): the oracle
// and the benchmark our agent is compared with. It is a test tool, not a
// product, and costs minutes to build the first time, so the tests that use
// it run only with IPA_SIDE_BY_SIDE=1 (see Enabled).
//
// The ramdisk is what IPA's own images are: a whole root filesystem as the
// initramfs, /init is systemd, a systemd unit starts ironic-python-agent,
// which reads its ipa-* parameters from the kernel command line itself;
// systemd-networkd asks DHCP on every NIC (diskimage-builder's
// dhcp-all-interfaces does the same with dhclient). The kernel is forky's
// linux-image-amd64 with its modules, less the trees no server of the
// harness has (sound, GPUs, wireless, media, ...).
package ipa

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// EnableEnv is the switch of the tests and benchmarks that boot IPA.
const EnableEnv = "IPA_SIDE_BY_SIDE"

// Enabled says whether $IPA_SIDE_BY_SIDE asks for IPA's ramdisk.
func Enabled() bool { return os.Getenv(EnableEnv) == "1" }

// packFormat changes whenever the packing below changes what the initramfs
// holds for the same root filesystem.
const packFormat = "ipa ramdisk pack 4"

// entryMaxAge is how long an entry of ipa-ramdisk nobody used is kept (an
// entry is about 850 MiB; a new recipe or packing makes a new one).
const entryMaxAge = 48 * time.Hour

// Packages are what the root filesystem installs: IPA, the programs it
// runs (ironic_python_agent/hardware.py and its utilities), systemd as
// init with udev, and the kernel.
var Packages = []string{
	"ironic-python-agent", "linux-image-amd64", "systemd-sysv", "udev", "kmod",
	"lshw", "dmidecode", "hdparm", "nvme-cli", "mdadm", "parted", "gdisk", "util-linux",
	"qemu-utils", "iproute2", "ipmitool", "efibootmgr", "dosfstools", "e2fsprogs", "xfsprogs",
	"smartmontools", "pciutils", "procps",
}

// Recipe is the root filesystem of the IPA ramdisk: forky (IPA 13.0.0),
// debootstrap's sid script, Packages, then finish.
func Recipe() ironic.Recipe {
	return ironic.Recipe{Name: "ipa13", Suite: "forky", Script: "sid", NoValidUntil: true,
		Packages: Packages, Finish: finish, KeyExtra: finishKey()}
}

// Ramdisk is a built IPA ramdisk.
type Ramdisk struct {
	// Kernel is forky's bzImage, Initrd the gzip'ed initramfs, InitrdRaw
	// the same archive uncompressed (faster to unpack under emulation).
	Kernel, Initrd, InitrdRaw string
	KernelVersion             string
	// Versions are the installed versions of Packages.
	Versions map[string]string
	// Cached says the initramfs was already built.
	Cached bool
}

// meta is an entry's meta.json, written last.
type meta struct {
	cachedir.Stamp
	KernelVersion string
	Versions      map[string]string
}

// Ensure returns the IPA ramdisk from the cache (cachedir.Dir()/ipa-ramdisk),
// building the root filesystem (ironic.EnsureDebianRoot, minutes) and
// the initramfs first when needed. The entry's key is the root filesystem's
// key and packFormat: a new recipe or packing makes a new entry.
func Ensure(ctx context.Context) (*Ramdisk, error) {
	cache, err := cachedir.Dir()
	if err != nil {
		return nil, err
	}
	rfs, err := ironic.EnsureDebianRoot(ctx, Recipe(), cache)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(packFormat + "\n" + strings.Join(packMasked, " ") + "\n" + strings.Join(cutDependencies, " ") + "\n" + strings.Join(packKept, " ") + "\n" + packFilesKey() + filepath.Base(rfs.Dir)))
	key := hex.EncodeToString(sum[:8])
	c := cachedir.Cache{Root: filepath.Join(cache, "ipa-ramdisk"), Meta: "meta.json", MaxAge: entryMaxAge}
	e, err := c.Ensure(ctx, key, key, func(ctx context.Context, tmp string) (cachedir.Stamper, error) {
		kver, err := pack(ctx, rfs.Dir, tmp)
		if err != nil {
			return nil, err
		}
		return &meta{KernelVersion: kver, Versions: rfs.Versions}, nil
	})
	if err != nil {
		return nil, err
	}
	var m meta
	if err := json.Unmarshal(e.Meta, &m); err != nil {
		return nil, fmt.Errorf("ipa: %s: %w", e.Dir, err)
	}
	return &Ramdisk{Kernel: filepath.Join(e.Dir, "vmlinuz"), Initrd: filepath.Join(e.Dir, "initrd.gz"),
		InitrdRaw: filepath.Join(e.Dir, "initrd"), KernelVersion: m.KernelVersion, Versions: m.Versions, Cached: !e.Built}, nil
}

// packMasked are the daemons Debian's ironic-python-agent depends on
// (chrony, lldpad, open-iscsi, tuned, LVM's monitors, ...) and enables,
// which IPA's own images do not start: IPA runs chronyd itself when asked
// to sync the clock, and lldpad would answer the switch's LLDP. A later
// archive entry replaces an earlier one when the kernel unpacks it, so the
// masks win over the enablement links of the tree.
var packMasked = []string{
	"chrony.service", "lldpad.service", "lldpad.socket", "iscsid.socket", "iscsid.service", "open-iscsi.service",
	"tuned.service", "lvm2-monitor.service", "lvm2-lvmpolld.socket", "dm-event.socket", "blk-availability.service",
	"xfs_healer_start.service", "xfs_scrub_all.timer", "man-db.timer", "grub2-common.service",
	"nvmefc-boot-connections.service", "nvmf-autoconnect.service", "uuidd.socket", "systemd-pstore.service",
	"polkit-agent-helper.socket",
}

// memoryReport prints the high-water marks of IPA's process, the unit's
// main PID (VmHWM, and VmRSS beside it, from its /proc status) and of the
// unit's cgroup (memory.peak: IPA, the programs it runs such as qemu-img,
// and the files it writes into the RAM-backed root, such as a qcow2 image it
// stages), as systemd stops IPA, which is at the power-off that ends a
// deploy. Its output goes to the console with IPA's (StandardOutput), where
// the side-by-side tests read it: the counterpart of our agent's
// peak_rss_kib log line.
const memoryReport = `#!/bin/sh
cg=$(sed -n 's/^0:://p' /proc/$MAINPID/cgroup)
echo "ipa-memory-report: pid $MAINPID $(grep -E '^(VmHWM|VmRSS):' /proc/$MAINPID/status | tr -s ' \t\n' ' ')cgroup_memory_peak $(cat /sys/fs/cgroup$cg/memory.peak)"
`

// packFiles are added to the initramfs over the root filesystem: what the
// side-by-side measurements need, which IPA's images do not have.
var packFiles = []struct {
	name, content string
	perm          uint32
}{
	{"usr/local/sbin/ipa-memory-report", memoryReport, 0o755},
	{"etc/systemd/system/ironic-python-agent.service.d/memory-report.conf", "[Service]\nExecStop=/usr/local/sbin/ipa-memory-report\n", 0o644},
}

// skipped are the paths of the root filesystem the initramfs leaves out:
// the kernel image and Debian's own initramfs (the kernel is passed
// beside), documentation, apt's caches.
func skipped(rel string) bool {
	for _, p := range []string{"boot", "usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian",
		"var/cache/apt", "var/cache/debconf/templates.dat-old", "var/lib/apt/lists", "ironictest-rootfs.json", "srv/ironictest"} {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	// Locales but C's: Python and IPA run with LC_ALL=C.UTF-8.
	if strings.HasPrefix(rel, "usr/share/locale/") && strings.Count(rel, "/") > 3 {
		return true
	}
	return false
}

// pack writes the kernel and the initramfs of the root filesystem dir
// into out and returns the kernel's version.
func pack(ctx context.Context, dir, out string) (string, error) {
	kernels, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return "", fmt.Errorf("ipa: %s: want one kernel in /boot, found %d", dir, len(kernels))
	}
	kver := strings.TrimPrefix(filepath.Base(kernels[0]), "vmlinuz-")
	if err := copyFile(kernels[0], filepath.Join(out, "vmlinuz")); err != nil {
		return "", err
	}
	raw, err := os.Create(filepath.Join(out, "initrd"))
	if err != nil {
		return "", fmt.Errorf("ipa: %w", err)
	}
	defer raw.Close()
	dropped, _, err := droppedFiles(dir)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(raw, 1<<20)
	w := initramfs.NewWriter(bw)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if skipped(rel) || dropped[rel] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := uint32(fi.Mode().Perm())
		if fi.Mode()&fs.ModeSetuid != 0 {
			perm |= 0o4000
		}
		if fi.Mode()&fs.ModeSetgid != 0 {
			perm |= 0o2000
		}
		if fi.Mode()&fs.ModeSticky != 0 {
			perm |= 0o1000
		}
		switch {
		case d.IsDir():
			return w.Dir(rel, perm)
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return w.Symlink(rel, t)
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return w.File(rel, perm, fi.Size(), f)
		}
		// Device nodes, fifos and sockets: devtmpfs and systemd make their own.
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("ipa: packing %s: %w", dir, err)
	}
	for _, u := range packMasked {
		if err := w.Symlink("etc/systemd/system/"+u, "/dev/null"); err != nil {
			return "", err
		}
	}
	for _, f := range packFiles {
		if err := w.File(f.name, f.perm, int64(len(f.content)), strings.NewReader(f.content)); err != nil {
			return "", err
		}
	}
	// The kernel runs /init; systemd is init (no /etc/initrd-release, so
	// it boots the system, not an initrd).
	if err := w.Symlink("init", "usr/lib/systemd/systemd"); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := bw.Flush(); err != nil {
		return "", fmt.Errorf("ipa: %w", err)
	}
	if err := raw.Close(); err != nil {
		return "", fmt.Errorf("ipa: %w", err)
	}
	if err := gzipFile(filepath.Join(out, "initrd"), filepath.Join(out, "initrd.gz")); err != nil {
		return "", err
	}
	return kver, nil
}

// gzipFile writes src gzip'ed to dst.
func gzipFile(src, dst string) error {
	return copyThrough(src, dst, func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) })
}

func copyFile(src, dst string) error {
	return copyThrough(src, dst, nil)
}

// copyThrough copies src to dst through wrap's writer, when set.
func copyThrough(src, dst string, wrap func(io.Writer) io.WriteCloser) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("ipa: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("ipa: %w", err)
	}
	defer out.Close()
	var w io.WriteCloser = out
	if wrap != nil {
		w = wrap(out)
	}
	if _, err := io.Copy(w, in); err != nil {
		return fmt.Errorf("ipa: copying %s to %s: %w", src, dst, err)
	}
	if wrap != nil {
		if err := w.Close(); err != nil {
			return fmt.Errorf("ipa: copying %s to %s: %w", src, dst, err)
		}
	}
	return out.Close()
}

// Size is the size of a file, 0 when it cannot be read.
func Size(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// packFilesKey is packFiles, for the entry's key.
func packFilesKey() string {
	var b strings.Builder
	for _, f := range packFiles {
		fmt.Fprintf(&b, "%s %o\n%s\n", f.name, f.perm, f.content)
	}
	return b.String()
}
