package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/lsblktest"
	"github.com/ironic-go/ironic-agent/inventory"
)

// The acceptance check: `ironic-agent inventory` on this machine
// agrees with lsblk (disk names and sizes), ip link (NICs and MACs), nproc
// (CPU count) and /proc/meminfo (total memory). Running those tools is
// allowed here, in a test; the inventory itself runs none.

func inventoryOfThisMachine(t *testing.T) inventory.Inventory {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"inventory"}, &stdout, &stderr); code != 0 {
		t.Fatalf("ironic-agent inventory exited %d: %s", code, stderr.String())
	}
	var inv inventory.Inventory
	if err := json.Unmarshal(stdout.Bytes(), &inv); err != nil {
		t.Fatalf("inventory output is not JSON: %v", err)
	}
	return inv
}

func acceptanceTool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("SKIPPED: %s is not installed (Debian: coreutils, util-linux, iproute2; ./test.sh installs them)", name)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func TestInventoryAgreesWithNproc(t *testing.T) {
	inv := inventoryOfThisMachine(t)
	// --all counts the CPUs present (glibc's _SC_NPROCESSORS_CONF), as
	// lscpu's "CPU(s)" does, whatever affinity the test runs with.
	n, err := strconv.Atoi(strings.TrimSpace(string(acceptanceTool(t, "nproc", "--all"))))
	if err != nil {
		t.Fatal(err)
	}
	if inv.CPU.Count != n {
		t.Errorf("cpu.count = %d, nproc --all = %d", inv.CPU.Count, n)
	}
}

func TestInventoryAgreesWithMeminfo(t *testing.T) {
	inv := inventoryOfThisMachine(t)
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			if inv.Memory.Total == nil || *inv.Memory.Total != kb*1024 {
				t.Errorf("memory.total = %v, /proc/meminfo MemTotal = %d kB", inv.Memory.Total, kb)
			}
			return
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
}

// TestInventoryAgreesWithIPLink: every NIC netlink says has a parent
// device (`ip -d link`'s parentbus/parentdev, IFLA_PARENT_DEV_NAME, Linux
// 5.15 and later) is in the inventory, and every interface of the
// inventory is a link ip knows, with ip's MAC (the permanent one when ip
// has it). The inventory reads sysfs's device links; ip asks netlink.
func TestInventoryAgreesWithIPLink(t *testing.T) {
	inv := inventoryOfThisMachine(t)
	var links []struct {
		Name      string `json:"ifname"`
		Address   string `json:"address"`
		PermAddr  string `json:"permaddr"`
		LinkType  string `json:"link_type"`
		ParentBus string `json:"parentbus"`
		ParentDev string `json:"parentdev"`
	}
	if err := json.Unmarshal(acceptanceTool(t, "ip", "-j", "-d", "link"), &links); err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{}
	for _, i := range inv.Interfaces {
		ours[i.Name] = i.MACAddress
	}
	var withParent, names []string
	known := map[string]bool{}
	for _, l := range links {
		names = append(names, l.Name)
		known[l.Name] = true
		want := l.Address
		if l.PermAddr != "" {
			want = l.PermAddr
		}
		got, listed := ours[l.Name]
		if l.ParentDev != "" {
			withParent = append(withParent, l.Name)
			if !listed {
				t.Errorf("ip -d link shows NIC %s (%s) on %s %s, the inventory does not", l.Name, want, l.ParentBus, l.ParentDev)
				continue
			}
		}
		// IPA derives an InfiniBand port's MAC from its GUID; ip shows the
		// 20-byte hardware address.
		if listed && l.LinkType != "infiniband" && got != want {
			t.Errorf("%s: mac_address %s, ip link says %s", l.Name, got, want)
		}
	}
	for name := range ours {
		if !known[name] {
			t.Errorf("the inventory lists interface %s, ip link does not know it", name)
		}
	}
	if len(withParent) == 0 {
		if len(ours) == 0 {
			t.Skipf("SKIPPED: no link has a parent device per ip -d link (links: %v) and the inventory lists no interface: this machine has no NIC to compare", names)
		}
		t.Errorf("no link has a parent device per ip -d link (links: %v; kernel before 5.15?), yet the inventory lists %d interfaces: the NIC set is unchecked", names, len(ours))
	}
	t.Logf("%d NICs with a parent device, %d inventory interfaces checked against ip link", len(withParent), len(ours))
}

// TestInventoryAgreesWithLsblk: the inventory's disks are the devices IPA
// keeps from lsblk's output (lsblktest.IPASkips decides from lsblk's
// columns and the kernel's driver names), with lsblk's sizes.
func TestInventoryAgreesWithLsblk(t *testing.T) {
	inv := inventoryOfThisMachine(t)
	ours := map[string]int64{}
	for _, d := range inv.Disks {
		ours[strings.TrimPrefix(d.Name, "/dev/")] = d.Size
	}
	drivers := lsblktest.Drivers(t)
	devs := lsblktest.Devices(t, "-a")
	kept := 0
	for name, l := range devs {
		size, listed := ours[name]
		switch why := lsblktest.IPASkips(l, drivers); {
		case why != "" && listed:
			t.Errorf("%s: the inventory lists it; IPA skips it (%s: lsblk type %s, size %d)", name, why, l.Type, l.Size)
		case why != "":
		case !listed:
			t.Errorf("lsblk shows %s %s (%d bytes), IPA would list it, the inventory does not", l.Type, name, l.Size)
		case size != int64(l.Size):
			kept++
			t.Errorf("%s: size %d, lsblk says %d", name, size, l.Size)
		default:
			kept++
		}
	}
	for name := range ours {
		if _, ok := devs[name]; !ok {
			t.Errorf("the inventory lists disk %s, lsblk does not know it", name)
		}
	}
	if kept == 0 {
		if len(inv.Disks) == 0 {
			t.Skip("SKIPPED: lsblk shows no device IPA would list, and the inventory lists none: this machine has no disk to compare")
		}
		t.Error("no inventory disk could be checked against lsblk")
	}
}
