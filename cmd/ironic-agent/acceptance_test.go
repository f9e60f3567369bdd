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

	"github.com/ironic-go/ironic-agent/inventory"
)

// The acceptance check: `ironic-agent inventory` on this machine
// agrees with lsblk (disk names and sizes), ip link (MACs), nproc (CPU
// count) and /proc/meminfo (total memory). Running those tools is allowed
// here, in a test; the inventory itself runs none.

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

func TestInventoryAgreesWithIPLink(t *testing.T) {
	inv := inventoryOfThisMachine(t)
	var links []struct {
		Name     string `json:"ifname"`
		Address  string `json:"address"`
		PermAddr string `json:"permaddr"`
	}
	if err := json.Unmarshal(acceptanceTool(t, "ip", "-j", "link"), &links); err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{}
	for _, i := range inv.Interfaces {
		ours[i.Name] = i.MACAddress
	}
	for _, l := range links {
		// The NICs IPA lists: those with a device behind them.
		if _, err := os.Stat("/sys/class/net/" + l.Name + "/device"); err != nil {
			continue
		}
		want := l.Address
		if l.PermAddr != "" {
			want = l.PermAddr
		}
		got, ok := ours[l.Name]
		if !ok {
			t.Errorf("ip link shows NIC %s (%s), the inventory does not", l.Name, want)
		} else if got != want {
			t.Errorf("%s: mac_address %s, ip link says %s", l.Name, got, want)
		}
	}
}

func TestInventoryAgreesWithLsblk(t *testing.T) {
	inv := inventoryOfThisMachine(t)
	var doc struct {
		Devices []struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
			Type string `json:"type"`
		} `json:"blockdevices"`
	}
	if err := json.Unmarshal(acceptanceTool(t, "lsblk", "-b", "-d", "-J", "-o", "NAME,SIZE,TYPE"), &doc); err != nil {
		t.Fatal(err)
	}
	ours := map[string]int64{}
	for _, d := range inv.Disks {
		ours[strings.TrimPrefix(d.Name, "/dev/")] = d.Size
	}
	for _, l := range doc.Devices {
		// IPA's rules: whole disks with a size, no RAM disks or floppies.
		if l.Type != "disk" || l.Size == 0 || strings.HasPrefix(l.Name, "zram") || strings.HasPrefix(l.Name, "ram") || strings.HasPrefix(l.Name, "fd") {
			continue
		}
		size, ok := ours[l.Name]
		if !ok {
			t.Errorf("lsblk shows disk %s (%d bytes), the inventory does not", l.Name, l.Size)
		} else if size != l.Size {
			t.Errorf("%s: size %d, lsblk says %d", l.Name, size, l.Size)
		}
	}
	if len(inv.Disks) == 0 {
		t.Error("the inventory lists no disk")
	}
}
