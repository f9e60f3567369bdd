package lsblktest

import (
	"encoding/json"
	"testing"
)

// TestIPASkips runs the filter on lsblk 2.38 JSON as it prints a machine
// with a RAM disk, a floppy, a multipath pair, an md array and a loop
// device; Drivers is /proc/devices's block section for it.
func TestIPASkips(t *testing.T) {
	const lsblk = `{"blockdevices": [
	  {"name":"ram0", "maj:min":"1:0", "size":4194304, "type":"disk"},
	  {"name":"fd0", "maj:min":"2:0", "size":1474560, "type":"disk"},
	  {"name":"loop0", "maj:min":"7:0", "size":1048576, "type":"loop"},
	  {"name":"sda", "maj:min":"8:0", "size":"10737418240", "type":"disk", "children":[
	     {"name":"mpatha", "maj:min":"253:0", "size":10737418240, "type":"mpath"}]},
	  {"name":"sdb", "maj:min":"8:16", "size":10737418240, "type":"disk", "children":[
	     {"name":"md0", "maj:min":"9:0", "size":10736369664, "type":"raid1"}]},
	  {"name":"sr0", "maj:min":"11:0", "size":0, "type":"rom"},
	  {"name":"vdb", "maj:min":"254:16", "size":0, "type":"disk"},
	  {"name":"zram0", "maj:min":"252:0", "size":268435456, "type":"disk"}
	]}`
	drivers := map[string]string{"1": "ramdisk", "2": "fd", "7": "loop", "8": "sd", "9": "md", "11": "sr", "252": "zram", "253": "device-mapper", "254": "virtblk"}
	var doc struct {
		BlockDevices []Device `json:"blockdevices"`
	}
	if err := json.Unmarshal([]byte(lsblk), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for name, d := range byName(doc.BlockDevices) {
		got[name] = IPASkips(d, drivers)
	}
	want := map[string]string{
		"ram0": "driver ramdisk", "fd0": "driver fd", "loop0": "type loop",
		"sda": "multipath path", "mpatha": "", "sdb": "", "md0": "",
		"sr0": "type rom", "vdb": "empty", "zram0": "driver zram",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: IPASkips = %q, want %q", name, got[name], w)
		}
	}
}
