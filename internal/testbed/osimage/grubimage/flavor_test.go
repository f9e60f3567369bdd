package grubimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlavors builds each flavor's image and reads it back with the file
// system's own offline tools: the label, and the GRUB tool names the
// agent chooses between.
func TestFlavors(t *testing.T) {
	for _, f := range []Flavor{Debian(), RHEL(), SUSE()} {
		t.Run(f.Name, func(t *testing.T) {
			if m := MissingFor(f); m != "" {
				t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES)", m)
			}
			if f.FS == "btrfs" && os.Geteuid() != 0 {
				t.Skip("SKIPPED: the btrfs image is built on a loop device (root)")
			}
			dir := t.TempDir()
			tree, img := filepath.Join(dir, "tree"), filepath.Join(dir, "root.img")
			if err := TreeFor(t.Context(), tree, f); err != nil {
				t.Fatal(err)
			}
			if err := Make(t.Context(), f, tree, img, 320<<20); err != nil {
				t.Fatal(err)
			}
			for tag, want := range map[string]string{"TYPE": f.FS, "LABEL": "img-root"} {
				out, err := exec.Command("blkid", "-p", "-s", tag, "-o", "value", img).Output()
				if got := strings.TrimSpace(string(out)); err != nil || got != want {
					t.Errorf("blkid %s: %q (%v), want %q", tag, got, err, want)
				}
			}
			switch f.FS {
			case "xfs":
				out, err := exec.Command("xfs_db", "-r", "-c", "ls /usr/sbin", "-c", "ls /boot", img).CombinedOutput()
				if err != nil {
					t.Fatalf("xfs_db: %v: %s", err, out)
				}
				for _, want := range []string{"grub2-install", "grub2-mkconfig", "grub2", "vmlinuz-" + KernelVersion} {
					if !strings.Contains(string(out), want) {
						t.Errorf("the XFS image lacks %s:\n%s", want, out)
					}
				}
				if strings.Contains(string(out), " grub-install") {
					t.Errorf("the XFS image still has grub-install:\n%s", out)
				}
			case "btrfs":
				out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "root", img).CombinedOutput()
				if err != nil {
					t.Fatalf("btrfs inspect-internal: %v: %s", err, out)
				}
				for _, want := range []string{"name snapshot\n", "name @\n", "name home\n", "name .snapshots\n"} {
					if !strings.Contains(string(out), want) {
						t.Errorf("the btrfs image lacks the subvolume %q", want)
					}
				}
			}
		})
	}
}

// TestProtofile: the prototype file mkfs.xfs reads, for a small tree.
func TestProtofile(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/tool"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "usr/bin/tool"), os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	got, err := protofile(root)
	if err != nil {
		t.Fatal(err)
	}
	want := "/dev/null\n0 0\nd--" + mode(t, root) + " 0 0\n" +
		"bin l--777 0 0 usr/bin\n" +
		"usr d--755 0 0\nbin d--755 0 0\ntool -u-755 0 0 " + filepath.Join(root, "usr/bin/tool") + "\n$\n$\n$\n"
	if got != want {
		t.Errorf("protofile:\n%s\nwant:\n%s", got, want)
	}
	if err := os.WriteFile(filepath.Join(root, "a b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := protofile(root); err == nil || !strings.Contains(err.Error(), "a b") {
		t.Errorf("a name with a space: %v, want an error naming it", err)
	}
}

func mode(t *testing.T, p string) string {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return protoMode('d', st.Mode())[3:]
}
