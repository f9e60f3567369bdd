package grubimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Flavor is how a distribution lays out the root file system of its
// partition images.
type Flavor struct {
	// Name tells flavors apart in errors, directories and test names.
	Name string
	// FS is the root file system: ext4, xfs or btrfs.
	FS string
	// GRUB2 names the tools grub2-install and grub2-mkconfig and keeps
	// GRUB's files in /boot/grub2, as the RHEL family and SUSE do. The
	// tools are Debian's, renamed; Debian's grub-install puts its files in
	// /boot/grub, which the image makes a symbolic link to grub2, so the
	// prefix in its core image (grub-install resolves links) and the
	// menu grub2-mkconfig writes are both in /boot/grub2.
	GRUB2 bool
	// Subvolume (btrfs) holds the root and is set as the file system's
	// default subvolume, so a mount without options mounts it.
	Subvolume string
	// Subvolumes (btrfs) are made, in order, before Subvolume, and stay
	// beside it (SUSE's /home, /var and snapshot store).
	Subvolumes []string
}

// Debian is the ext4 root with Debian's GRUB names.
func Debian() Flavor { return Flavor{Name: "debian", FS: "ext4"} }

// RHEL is the RHEL family's layout: an XFS root, grub2-* tools and
// /boot/grub2.
func RHEL() Flavor { return Flavor{Name: "rhel", FS: "xfs", GRUB2: true} }

// SUSE is SUSE's layout: a btrfs root in the snapshot subvolume
// @/.snapshots/1/snapshot, the default subvolume, with @, the snapshot
// store and the subvolumes SUSE keeps out of snapshots beside it;
// grub2-* tools and /boot/grub2.
func SUSE() Flavor {
	return Flavor{Name: "suse", FS: "btrfs", GRUB2: true, Subvolume: "@/.snapshots/1/snapshot",
		Subvolumes: []string{"@", "@/.snapshots", "@/home", "@/opt", "@/srv", "@/var"}}
}

func (f Flavor) grubDir() string {
	if f.GRUB2 {
		return "grub2"
	}
	return "grub"
}

// fstab is the image's /etc/fstab: the root, and on btrfs the
// subvolumes beside it, as SUSE mounts them.
func (f Flavor) fstab() string {
	s := "LABEL=img-root / " + f.FS + " defaults 0 0\n"
	for _, sub := range f.Subvolumes {
		if sub == "@" {
			continue
		}
		s += "LABEL=img-root " + strings.TrimPrefix(sub, "@") + " btrfs subvol=/" + sub + " 0 0\n"
	}
	return s
}

// MissingFor names the first program Tree and Make need for f that is
// not installed, with its Debian package ("" if none).
func MissingFor(f Flavor) string {
	if m := Missing(); m != "" {
		return m
	}
	var need [][2]string
	switch f.FS {
	case "xfs":
		need = [][2]string{{"mkfs.xfs", "xfsprogs"}}
	case "btrfs":
		need = [][2]string{{"mkfs.btrfs", "btrfs-progs"}, {"btrfs", "btrfs-progs"}, {"losetup", "mount"}, {"mount", "mount"}}
	}
	for _, p := range need {
		if _, err := exec.LookPath(p[0]); err != nil {
			return p[0] + " (" + p[1] + ")"
		}
	}
	return ""
}

// grub2Names renames the GRUB tools the agent runs to their RHEL names
// and makes /boot/grub a link to grub2 (see Flavor.GRUB2).
func grub2Names(root string) error {
	for _, tool := range []string{"grub-install", "grub-mkconfig"} {
		var found bool
		for _, dir := range []string{"usr/sbin", "usr/bin"} {
			p := filepath.Join(root, dir, tool)
			if _, err := os.Lstat(p); err != nil {
				continue
			}
			// RHEL keeps them in /usr/sbin, where the agent looks.
			if err := os.Rename(p, filepath.Join(root, "usr/sbin", strings.Replace(tool, "grub", "grub2", 1))); err != nil {
				return err
			}
			found = true
		}
		if !found {
			return fmt.Errorf("grubimage: %s is not in the tree %s", tool, root)
		}
	}
	return os.Symlink("grub2", filepath.Join(root, "boot/grub"))
}

// Make makes f's root file system image of size bytes labelled img-root
// from the tree at root, written to path. btrfs needs root privileges
// (see Btrfs).
func Make(ctx context.Context, f Flavor, root, path string, size int64) error {
	switch f.FS {
	case "ext4":
		return Ext4(ctx, root, path, size)
	case "xfs":
		return XFS(ctx, root, path, size)
	case "btrfs":
		return Btrfs(ctx, f, root, path, size)
	}
	return fmt.Errorf("grubimage: flavor %s: unknown file system %q (ext4, xfs or btrfs)", f.Name, f.FS)
}

// XFS makes an XFS filesystem image of size bytes (mkfs.xfs wants 300 MiB
// at least) labelled img-root from the tree at root, written to path,
// without root privileges: mkfs.xfs fills it from a prototype file
// written from the tree. Every file is owned by root.
func XFS(ctx context.Context, root, path string, size int64) error {
	proto, err := protofile(root)
	if err != nil {
		return err
	}
	pf := path + ".proto"
	if err := os.WriteFile(pf, []byte(proto), 0o600); err != nil {
		return err
	}
	defer os.Remove(pf)
	if err := sparse(path, size); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "mkfs.xfs", "-q", "-f", "-L", "img-root", "-p", pf, path).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.xfs -p %s %s: %v: %s", pf, path, err, out)
	}
	return nil
}

