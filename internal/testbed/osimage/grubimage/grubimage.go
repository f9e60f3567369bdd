// Package grubimage builds, for tests, a partition image whose root
// filesystem really installs GRUB: this machine's grub-install,
// grub-mkconfig and their helpers, udevadm (grub-probe asks it for a
// partition's sysfs path), mdadm (grub-probe asks `mdadm --detail
// --export` for an md array's UUID, to find a root on software RAID),
// the tools the /etc/grub.d scripts and IPA's "mount -a -t vfat" run, the
// shared libraries they all load, the GRUB modules, and a stand-in kernel
// so grub-mkconfig writes a menu entry. It needs the Debian packages
// grub2-common, grub-common, grub-pc-bin (and grub-efi-amd64-bin for
// UEFI), e2fsprogs and libc-bin (ldd); mdadm when the root is an array.
package grubimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KernelVersion is the stand-in kernel's version: grub.cfg lists
// /boot/vmlinuz-<KernelVersion>.
const KernelVersion = "6.1.0-test"

// tools are the programs the image needs.
func tools() []string {
	return []string{
		"grub-install", "grub-mkconfig", "udevadm", "grub-probe", "grub-mkimage", "grub-editenv", "grub-mkrelpath",
		"grub-script-check", "grub-file", "sh", "dash", "bash", "cat", "sed", "grep", "mkdir", "rm", "mv", "cp", "chmod",
		"ls", "sort", "uniq", "head", "tail", "tr", "cut", "uname", "dirname", "basename", "readlink", "stat", "touch",
		"wc", "find", "xargs", "awk", "mawk", "which", "mount", "umount", "test", "true", "false", "printf", "echo", "env",
		"expr", "id", "sync", "date", "gettext", "ln", "rmdir", "cmp", "od", "realpath", "mktemp", "mdadm",
	}
}

// Missing names the first program Tree cannot do without, "" if none.
func Missing() string {
	for _, tool := range []string{"grub-install", "grub-mkconfig", "grub-probe", "udevadm", "ldd", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool
		}
	}
	if _, err := os.Stat("/usr/lib/grub/i386-pc"); err != nil {
		return "grub-pc-bin"
	}
	return ""
}

func copyFile(root, src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	p := filepath.Join(root, dst)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, st.Mode().Perm())
}

// canonical resolves a host path through the merged-/usr symlinks.
func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// Tree fills root with the files of Debian's image.
func Tree(ctx context.Context, root string) error {
	return TreeFor(ctx, root, Debian())
}

// TreeFor fills root with the files of f's image.
func TreeFor(ctx context.Context, root string, f Flavor) error {
	if m := Missing(); m != "" {
		return fmt.Errorf("%s is not installed", m)
	}
	// A merged-/usr layout, as Debian's and RHEL's.
	for _, d := range []string{"usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc/default", "boot/" + f.grubDir(), "dev", "proc", "sys", "run", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			return err
		}
	}
	libs := map[string]bool{}
	for _, tool := range tools() {
		p, err := exec.LookPath(tool)
		if err != nil {
			continue // optional (gettext, bash)
		}
		src := canonical(p)
		if err := copyFile(root, src, src); err != nil {
			return err
		}
		// Also under the name the scripts call (awk -> mawk).
		if p != src {
			if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
				if err := copyFile(root, src, p); err != nil {
					return err
				}
			}
		}
		out, err := exec.CommandContext(ctx, "ldd", src).Output()
		if err != nil {
			continue // a script
		}
		for _, w := range strings.Fields(string(out)) {
			if strings.HasPrefix(w, "/") {
				libs[w] = true
			}
		}
	}
	for l := range libs {
		c := canonical(l)
		if err := copyFile(root, c, c); err != nil {
			return err
		}
		if c != l {
			if _, err := os.Lstat(filepath.Join(root, l)); err != nil {
				if err := copyFile(root, c, l); err != nil {
					return err
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/sh")); err != nil {
		if err := copyFile(root, canonical("/bin/sh"), "/usr/bin/sh"); err != nil {
			return err
		}
	}
	for _, tree := range []string{"/usr/lib/grub", "/usr/share/grub", "/etc/grub.d"} {
		if _, err := os.Stat(tree); err != nil {
			continue
		}
		dst := filepath.Join(root, filepath.Dir(tree))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if out, err := exec.CommandContext(ctx, "cp", "-a", tree, dst+"/").CombinedOutput(); err != nil {
			return fmt.Errorf("cp -a %s %s: %v: %s", tree, dst, err, out)
		}
	}
	files := map[string][]byte{
		"etc/default/grub": []byte("GRUB_DEFAULT=0\nGRUB_TIMEOUT=1\nGRUB_DISTRIBUTOR=Testos\nGRUB_CMDLINE_LINUX=\"console=ttyS0\"\n"),
		"etc/fstab":        []byte(f.fstab()),
		"etc/os-release":   []byte("NAME=Testos\nID=testos\n"),
		// Stand-ins: grub-mkconfig's 10_linux lists them.
		"boot/vmlinuz-" + KernelVersion:    bytes.Repeat([]byte{0x4d, 0x5a}, 4096),
		"boot/initrd.img-" + KernelVersion: bytes.Repeat([]byte{1}, 4096),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			return err
		}
	}
	if f.GRUB2 {
		return grub2Names(root)
	}
	return nil
}

// Ext4 makes an ext4 filesystem image of size bytes labelled img-root from
// the tree at root, written to path.
func Ext4(ctx context.Context, root, path string, size int64) error {
	if err := sparse(path, size); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-L", "img-root", "-d", root, path).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 -d %s %s: %v: %s", root, path, err, out)
	}
	return nil
}

// sparse makes path an empty file of size bytes, a file system's image to
// be.
func sparse(path string, size int64) error {
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return err
	}
	return os.Truncate(path, size)
}
