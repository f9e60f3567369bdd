package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/netnames"
	"github.com/ironic-go/ironic-agent/inventory"
)

// FixtureRecorder adds recorded facts that are not files below the root to
// a fixture directory, e.g. package bmc writes the IPMI replies it got as
// DIR/ipmi.json. It runs after the tree and inventory.json are written.
type FixtureRecorder func(ctx context.Context, fixtureDir string) error

// Capture records the running machine as a fixture: every file, directory
// listing and symbolic link the collector touched goes below dir/root (links
// keep their relative targets), the netlink and ethtool answers go to
// dir/root/run/ironic-agent-capture/net.json, the architecture to
// dir/root/proc/sys/kernel/arch, and the live inventory to
// dir/inventory.json. Collect on dir/root then gives the same inventory.
// The inspection units (pci_devices, numa_topology, usb_devices,
// extra_hardware) run too, so the tree also answers IPA's inspection
// collectors of those names, and dmi-decode from the SMBIOS table.
//
// It runs no external program, so it works inside a ramdisk. opts.Root
// must be "/" (or ""): only a live machine can be captured.
func Capture(ctx context.Context, dir string, opts Options, recorders ...FixtureRecorder) (*inventory.Inventory, error) {
	if r := opts.root(); filepath.Clean(r) != "/" {
		return nil, fmt.Errorf("capture: root %q: only the live machine (\"/\") can be captured", r)
	}
	rootDir := filepath.Join(dir, "root")
	if entries, err := os.ReadDir(rootDir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("capture: %s is not empty; capture into a new directory", rootDir)
	}
	if err := os.MkdirAll(rootDir, 0o755); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}

	opts.trace = newTracer()
	c, err := collect(ctx, opts, append(units(), inspectionUnits()...))
	if err != nil {
		return nil, err
	}
	if !opts.IgnoreUdev {
		// Where udev data exists the disk collector reads the udev records
		// instead of sysfs files (VPD pages, serial, wwid): trace the
		// sysfs-only route too, so the tree answers both routes, as the
		// agent's ramdisk (no udevd) would read the same machine.
		sysfsOnly := opts
		sysfsOnly.IgnoreUdev = true
		if _, err := Disks(ctx, sysfsOnly); err != nil {
			return nil, err
		}
	}

	cp := &copier{src: "/", dst: rootDir}
	var errs []error
	// What udev's net_id reads to name the NICs (package netnames), so the
	// tree can be named again, by netnames and by udevadm.
	errs = append(errs, netnames.Trace("/sys", func(rel string, dir bool) {
		k := accessRead
		if dir {
			k = accessDir
		}
		opts.trace.add("sys/"+rel, k)
	})...)
	paths := opts.trace.list()
	// Files and links first, then directory listings fill in the entries
	// nobody read as empty placeholders, so listings stay complete.
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := cp.copyTraced(p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range paths {
		if p.Kind&accessDir != 0 {
			if err := cp.copyListing(p.Path); err != nil {
				errs = append(errs, err)
			}
		}
	}

	if c.net != nil {
		b, err := json.MarshalIndent(c.net, "", "  ")
		if err == nil {
			err = cp.writeFile(netRecordPath, append(b, '\n'))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	// Kernels before 6.1 have no proc/sys/kernel/arch; the collector then
	// asks uname, so record uname's answer where a fixture looks for it.
	if _, err := os.Lstat(filepath.Join(rootDir, "proc/sys/kernel/arch")); err != nil {
		if arch, err := unameMachine(); err == nil {
			errs = append(errs, cp.writeFile("proc/sys/kernel/arch", []byte(arch+"\n")))
		}
	}

	if err := keepEmptyDirs(rootDir); err != nil {
		errs = append(errs, err)
	}

	var buf bytes.Buffer
	if err := WriteJSON(&buf, c.inv); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "inventory.json"), buf.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	for _, rec := range recorders {
		if err := rec(ctx, dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c.inv, fmt.Errorf("capture %s: %w", dir, err)
	}
	return c.inv, nil
}

// maxLinkDepth bounds symbolic link chains, as the kernel's ELOOP does.
const maxLinkDepth = 40

// copier copies paths from the live root src into dst, recreating every
// symbolic link met on the way.
type copier struct {
	src, dst string
}

func (cp *copier) srcPath(rel string) string { return filepath.Join(cp.src, filepath.FromSlash(rel)) }
func (cp *copier) dstPath(rel string) string { return filepath.Join(cp.dst, filepath.FromSlash(rel)) }

// resolve makes every component of rel exist in dst as it does in src
// (directories created, links recreated with their targets resolved too)
// and returns rel with all links resolved. A component missing in src ends
// the walk with fs.ErrNotExist: the collector saw it missing as well.
func (cp *copier) resolve(rel string, depth int) (string, error) {
	if depth > maxLinkDepth {
		return "", fmt.Errorf("%s: too many levels of symbolic links", cp.srcPath(rel))
	}
	cur := ""
	for name := range strings.SplitSeq(path.Clean("/" + rel)[1:], "/") {
		if name == "" {
			continue
		}
		next := path.Join(cur, name)
		fi, err := os.Lstat(cp.srcPath(next))
		if errors.Is(err, syscall.ENOTDIR) {
			// A file where the path needs a directory: as missing to the
			// collector as a missing name.
			return "", fmt.Errorf("%s: %w", cp.srcPath(next), fs.ErrNotExist)
		}
		if err != nil {
			return "", err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(cp.srcPath(next))
			if err != nil {
				return "", err
			}
			var resolved string
			if path.IsAbs(target) {
				// Keep the tree self-contained: an absolute target becomes
				// relative to the link's directory.
				resolved = path.Clean(target)[1:]
				target, _ = filepath.Rel(path.Dir("/"+next), path.Clean(target))
				target = filepath.ToSlash(target)
			} else {
				resolved = path.Join(path.Dir(next), target)
			}
			if err := cp.symlink(next, target); err != nil {
				return "", err
			}
			cur, err = cp.resolve(resolved, depth+1)
			if err != nil {
				return "", err
			}
		case fi.IsDir():
			if err := os.MkdirAll(cp.dstPath(next), 0o755); err != nil {
				return "", err
			}
			cur = next
		default:
			cur = next
		}
	}
	return cur, nil
}

// symlink creates the link rel -> target in dst unless it is already there.
func (cp *copier) symlink(rel, target string) error {
	p := cp.dstPath(rel)
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.Symlink(target, p)
}

// copyTraced copies one traced path according to what the collector did
// with it. Paths missing on the live machine are skipped: their absence is
// part of the record.
func (cp *copier) copyTraced(p tracedPath) error {
	real, err := cp.resolve(p.Path, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("capture %s: %w", p.Path, err)
	}
	fi, err := os.Lstat(cp.srcPath(real))
	if err != nil || fi.IsDir() {
		return nil
	}
	if !fi.Mode().IsRegular() {
		// A device node the collector only looked for (/dev/ipmi0): an
		// empty file says "it exists" in the tree.
		return cp.placeholder(real)
	}
	if p.Data != nil {
		// Exactly the bytes the collector saw.
		return cp.writeFile(real, p.Data)
	}
	if p.Kind&accessRead == 0 {
		// Looked at, not read: record its existence only.
		return cp.placeholder(real)
	}
	b, err := os.ReadFile(cp.srcPath(real))
	if err != nil {
		// Unreadable on the live machine too (carrier of a link that is
		// down reads EINVAL): leave it out, the collector treats both the
		// same way.
		return nil
	}
	return cp.writeFile(real, b)
}

// copyListing makes every entry of a listed directory exist in dst:
// links recreated, directories created, files nobody read as empty
// placeholders.
func (cp *copier) copyListing(rel string) error {
	real, err := cp.resolve(rel, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("capture %s: %w", rel, err)
	}
	entries, err := os.ReadDir(cp.srcPath(real))
	if err != nil {
		return nil
	}
	for _, e := range entries {
		child := path.Join(real, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			target, err := cp.resolve(child, 0)
			if errors.Is(err, fs.ErrNotExist) {
				continue // dangling on the live machine too
			}
			if err != nil {
				return fmt.Errorf("capture %s: %w", child, err)
			}
			// A link to a device node (/dev/disk/by-path/* -> ../../sda):
			// an empty file keeps the link resolvable in the tree.
			if fi, err := os.Lstat(cp.srcPath(target)); err == nil && !fi.IsDir() {
				if err := cp.placeholder(target); err != nil {
					return err
				}
			}
		case e.IsDir():
			if err := os.MkdirAll(cp.dstPath(child), 0o755); err != nil {
				return err
			}
		default:
			if err := cp.placeholder(child); err != nil {
				return err
			}
		}
	}
	return nil
}

func (cp *copier) placeholder(rel string) error {
	p := cp.dstPath(rel)
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	return cp.writeFile(rel, nil)
}

func (cp *copier) writeFile(rel string, b []byte) error {
	p := cp.dstPath(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}

// keepEmptyDirs puts a keepFile into every empty directory below dir so the
// tree survives a git commit unchanged.
func keepEmptyDirs(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			return os.WriteFile(filepath.Join(p, keepFile), nil, 0o644)
		}
		return nil
	})
}
