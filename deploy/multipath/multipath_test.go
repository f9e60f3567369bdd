package multipath

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
	"github.com/ironic-go/ironic-agent/inventory"
)

const lun = "35000c500a1b2c3d4"

func path(name string, minor uint64, wwid string) inventory.MultipathPath {
	return inventory.MultipathPath{Name: name, Major: 8, Minor: minor, Sectors: 131072, WWID: wwid}
}

func TestPlan(t *testing.T) {
	held := func(p inventory.MultipathPath) inventory.MultipathPath { p.Held = true; return p }
	inMap := func(p inventory.MultipathPath) inventory.MultipathPath { p.Held, p.Map = true, p.WWID; return p }
	sized := func(p inventory.MultipathPath, n int64) inventory.MultipathPath { p.Sectors = n; return p }
	for _, c := range []struct {
		name    string
		paths   []inventory.MultipathPath
		maps    []string // name: paths
		skipped []string // substrings, one per skipped LUN
	}{
		{"two paths to one LUN", []inventory.MultipathPath{path("sda", 0, lun), path("sdb", 16, lun)}, []string{lun + ": sda,sdb"}, nil},
		{"one path: no map (find_multipaths yes)", []inventory.MultipathPath{path("sda", 0, lun), path("sdb", 16, "35000c500a1b2c3d5")}, nil, nil},
		{"four paths, two LUNs, interleaved", []inventory.MultipathPath{path("sda", 0, lun), path("sdb", 16, "3600a0b8"), path("sdc", 32, lun), path("sdd", 48, "3600a0b8")},
			[]string{lun + ": sda,sdc", "3600a0b8: sdb,sdd"}, nil},
		{"its map exists: nothing to do, nothing said", []inventory.MultipathPath{held(path("sda", 0, lun)), held(path("sdb", 16, lun))}, nil, nil},
		{"a path came late", []inventory.MultipathPath{held(path("sda", 0, lun)), held(path("sdb", 16, lun)), path("sdc", 32, lun)}, nil, []string{"sda is held already"}},
		{"a path came late to a map: the Checker's", []inventory.MultipathPath{inMap(path("sda", 0, lun)), inMap(path("sdb", 16, lun)), path("sdc", 32, lun)}, nil, nil},
		{"sizes differ", []inventory.MultipathPath{path("sda", 0, lun), sized(path("sdb", 16, lun), 8)}, nil, []string{"path sizes differ"}},
		{"empty", []inventory.MultipathPath{sized(path("sda", 0, lun), 0), sized(path("sdb", 16, lun), 0)}, nil, []string{"empty"}},
		{"no WWID", []inventory.MultipathPath{path("sda", 0, ""), path("sdb", 16, "")}, nil, nil},
		{"a WWID no DM name can hold", []inventory.MultipathPath{path("sda", 0, strings.Repeat("3", 128)), path("sdb", 16, strings.Repeat("3", 128))}, nil, []string{"cannot name"}},
		{"a slash in the WWID", []inventory.MultipathPath{path("sda", 0, "3a/b"), path("sdb", 16, "3a/b")}, nil, []string{"cannot name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			maps, skipped := Plan(c.paths)
			var got []string
			for _, m := range maps {
				got = append(got, m.Name+": "+pathNames(m.Paths))
				if m.UUID != "mpath-"+m.Name {
					t.Errorf("UUID %q", m.UUID)
				}
			}
			if !reflect.DeepEqual(got, c.maps) {
				t.Errorf("maps %q, want %q", got, c.maps)
			}
			if len(skipped) != len(c.skipped) {
				t.Fatalf("skipped %q, want %d matching %q", skipped, len(c.skipped), c.skipped)
			}
			for i, s := range skipped {
				if !strings.Contains(s, c.skipped[i]) {
					t.Errorf("skipped %q, want it to say %q", s, c.skipped[i])
				}
			}
		})
	}
}

// The table is the one `multipath -ll` loads for two paths with
// multipath-tools' defaults (dmsetup table shows it so).
func TestTable(t *testing.T) {
	m := Map{Name: lun, UUID: "mpath-" + lun, Sectors: 131072, Paths: []inventory.MultipathPath{path("sda", 0, lun), path("sdb", 16, lun)}}
	got := m.Table()
	if len(got) != 1 {
		t.Fatalf("%d targets", len(got))
	}
	if want := "0 131072 multipath 0 0 1 1 service-time 0 2 1 8:0 1 8:16 1"; got[0].String() != want {
		t.Errorf("table %q, want %q", got[0].String(), want)
	}
}

type fakeMapper struct {
	made []string
	fail string
}

func (f *fakeMapper) Create(_ context.Context, name, uuid string, table []devmapper.Target) (*devmapper.Device, error) {
	if name == f.fail {
		return nil, errors.New("DM_TABLE_LOAD: invalid argument")
	}
	f.made = append(f.made, fmt.Sprintf("%s %s %s", name, uuid, table[0]))
	return &devmapper.Device{Name: name, Path: fmt.Sprintf("/dev/dm-%d", len(f.made)-1)}, nil
}

// A map that cannot be made leaves its paths alone and the others are
// still made.
func TestAssemble(t *testing.T) {
	f := &fakeMapper{fail: "3bad"}
	paths := []inventory.MultipathPath{path("sda", 0, "3bad"), path("sdb", 16, lun), path("sdc", 32, "3bad"), path("sdd", 48, lun)}
	got := Assemble(context.Background(), f, paths, nil)
	if !reflect.DeepEqual(got, []string{"/dev/dm-0"}) {
		t.Errorf("made %q", got)
	}
	want := []string{lun + " mpath-" + lun + " 0 131072 multipath 0 0 1 1 service-time 0 2 1 8:16 1 8:48 1"}
	if !reflect.DeepEqual(f.made, want) {
		t.Errorf("tables %q, want %q", f.made, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := Assemble(ctx, &fakeMapper{}, paths, nil); len(got) != 0 {
		t.Errorf("made %q after the context ended", got)
	}
}
