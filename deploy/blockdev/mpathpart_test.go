package blockdev

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A map's sysfs directory as the kernel lays it out: dm/name, dm/uuid,
// and holders/ with its partition maps (and one foreign holder).
func mpathSysDir(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, v string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("dm-0/dev", "253:0")
	write("dm-0/dm/name", "35000c500aa55aa01")
	write("dm-0/dm/uuid", "mpath-35000c500aa55aa01")
	for _, h := range []struct{ dev, name, uuid string }{
		{"dm-1", "35000c500aa55aa01-part1", "part1-mpath-35000c500aa55aa01"},
		{"dm-2", "35000c500aa55aa01-part2", "part2-mpath-35000c500aa55aa01"},
		{"dm-3", "vg-lv", "LVM-abc"},
	} {
		write(h.dev+"/dm/name", h.name)
		write(h.dev+"/dm/uuid", h.uuid)
		if err := os.MkdirAll(filepath.Join(root, "dm-0/holders"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../"+h.dev, filepath.Join(root, "dm-0/holders", h.dev)); err != nil {
			t.Fatal(err)
		}
	}
	write("dm-9/dm/name", "faildisk")
	write("dm-9/dm/uuid", "")
	return root
}

func TestMultipathMapSysfs(t *testing.T) {
	root := mpathSysDir(t)
	name, uuid, ok := multipathMap(filepath.Join(root, "dm-0"))
	if !ok || name != "35000c500aa55aa01" || uuid != "mpath-35000c500aa55aa01" {
		t.Fatalf("multipathMap: %q %q %v", name, uuid, ok)
	}
	for _, other := range []string{"dm-1", "dm-3", "dm-9", "sda"} {
		if _, _, ok := multipathMap(filepath.Join(root, other)); ok {
			t.Errorf("%s taken for a multipath map", other)
		}
	}
	if got := partitionMaps(filepath.Join(root, "dm-0"), uuid); !reflect.DeepEqual(got, []string{"35000c500aa55aa01-part1", "35000c500aa55aa01-part2"}) {
		t.Errorf("partition maps %q", got)
	}
	// kpartx's names, as multipath-tools' udev rules call it.
	if n, u := partitionMapName(name, 3), partitionMapUUID(uuid, 3); n != "35000c500aa55aa01-part3" || u != "part3-mpath-35000c500aa55aa01" {
		t.Errorf("partition 3: %q %q", n, u)
	}
}

// MBR entries are in 512-byte units of logical sectors; GPT's in bytes.
func TestPartitionBytes(t *testing.T) {
	dos := PartTable{Kind: "dos", SectorSize: 4096}
	if s, l := partitionBytes(dos, PartEntry{Start: 2048 * 512, Size: 100 * 512}); s != 2048*4096 || l != 100*4096 {
		t.Errorf("dos 4K: %d %d", s, l)
	}
	gpt := PartTable{Kind: "gpt", SectorSize: 512}
	if s, l := partitionBytes(gpt, PartEntry{Start: 1 << 20, Size: 64 << 20}); s != 1<<20 || l != 64<<20 {
		t.Errorf("gpt: %d %d", s, l)
	}
}