// protofile is the mkfs.xfs prototype file (xfs_mkfs(8) "-p") of the
// tree at root: directories, regular files (by their path on this
// machine) and symbolic links; anything else, and names the format
// cannot hold (white space, "$"), are refused.
func protofile(root string) (string, error) {
	var b strings.Builder
	// The boot image line (unused by mkfs.xfs) and the block and inode
	// counts it ignores.
	b.WriteString("/dev/null\n0 0\n")
	st, err := os.Stat(root)
	if err != nil {
		return "", err
	}
	b.WriteString(protoMode('d', st.Mode()) + " 0 0\n")
	if err := protoDir(&b, root); err != nil {
		return "", err
	}
	b.WriteString("$\n")
	return b.String(), nil
}

func protoDir(b *strings.Builder, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.Name() == "$" || strings.ContainsAny(p, " \t\n") {
			return fmt.Errorf("grubimage: %s: a name an XFS prototype file cannot hold", p)
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		m := st.Mode()
		switch {
		case m.IsDir():
			fmt.Fprintf(b, "%s %s 0 0\n", e.Name(), protoMode('d', m))
			if err := protoDir(b, p); err != nil {
				return err
			}
			b.WriteString("$\n")
		case m&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if target == "" || strings.ContainsAny(target, " \t\n") {
				return fmt.Errorf("grubimage: %s: a link target (%q) an XFS prototype file cannot hold", p, target)
			}
			fmt.Fprintf(b, "%s %s 0 0 %s\n", e.Name(), protoMode('l', m), target)
		case m.IsRegular():
			fmt.Fprintf(b, "%s %s 0 0 %s\n", e.Name(), protoMode('-', m), p)
		default:
			return fmt.Errorf("grubimage: %s: a %v, which an XFS prototype file of the tree does not take", p, m.Type())
		}
	}
	return nil
}

// protoMode is a prototype file's mode field: the type, set-user-ID and
// set-group-ID flags and the octal permissions.
func protoMode(kind byte, m os.FileMode) string {
	u, g := "-", "-"
	if m&os.ModeSetuid != 0 {
		u = "u"
	}
	if m&os.ModeSetgid != 0 {
		g = "g"
	}
	return fmt.Sprintf("%c%s%s%03o", kind, u, g, m.Perm())
}

// Btrfs makes a btrfs filesystem image of size bytes labelled img-root
// with f's subvolumes, the tree at root in f.Subvolume (the default
// subvolume), written to path. The btrfs-progs of Debian 12 cannot make
// subvolumes in mkfs.btrfs --rootdir, so this needs root privileges: the
// image goes on a loop device of its own, mounted in a temporary
// directory; both are undone before it returns, whatever happens.
func Btrfs(ctx context.Context, f Flavor, root, path string, size int64) (err error) {
	if f.Subvolume == "" {
		return fmt.Errorf("grubimage: flavor %s: a btrfs root without a subvolume", f.Name)
	}
	if err := sparse(path, size); err != nil {
		return err
	}
	if err := cmd(ctx, "mkfs.btrfs", "-q", "-f", "-L", "img-root", path); err != nil {
		return err
	}
	loop, err := attach(ctx, path)
	if err != nil {
		return err
	}
	// Undone even when ctx has ended.
	cleanup := context.WithoutCancel(ctx)
	defer func() {
		if derr := cmd(cleanup, "losetup", "-d", loop); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	mnt, err := os.MkdirTemp("", "grubimage-btrfs-")
	if err != nil {
		return err
	}
	defer os.Remove(mnt)
	if err := cmd(ctx, "mount", "-t", "btrfs", loop, mnt); err != nil {
		return err
	}
	defer func() {
		if uerr := cmd(cleanup, "umount", mnt); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	for _, sub := range append(append([]string{}, f.Subvolumes...), f.Subvolume) {
		p := filepath.Join(mnt, sub)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := cmd(ctx, "btrfs", "-q", "subvolume", "create", p); err != nil {
			return err
		}
	}
	rootSub := filepath.Join(mnt, f.Subvolume)
	if err := cmd(ctx, "cp", "-a", root+"/.", rootSub+"/"); err != nil {
		return err
	}
	// The root's mount points for the subvolumes beside it.
	for _, sub := range f.Subvolumes {
		if sub == "@" {
			continue
		}
		if err := os.MkdirAll(filepath.Join(rootSub, strings.TrimPrefix(sub, "@")), 0o755); err != nil {
			return err
		}
	}
	return cmd(ctx, "btrfs", "-q", "subvolume", "set-default", rootSub)
}

func cmd(ctx context.Context, name string, args ...string) error {
	if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// attach attaches path to a new loop device. Other test binaries attach
// loop devices at the same time, and losetup's find-then-configure can
// lose that race: it is tried a few times.
func attach(ctx context.Context, path string) (string, error) {
	var err error
	for range 5 {
		var out []byte
		if out, err = exec.CommandContext(ctx, "losetup", "--find", "--show", path).CombinedOutput(); err == nil {
			return strings.TrimSpace(string(out)), nil
		}
		err = fmt.Errorf("losetup --find --show %s: %w: %s", path, err, bytes.TrimSpace(out))
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "", err
}
