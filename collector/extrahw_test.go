package collector

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

// extraTree is a machine with the sysfs files python-hardware reads: a
// SCSI disk with its cache mode and udev ids, an NVMe namespace whose
// vendor and revision come from the PCI function, a virtio disk, a disk
// too small to count, a loop device hardware-detect does not look at, two
// sockets of two cores, cpufreq, and two NUMA nodes.
func extraTree(t *testing.T) string {
	files := map[string]string{
		"sys/block/sda": "-> ../devices/pci0000:00/0000:00:04.0/host0/target0:0:0/0:0:0:0/block/sda",
		"sys/devices/pci0000:00/0000:00:04.0/host0/target0:0:0/0:0:0:0/block/sda/size":               "3907029168\n",
		"sys/devices/pci0000:00/0000:00:04.0/host0/target0:0:0/0:0:0:0/block/sda/device":             "-> ../../../0:0:0:0",
		"sys/devices/pci0000:00/0000:00:04.0/host0/target0:0:0/0:0:0:0/vendor":                       "ATA     \n",
		"sys/devices/pci0000:00/0000:00:04.0/host0/target0:0:0/0:0:0:0/model":                        "ST2000NM0055-1V4\n",
		"sys/devices/pci0000:00/0000:00:04.0/host0/target0:0:0/0:0:0:0/rev":                          "SN05\n",
		"sys/devices/pci0000:00/0000:00:04.0/host0/target0:0:0/0:0:0:0/scsi_disk/0:0:0:0/cache_type": "write back, no read (daft)\n",
		"sys/devices/pci0000:00/0000:00:04.0/host0/target0:0:0/0:0:0:0/block/sda/queue/rotational":   "1\n",
		"sys/devices/pci0000:00/0000:00:04.0/host0/target0:0:0/0:0:0:0/block/sda/queue/scheduler":    "[mq-deadline] kyber none\n",
		"dev/disk/by-id/wwn-0x5000c500a1b2c3d4":                                                      "-> ../../sda",
		"dev/disk/by-id/ata-ST2000NM0055-1V4_ZC20ABCD":                                               "-> ../../sda",
		"dev/disk/by-id/ata-ST2000NM0055-1V4_ZC20ABCD-part1":                                         "-> ../../sda1",

		"sys/block/nvme0n1/size":                  "1875385008\n",
		"sys/block/nvme0n1/device":                "-> ../../class/nvme/nvme0",
		"sys/class/nvme/nvme0/device/vendor":      "0x144d\n",
		"sys/class/nvme/nvme0/device/revision":    "0x00\n",
		"sys/class/nvme/nvme0/model":              "SAMSUNG MZQL21T9HCJR-00A07               \n",
		"sys/block/nvme0n1/queue/scheduler":       "[none] mq-deadline\n",
		"sys/block/nvme0n1/queue/optimal_io_size": "0\n",
		"sys/block/vda/size":                      "41943040\n",
		"sys/block/vda/device":                    "-> ../../virtio2",
		"sys/block/sdz/size":                      "1000\n",
		"sys/block/loop0/size":                    "41943040\n",

		"proc/cpuinfo":                                            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Gold 6230\nstepping\t: 7\nflags\t\t: fpu vme\n\n",
		"sys/devices/system/cpu/present":                          "0-7\n",
		"sys/devices/system/cpu/smt/control":                      "on\n",
		"sys/devices/system/cpu/cpufreq/boost":                    "1\n",
		"sys/devices/system/cpu/cpufreq/policy0/scaling_governor": "performance\n",
		"sys/devices/system/cpu/cpu1/cpufreq/scaling_governor":    "powersave\n",
		"sys/devices/system/node/node0/cpulist":                   "0-3\n",
		"sys/devices/system/node/node1/cpulist":                   "4-7\n",
		"sys/devices/system/node/node10/cpulist":                  "\n",
		"proc/sys/kernel/osrelease":                               "6.1.0-26-amd64\n",
		"proc/cmdline":                                            "BOOTIF=01-aa ipa-api-url=http://x \n",
		"sys/devices/pci0000:00/0000:3b:00.0/net/eno1/address":    "aa:bb:cc:dd:ee:ff\n",
		"sys/class/net/eno1":                                      "-> ../../devices/pci0000:00/0000:3b:00.0/net/eno1",
		"sys/devices/pci0000:00/0000:3b:00.0/net/eno1/device":     "-> ../../../0000:3b:00.0",
	}
	for cpu := range 8 {
		p := "sys/devices/system/cpu/cpu" + strconv.Itoa(cpu) + "/"
		files[p+"topology/physical_package_id"] = strconv.Itoa(cpu / 4)
		files[p+"topology/thread_siblings_list"] = strconv.Itoa(cpu&^1) + "-" + strconv.Itoa(cpu|1)
		files[p+"cpufreq/cpuinfo_min_freq"] = strconv.Itoa(800000 + 100*cpu)
		files[p+"cpufreq/cpuinfo_max_freq"] = strconv.Itoa(3900000 - 100*cpu)
	}
	return tree(t, files)
}

