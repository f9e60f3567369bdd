package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/collector/internal/udev"
)

// TestDisksAgreeWithLsblkSysroot runs the real lsblk (util-linux) on the
// hand-made trees with --sysroot, so listing order, TYPE, TRAN, sizes and
// sector sizes are checked against lsblk itself rather than against our
// reading of its source. In --sysroot mode lsblk takes udev properties from
// a text file at /dev/<name>; the test writes one per udev record, in the
// precedence lsblk applies when it asks libudev.
func TestDisksAgreeWithLsblkSysroot(t *testing.T) {
	lsblk, err := exec.LookPath("lsblk")
	if err != nil {
		t.Skip("SKIPPED: lsblk (util-linux) not installed")
	}
	if out, err := exec.Command(lsblk, "--help").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("--sysroot")) {
		t.Skip("SKIPPED: this lsblk has no --sysroot")
	}
	// The disk collector's own trees, then the fixture machines whose sysfs
	// is whole enough for lsblk: the hand-made servers. A capture copies
	// only what the collector reads, which lsblk does not list from.
	var roots [][2]string
	for _, fx := range diskFixtures {
		roots = append(roots, [2]string{fx.name, fixtureRoot(fx.name)})
	}
	for _, m := range []string{"server-sas-md-bond", "server-infiniband", "hpe-dl380-smartarray-e810",
		"supermicro-megaraid-fc", "nvme-multinamespace", "nvme-multinamespace-no-multipath"} {
		roots = append(roots, [2]string{"fixtures/" + m, filepath.Join(fixturesDir, m, "root")})
	}
	for _, r := range roots {
		t.Run(r[0], func(t *testing.T) {
			root := copyTree(t, r[1])
			dropGitkeep(t, root)
			writeLsblkPropertyFiles(t, root)
			cmd := exec.Command(lsblk, "--sysroot", root, "-J", "-b", "-a", "-l",
				"-o", "NAME,KNAME,TYPE,SIZE,ROTA,MODEL,SERIAL,WWN,TRAN,LOG-SEC,PHY-SEC")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v: %s", strings.Join(cmd.Args, " "), err, stderr.String())
			}
			var doc struct {
				BlockDevices []lsblkDev `json:"blockdevices"`
			}
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			// IPA's rules over lsblk's list, in lsblk's order.
			var want []lsblkDev
			for _, l := range doc.BlockDevices {
				n := l.KName
				if strings.HasPrefix(n, "fd") || strings.HasPrefix(n, "ram") || strings.HasPrefix(n, "zram") || l.Size == 0 {
					continue
				}
				if !(l.Type == "disk" || strings.Contains(l.Type, "raid") || l.Type == "mpath") {
					continue
				}
				if holdsMpath(root, n) {
					continue
				}
				want = append(want, l)
			}
			got, err := Disks(context.Background(), Options{Root: root, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			var gotNames, wantNames []string
			for _, d := range got {
				gotNames = append(gotNames, d.Name)
			}
			for _, l := range want {
				wantNames = append(wantNames, "/dev/"+l.KName)
			}
			if strings.Join(gotNames, " ") != strings.Join(wantNames, " ") {
				t.Fatalf("disks %v, lsblk with IPA's rules %v", gotNames, wantNames)
			}
			for i, d := range got {
				compareWithLsblk(t, d, want[i])
			}
		})
	}
}

// dropGitkeep removes the .gitkeep files that keep a fixture's empty
// directories in git: lsblk counts them as entries of holders/ and slaves/.
func dropGitkeep(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == ".gitkeep" && d.Type().IsRegular() {
			err = os.Remove(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// holdsMpath tells whether a dm multipath map holds the device.
func holdsMpath(root, name string) bool {
	hs, _ := os.ReadDir(filepath.Join(root, "sys/block", name, "holders"))
	for _, h := range hs {
		u, _ := os.ReadFile(filepath.Join(root, "sys/block", h.Name(), "dm/uuid"))
		if strings.HasPrefix(string(u), "mpath-") {
			return true
		}
	}
	return false
}

// writeLsblkPropertyFiles turns each udev record into the KEY=value file
// lsblk --sysroot reads. lsblk keeps the first line that fills a column, so
// the keys go in the order lsblk's libudev path prefers them, and the model
// is ID_MODEL_ENC decoded (file mode reads only ID_MODEL).
func writeLsblkPropertyFiles(t *testing.T, root string) {
	t.Helper()
	recs, _ := filepath.Glob(filepath.Join(root, "run/udev/data/b*"))
	for _, f := range recs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := udev.ParseRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		devno := strings.TrimPrefix(filepath.Base(f), "b")
		dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys/dev/block", devno))
		if err != nil {
			t.Fatal(err)
		}
		name := path.Base(dev)
		if strings.HasPrefix(name, "dm-") {
			continue // lsblk shows no model, serial or WWN for maps
		}
		var lines []string
		model := rec.Props["ID_MODEL"]
		if enc := rec.Props["ID_MODEL_ENC"]; enc != "" {
			model = udev.NormalizeWhitespace(udev.Unhexmangle(enc))
		}
		if model != "" {
			lines = append(lines, "ID_MODEL="+model)
		}
		for _, k := range []string{"ID_WWN_WITH_EXTENSION", "ID_WWN", "ID_SCSI_SERIAL", "ID_SERIAL_SHORT", "ID_SERIAL"} {
			if v := rec.Props[k]; v != "" {
				lines = append(lines, k+"="+v)
			}
		}
		p := filepath.Join(root, "dev", name)
		os.Remove(p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
