package collector

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

// copyTree copies a fixture tree (files and symlinks) so a test can damage
// it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			tgt, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(tgt, out)
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func diskByName(ds []inventory.Disk, name string) *inventory.Disk {
	for i := range ds {
		if ds[i].Name == name {
			return &ds[i]
		}
	}
	return nil
}

// TestDisksBadFiles damages one file at a time and checks that only the
// field it feeds becomes null (or falls back as udev itself would), and
// that exactly one warning names the file.
func TestDisksBadFiles(t *testing.T) {
	// One copy of the tree; each case puts back what it damaged.
	root := copyTree(t, fixtureRoot("qemu"))
	const sdaDev = "sys/devices/pci0000:00/0000:00:04.0/virtio2/host0/target0:0:3/0:0:3:0"
	const sdcDev = "sys/devices/pci0000:00/0000:00:1f.2/ata3/host3/target3:0:0/3:0:0:0"
	for _, c := range []struct {
		name       string
		file       string // root-relative
		content    string // "" with remove=true deletes
		remove     bool
		ignoreUdev bool
		disk       string
		check      func(d *inventory.Disk) string // "" when fine
		warnings   int
	}{{
		name: "truncated vpd_pg83", file: sdaDev + "/vpd_pg83", content: "\x00\x83\x00\x1d\x02\x00\x00\x0dLAB", ignoreUdev: true,
		disk: "/dev/sda", warnings: 1,
		check: func(d *inventory.Disk) string {
			if d.WWN != nil || d.WWNWithExtension != nil {
				return "wwn from a truncated page"
			}
			if d.Serial == nil || *d.Serial != "LAB-SCSI-0001" {
				return "serial (page 0x80) lost"
			}
			return ""
		},
	}, {
		name: "garbled vpd_pg80", file: sdaDev + "/vpd_pg80", content: "\x00\x80\x00\xffLAB", ignoreUdev: true,
		disk: "/dev/sda", warnings: 1,
		check: func(d *inventory.Disk) string {
			// scsi_id without page 0x80 leaves ID_SCSI_SERIAL unset, and
			// lsblk shows ID_SERIAL_SHORT, the NAA identifier.
			if d.Serial == nil || *d.Serial != "5000c500a1b2c3d4" {
				return "serial should fall back to the page 0x83 identifier"
			}
			if d.WWN == nil {
				return "wwn lost"
			}
			return ""
		},
	}, {
		name: "garbled vpd_pg89", file: sdcDev + "/vpd_pg89", content: "\x00\x89\x02", ignoreUdev: true,
		disk: "/dev/sdc", warnings: 1,
		check: func(d *inventory.Disk) string {
			if d.Serial == nil || *d.Serial != "LAB-SATA-0001" || d.Model == nil || *d.Model != "LAB SATA HDD" {
				return "page 0x80 and sysfs model should stand in for page 0x89"
			}
			return ""
		},
	}, {
		name: "garbled udev record", file: "run/udev/data/b8:0", content: "E:ID_SERIAL=x\nthis is not udev\n",
		disk: "/dev/sda", warnings: 1,
		check: func(d *inventory.Disk) string {
			if d.Serial == nil || *d.Serial != "LAB-SCSI-0001" || d.WWN == nil {
				return "values should be derived from sysfs"
			}
			return ""
		},
	}, {
		name: "garbled logical_block_size", file: sdaDev + "/block/sda/queue/logical_block_size", content: "five hundred\n",
		disk: "/dev/sda", warnings: 1,
		check: func(d *inventory.Disk) string {
			if d.LogicalSectors != nil {
				return "logical_sectors should be null"
			}
			if d.PhysicalSectors == nil {
				return "physical_sectors lost"
			}
			return ""
		},
	}, {
		name: "missing rotational", file: sdaDev + "/block/sda/queue/rotational", remove: true,
		disk: "/dev/sda", warnings: 1,
		check: func(d *inventory.Disk) string {
			if d.Rotational {
				return "rotational should be false when unknown"
			}
			return ""
		},
	}, {
		name: "garbled size", file: sdaDev + "/block/sda/size", content: "-\n",
		disk: "", warnings: 1, // size unknown counts as empty: not listed
	}, {
		name: "garbled dev", file: sdaDev + "/block/sda/dev", content: "eight\n",
		disk: "", warnings: 1,
	}, {
		name: "missing port_no", file: "sys/devices/pci0000:00/0000:00:1f.2/ata3/ata_port/ata3/port_no", remove: true, ignoreUdev: true,
		disk: "/dev/sdc", warnings: 0,
		check: func(d *inventory.Disk) string {
			if d.ByPath != nil {
				return "by_path without the ATA port number"
			}
			return ""
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			full := filepath.Join(root, c.file)
			restore(t, full)
			if c.remove {
				if err := os.Remove(full); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(full, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			// The ATA port is also reachable through /sys/class.
			if strings.HasSuffix(c.file, "/port_no") {
				classLink := filepath.Join(root, "sys/class/ata_port/ata3")
				restore(t, classLink)
				os.Remove(classLink)
			}
			logger, records := newLogRecorder(t)
			ds, err := Disks(context.Background(), Options{Root: root, Logger: logger, IgnoreUdev: c.ignoreUdev})
			if err != nil {
				t.Fatal(err)
			}
			if c.disk == "" {
				if diskByName(ds, "/dev/sda") != nil {
					t.Error("/dev/sda listed although its size or number is unknown")
				}
			} else {
				d := diskByName(ds, c.disk)
				if d == nil {
					t.Fatalf("%s not listed", c.disk)
				}
				if msg := c.check(d); msg != "" {
					t.Errorf("%s: %+v", msg, *d)
				}
			}
			recs := records()
			if len(recs) != c.warnings {
				t.Errorf("%d warnings, want %d", len(recs), c.warnings)
			}
			for _, r := range recs {
				named := false
				r.Attrs(func(a slog.Attr) bool {
					if a.Key == "file" && strings.HasSuffix(a.Value.String(), filepath.Base(c.file)) {
						named = true
					}
					return true
				})
				if !named {
					t.Errorf("warning %q does not name %s", r.Message, c.file)
				}
			}
		})
	}
}

// TestDisksSurviveAnyDamagedFile truncates or garbles each file of the
// fixture trees in turn: the collector must never panic or fail, and every
// device it still lists keeps its name.
func TestDisksSurviveAnyDamagedFile(t *testing.T) {
	for _, fx := range diskFixtures {
		src := fixtureRoot(fx.name)
		// One file per attribute name (the first device's), and every udev
		// record: damaging the same attribute of a second device tests
		// nothing new.
		var files []string
		seen := map[string]bool{}
		filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			rel, _ := filepath.Rel(src, p)
			if !strings.HasPrefix(rel, "run/") && seen[d.Name()] {
				return nil
			}
			seen[d.Name()] = true
			files = append(files, rel)
			return nil
		})
		root := copyTree(t, src)
		for _, rel := range files {
			full := filepath.Join(root, rel)
			orig, err := os.ReadFile(full)
			if err != nil {
				t.Fatal(err)
			}
			// A udev record only matters on the udev route, a sysfs file
			// mostly on the sysfs-only one (the other is covered by the
			// targeted cases above).
			ignore := !strings.HasPrefix(rel, "run/")
			for _, bad := range [][]byte{orig[:len(orig)/2], []byte("\xff\x00garbage\n")} {
				if err := os.WriteFile(full, bad, 0o644); err != nil {
					t.Fatal(err)
				}
				{
					opts := Options{Root: root, IgnoreUdev: ignore}
					ds, err := Disks(context.Background(), opts)
					if err != nil {
						t.Fatalf("%s damaged: %v", rel, err)
					}
					for _, d := range ds {
						if !strings.HasPrefix(d.Name, "/dev/") {
							t.Fatalf("%s damaged: bad name %q", rel, d.Name)
						}
					}
					if _, err := BlockDevices(context.Background(), opts, []string{"sda", "loop0"}); err != nil && !strings.Contains(err.Error(), "not found") {
						t.Fatalf("%s damaged: BlockDevices: %v", rel, err)
					}
				}
			}
			if err := os.WriteFile(full, orig, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// restore puts a file or symlink back as it is now when the test ends.
func restore(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		tgt, err := os.Readlink(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.Remove(p)
			if err := os.Symlink(tgt, p); err != nil {
				t.Error(err)
			}
		})
		return
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(p, b, fi.Mode().Perm()); err != nil {
			t.Error(err)
		}
	})
}