func TestExtraHardware(t *testing.T) {
	root := extraTree(t)
	ipv4, driver := "192.0.2.10", "i40e"
	inv := &inventory.Inventory{
		Interfaces: []inventory.Interface{{Name: "eno1", MACAddress: "AA:BB:CC:DD:EE:FF", IPv4Address: &ipv4, Driver: &driver}},
		CPU:        inventory.CPU{ModelName: "Intel(R) Xeon(R) Gold 6230", Count: 8, SocketCount: 2, Architecture: "x86_64", Flags: []string{"fpu", "vme"}},
		SystemVendor: inventory.SystemVendor{SerialNumber: "0123456789", ProductName: "X11", Manufacturer: "Supermicro",
			Firmware: inventory.Firmware{Vendor: "AMI", Version: "3.4", BuildDate: "10/05/2020"}},
	}
	items, err := ExtraHardware(context.Background(), Options{Root: root}, inv)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		b, _ := json.Marshal(it)
		got = append(got, string(b))
	}
	want := []string{
		`["disk","logical","count","3"]`,
		`["disk","nvme0n1","size","960"]`,
		`["disk","nvme0n1","vendor","0x144d"]`,
		`["disk","nvme0n1","model","SAMSUNG MZQL21T9HCJR-00A07"]`,
		`["disk","nvme0n1","revision","0x00"]`,
		`["disk","nvme0n1","optimal_io_size","0"]`,
		`["disk","nvme0n1","scheduler","none"]`,
		`["disk","sda","size","2000"]`,
		`["disk","sda","vendor","ATA"]`,
		`["disk","sda","model","ST2000NM0055-1V4"]`,
		`["disk","sda","rev","SN05"]`,
		`["disk","sda","rotational","1"]`,
		`["disk","sda","scheduler","mq-deadline"]`,
		`["disk","sda","Write Cache Enable","1"]`,
		`["disk","sda","Read Cache Disable","1"]`,
		`["disk","sda","id","ata-ST2000NM0055-1V4_ZC20ABCD"]`,
		`["disk","sda","wwn-id","wwn-0x5000c500a1b2c3d4"]`,
		`["disk","vda","size","21"]`,
		`["system","product","name","X11"]`,
		`["system","product","vendor","Supermicro"]`,
		`["firmware","bios","version","3.4"]`,
		`["firmware","bios","date","10/05/2020"]`,
		`["firmware","bios","vendor","AMI"]`,
		`["network","eno1","businfo","pci@0000:3b:00.0"]`,
		`["network","eno1","ipv4","192.0.2.10"]`,
		`["network","eno1","link","no"]`,
		`["network","eno1","driver","i40e"]`,
		`["network","eno1","serial","aa:bb:cc:dd:ee:ff"]`,
		// The fake serial is replaced by the first NIC's MAC (no UUID, no board).
		`["system","product","serial","aabbccddeeff"]`,
		`["cpu","physical","number",2]`,
		`["cpu","physical","smt","on"]`,
	}
	for _, sock := range []string{"physical_0", "physical_1"} {
		want = append(want,
			`["cpu","`+sock+`","boost","enabled"]`,
			`["cpu","`+sock+`","vendor","GenuineIntel"]`,
			`["cpu","`+sock+`","product","Intel(R) Xeon(R) Gold 6230"]`,
			`["cpu","`+sock+`","cores",2]`,
			`["cpu","`+sock+`","threads",4]`,
			`["cpu","`+sock+`","family",6]`,
			`["cpu","`+sock+`","model",85]`,
			`["cpu","`+sock+`","stepping",7]`,
			`["cpu","`+sock+`","architecture","x86_64"]`,
			`["cpu","`+sock+`","min_Mhz",800]`,
			`["cpu","`+sock+`","max_Mhz",3900]`,
			`["cpu","`+sock+`","flags","fpu vme"]`,
			`["cpu","`+sock+`","threads_per_core",2]`)
	}
	want = append(want,
		`["cpu","logical","number",8]`,
		`["cpu","logical_0","governor","performance"]`,
		`["cpu","logical_1","governor","powersave"]`,
		`["numa","nodes","count",3]`,
		`["numa","node_0","cpu_count",4]`,
		`["numa","node_1","cpu_count",4]`,
		`["numa","node_10","cpu_count",0]`,
		`["system","kernel","version","6.1.0-26-amd64"]`,
		`["system","kernel","arch","x86_64"]`,
		`["system","kernel","cmdline","BOOTIF=01-aa ipa-api-url=http://x"]`,
	)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("extra hardware differs:\n%s", lineDiff(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	checkExtraHook(t, items)
}

// checkExtraHook applies Ironic's extra_hardware hook (strict mode: every
// item a list of four) and checks each key lands where rules look for it.
func checkExtraHook(t *testing.T, items []HardwareItem) {
	t.Helper()
	b, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	var data []any
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	extra := map[string]map[string]map[string]any{}
	for _, raw := range data {
		item, ok := raw.([]any)
		if !ok || len(item) != 4 {
			t.Fatalf("item %v is not a list of 4", raw)
		}
		cat, ok1 := item[0].(string)
		it, ok2 := item[1].(string)
		key, ok3 := item[2].(string)
		if !ok1 || !ok2 || !ok3 {
			t.Fatalf("item %v: category, item and key must be strings", item)
		}
		if extra[cat] == nil {
			extra[cat] = map[string]map[string]any{}
		}
		if extra[cat][it] == nil {
			extra[cat][it] = map[string]any{}
		}
		extra[cat][it][key] = item[3]
	}
	if _, ok := extra["cpu"]["logical"]["number"].(float64); !ok {
		t.Errorf("extra.cpu.logical.number missing: %v", extra["cpu"])
	}
}

// FuzzExtraHardwareFiles: garbled sysfs and procfs text never panics the
// collector and always gives the hook's 4-item lists.
func FuzzExtraHardwareFiles(f *testing.F) {
	f.Add("3907029168\n", "[mq-deadline] kyber\n", "write back\n", "0-3\n", "processor\t: 0\ncpu family\t: 6\n")
	f.Add("", "[", "daft", "9-", ":\n\n:")
	f.Fuzz(func(t *testing.T, size, sched, cache, cpulist, cpuinfo string) {
		root := tree(t, map[string]string{
			"sys/block/sda/size":                                 size,
			"sys/block/sda/queue/scheduler":                      sched,
			"sys/block/sda/device":                               "-> 0:0:0:0",
			"sys/block/sda/0:0:0:0/scsi_disk/0:0:0:0/cache_type": cache,
			"sys/devices/system/node/node0/cpulist":              cpulist,
			"sys/devices/system/cpu/present":                     cpulist,
			"proc/cpuinfo":                                       cpuinfo,
		})
		items, err := ExtraHardware(context.Background(), Options{Root: root}, &inventory.Inventory{CPU: inventory.CPU{Count: 4, SocketCount: 1}})
		if err != nil {
			t.Fatal(err)
		}
		checkExtraHook(t, items)
	})
}

// TestExtraHardwareCPUAgreesWithLscpu reads this machine's lscpu as
// python-hardware's get_cpus does and compares the values we derive from
// sysfs and procfs.
func TestExtraHardwareCPUAgreesWithLscpu(t *testing.T) {
	if _, err := exec.LookPath("lscpu"); err != nil {
		t.Skip("lscpu is not installed (Debian package util-linux): no oracle for the cpu category")
	}
	cmd := exec.Command("lscpu")
	cmd.Env = append(os.Environ(), "LANG=C", "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lscpu: %v", err)
	}
	lscpu := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			lscpu[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	items, err := ExtraHardware(context.Background(), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, it := range items {
		got[it.Item+"/"+it.Key] = it.Value
	}
	asInt := func(s string) any {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("lscpu value %q: %v", s, err)
		}
		return n
	}
	want := map[string]any{
		"physical/number":             asInt(lscpu["Socket(s)"]),
		"logical/number":              asInt(lscpu["CPU(s)"]),
		"physical_0/cores":            asInt(lscpu["Core(s) per socket"]),
		"physical_0/threads_per_core": asInt(lscpu["Thread(s) per core"]),
		"physical_0/architecture":     lscpu["Architecture"],
	}
	for key, field := range map[string]string{"physical_0/family": "CPU family", "physical_0/model": "Model", "physical_0/stepping": "Stepping"} {
		if v, ok := lscpu[field]; ok && !strings.ContainsAny(v, "xrp") {
			want[key] = asInt(v)
		}
	}
	if v, ok := lscpu["Vendor ID"]; ok && lscpu["Architecture"] == "x86_64" {
		want["physical_0/vendor"] = v
	}
	for key, field := range map[string]string{"physical_0/min_Mhz": "CPU min MHz", "physical_0/max_Mhz": "CPU max MHz"} {
		if v, ok := lscpu[field]; ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("lscpu %s %q: %v", field, v, err)
			}
			want[key] = f
		}
	}
	if v, ok := lscpu["NUMA node(s)"]; ok {
		want["nodes/count"] = asInt(v)
	}
	for key, w := range want {
		if got[key] != w {
			t.Errorf("%s = %#v, lscpu says %#v", key, got[key], w)
		}
	}
}

