// Package lsblktest runs util-linux's lsblk as a test oracle for the disk
// inventory. IPASkips applies IPA's disk filter to lsblk's own columns and
// to the kernel's driver names, never to the collector's reading of sysfs,
// so a test that uses it does not mirror the code it checks.
package lsblktest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// columns are the lsblk columns Devices asks for: the inventory's disk
// fields and what IPASkips needs.
const columns = "NAME,KNAME,MAJ:MIN,SIZE,TYPE,ROTA,LOG-SEC,PHY-SEC,MODEL,SERIAL,WWN,TRAN"

// Device is one device of `lsblk -b -J -o ` + columns, with its children
// in lsblk's tree (partitions, and the maps that hold it: LVM, dm-crypt,
// md, multipath). util-linux 2.38 prints sizes as numbers and ROTA as a
// boolean; a column lsblk has no value for is null.
type Device struct {
	Name     string   `json:"name"`
	KName    string   `json:"kname"`
	MajMin   string   `json:"maj:min"`
	Size     Number   `json:"size"`
	Type     string   `json:"type"`
	Rota     Number   `json:"rota"`
	LogSec   Number   `json:"log-sec"`
	PhySec   Number   `json:"phy-sec"`
	Model    *string  `json:"model"`
	Serial   *string  `json:"serial"`
	WWN      *string  `json:"wwn"`
	Tran     *string  `json:"tran"`
	Children []Device `json:"children"`
}

// Number accepts what util-linux versions print for a numeric column: a
// number, a quoted number, a boolean or null.
type Number int64

// UnmarshalJSON implements json.Unmarshaler.
func (n *Number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	switch s {
	case "true":
		*n = 1
	case "false", "null", "":
		*n = 0
	default:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		*n = Number(v)
	}
	return nil
}

// Devices runs lsblk with args appended and returns every device of its
// tree by name. It skips the test, loudly, when lsblk is not installed.
func Devices(t testing.TB, args ...string) map[string]Device {
	t.Helper()
	path, err := exec.LookPath("lsblk")
	if err != nil {
		t.Skip("SKIPPED: lsblk (util-linux) not installed; nothing to compare with (./test.sh installs it)")
	}
	argv := append([]string{"-b", "-J", "-o", columns}, args...)
	cmd := exec.Command(path, argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lsblk %s: %v: %s", strings.Join(argv, " "), err, stderr.String())
	}
	var doc struct {
		BlockDevices []Device `json:"blockdevices"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("lsblk output: %v\n%s", err, out)
	}
	return byName(doc.BlockDevices)
}

// byName flattens lsblk's tree; a device met under several parents (a
// multipath map under each of its paths) is kept once.
func byName(tree []Device) map[string]Device {
	m := map[string]Device{}
	var walk func([]Device)
	walk = func(ds []Device) {
		for _, d := range ds {
			m[d.Name] = d
			walk(d.Children)
		}
	}
	walk(tree)
	return m
}

// Drivers maps block device major numbers to the driver names the kernel
// lists under "Block devices:" in /proc/devices ("1" -> "ramdisk").
func Drivers(t testing.TB) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "Block devices:")
	if !ok {
		t.Fatalf("/proc/devices has no block device section:\n%s", b)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(block, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			m[f[0]] = f[1]
		}
	}
	return m
}

// IPASkips says why IPA (hardware.py, list_all_block_devices with
// block_type "disk") leaves d out of the inventory; "" means IPA lists it.
// The facts come from lsblk and the kernel only: TYPE decides disk, RAID
// or multipath map; SIZE empty devices; a child of TYPE "mpath" marks a
// path of a multipath map (IPA asks `multipath -c`); and the driver of the
// device's major number marks floppies and RAM disks (IPA goes by the
// names fd*, ram* and zram*).
func IPASkips(d Device, drivers map[string]string) string {
	major, _, _ := strings.Cut(d.MajMin, ":")
	switch driver := drivers[major]; driver {
	case "fd", "ramdisk", "zram":
		return "driver " + driver
	}
	for _, c := range d.Children {
		if c.Type == "mpath" {
			return "multipath path"
		}
	}
	if d.Type != "disk" && !strings.Contains(d.Type, "raid") && d.Type != "mpath" {
		return "type " + d.Type
	}
	if d.Size == 0 {
		return "empty"
	}
	return ""
}
