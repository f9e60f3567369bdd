package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/bmc"
)

var update = flag.Bool("update", false, "rewrite the fixtures' inventory.json from their trees")

// fixturesDir holds one directory per recorded machine:
// fixtures/<machine>/{root/,inventory.json,README.md}.
const fixturesDir = "../fixtures"

// fixtureMachines lists the fixture directories that have a root tree.
func fixtureMachines(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(fixturesDir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(fixturesDir, e.Name(), "root")); err == nil && fi.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no fixture trees in %s", fixturesDir)
	}
	return dirs
}

// TestFixturesGolden collects every fixture tree and compares with its
// inventory.json; go test -run TestFixturesGolden -update rewrites them.
func TestFixturesGolden(t *testing.T) {
	for _, m := range fixtureMachines(t) {
		t.Run(m, func(t *testing.T) {
			dir := filepath.Join(fixturesDir, m)
			opts := Options{Root: filepath.Join(dir, "root"), Logger: testLogger(t)}
			// Recorded BMC replies, if the machine had an IPMI device.
			if r, err := bmc.LoadReplay(filepath.Join(dir, "ipmi.json")); err == nil {
				opts.IPMI = r
			} else if !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			inv, err := Collect(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := WriteJSON(&got, inv); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join(dir, "inventory.json"), got.Bytes(), "TestFixturesGolden")
		})
	}
}

// TestFixturesUdevAndSysfsAgree: the ramdisk runs no udevd, so every disk
// value must come out the same whether udev's database and by-path links
// are read (when the fixture has them) or derived from sysfs alone.
func TestFixturesUdevAndSysfsAgree(t *testing.T) {
	for _, m := range fixtureMachines(t) {
		t.Run(m, func(t *testing.T) {
			root := filepath.Join(fixturesDir, m, "root")
			withUdev, err := Disks(context.Background(), Options{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			sysfsOnly, err := Disks(context.Background(), Options{Root: root, IgnoreUdev: true})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := json.MarshalIndent(withUdev, "", "  ")
			b, _ := json.MarshalIndent(sysfsOnly, "", "  ")
			if !bytes.Equal(a, b) {
				t.Errorf("udev and sysfs routes differ:\n%s", lineDiff(string(a), string(b)))
			}
		})
	}
}