// lshwXMLNode is one <node> of `lshw -xml`, with the elements
// python-hardware's system.detect reads.
type lshwXMLNode struct {
	ID          string   `xml:"id,attr"`
	Class       string   `xml:"class,attr"`
	Product     *string  `xml:"product"`
	Vendor      *string  `xml:"vendor"`
	Version     *string  `xml:"version"`
	Serial      *string  `xml:"serial"`
	Date        *string  `xml:"date"`
	Size        *string  `xml:"size"`
	BusInfo     *string  `xml:"businfo"`
	PhysID      *string  `xml:"physid"`
	LogicalName []string `xml:"logicalname"`
	Settings    []struct {
		ID    string `xml:"id,attr"`
		Value string `xml:"value,attr"`
	} `xml:"configuration>setting"`
	Children []lshwXMLNode `xml:"node"`
}

// TestExtraHardwareSystemAgreesWithLshw runs lshw -xml on this machine and
// extracts what python-hardware's system.detect does (product, core,
// firmware, memory and network nodes); every such key we send must carry
// lshw's value, and every NIC lshw and the inventory share must have the
// same keys.
func TestExtraHardwareSystemAgreesWithLshw(t *testing.T) {
	if _, err := exec.LookPath("lshw"); err != nil {
		t.Skip("lshw is not installed (Debian package lshw): no oracle for the system category")
	}
	out, err := exec.Command("lshw", "-xml", "-quiet").Output()
	if err != nil {
		t.Fatalf("lshw -xml: %v", err)
	}
	// Newer lshw wraps the machine in <list>, Debian 12's prints it bare:
	// python-hardware's "./node/..." paths mean the machine's own fields
	// with the former, which RHEL-family ramdisks ship.
	var top lshwXMLNode
	if err := xml.Unmarshal(out, &top); err != nil {
		t.Fatalf("lshw -xml: %v", err)
	}
	if top.ID == "" && len(top.Children) == 1 {
		top = top.Children[0]
	}
	want := map[string]string{}
	put := func(key string, v *string) {
		if v != nil {
			want[key] = *v
		}
	}
	put("system/product/serial", top.Serial)
	put("system/product/name", top.Product)
	put("system/product/vendor", top.Vendor)
	put("system/product/version", top.Version)
	var walk func(n lshwXMLNode)
	nics := map[string]bool{}
	walk = func(n lshwXMLNode) {
		switch {
		case n.ID == "core" && n.PhysID != nil:
			put("system/motherboard/name", n.Product)
			put("system/motherboard/vendor", n.Vendor)
			put("system/motherboard/version", n.Version)
			put("system/motherboard/serial", n.Serial)
		case n.ID == "firmware" && n.PhysID != nil:
			put("firmware/bios/version", n.Version)
			put("firmware/bios/date", n.Date)
			put("firmware/bios/vendor", n.Vendor)
		case n.Class == "memory" && strings.HasPrefix(n.ID, "memory") && n.PhysID != nil:
			put("memory/total/size", n.Size)
		case n.Class == "network" && len(n.LogicalName) > 0:
			name := n.LogicalName[0]
			nics[name] = true
			put("network/"+name+"/businfo", n.BusInfo)
			for _, s := range n.Settings {
				switch s.ID {
				case "ip":
					want["network/"+name+"/ipv4"] = s.Value
				case "link", "driver":
					want["network/"+name+"/"+s.ID] = s.Value
				}
			}
			if n.Serial != nil {
				want["network/"+name+"/serial"] = strings.ToLower(*n.Serial)
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(top)

	items, err := ExtraHardware(context.Background(), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	ours := map[string]bool{}
	for _, it := range items {
		if it.Category == "system" && it.Item == "kernel" || it.Category == "system" && it.Key == "uuid" ||
			it.Category == "cpu" || it.Category == "numa" || it.Category == "disk" {
			continue
		}
		got[it.Category+"/"+it.Item+"/"+it.Key] = fmt.Sprint(it.Value)
		if it.Category == "network" {
			ours[it.Item] = true
		}
	}
	for key, v := range got {
		if w, ok := want[key]; !ok || w != v {
			t.Errorf("%s = %q, lshw: %q (present: %v)", key, v, w, ok)
		}
	}
	for key, w := range want {
		parts := strings.Split(key, "/")
		if parts[0] == "network" && !(ours[parts[1]] && nics[parts[1]]) {
			continue // a NIC IPA's inventory does not list
		}
		if _, ok := got[key]; !ok {
			t.Errorf("%s missing, lshw: %q", key, w)
		}
	}
	t.Logf("%d system, firmware, memory and network values compared with lshw", len(got))
}
