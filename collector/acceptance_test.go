package collector

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

// The acceptance check: the inventory of this machine agrees with
// what nproc, /proc/meminfo and ip link say. Running the tools is allowed
// here, in a test; the collector itself runs none.

func liveInventory(t *testing.T) *inventory.Inventory {
	t.Helper()
	inv, err := Collect(context.Background(), Options{Root: "/"})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func tool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("SKIPPED: %s is not installed (Debian: util-linux, coreutils, iproute2)", name)
	}
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

func TestAgreesWithNproc(t *testing.T) {
	inv := liveInventory(t)
	// nproc counts the CPUs this process may run on; --all the online ones
	// would be the same unless the test runs under taskset.
	n, err := strconv.Atoi(strings.TrimSpace(string(tool(t, "nproc", "--all"))))
	if err != nil {
		t.Fatal(err)
	}
	if inv.CPU.Count != n {
		t.Errorf("cpu.count = %d, nproc --all = %d", inv.CPU.Count, n)
	}
}

func TestAgreesWithMeminfo(t *testing.T) {
	inv := liveInventory(t)
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

func TestAgreesWithIPLink(t *testing.T) {
	inv := liveInventory(t)
	var links []struct {
		Name     string `json:"ifname"`
		Address  string `json:"address"`
		PermAddr string `json:"permaddr"`
		LinkType string `json:"link_type"`
	}
	if err := json.Unmarshal(tool(t, "ip", "-j", "link"), &links); err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, ifc := range inv.Interfaces {
		byName[ifc.Name] = i
	}
	seen := 0
	for _, l := range links {
		// The NICs IPA lists: those with a device behind them.
		if _, err := os.Stat("/sys/class/net/" + l.Name + "/device"); err != nil {
			continue
		}
		seen++
		i, ok := byName[l.Name]
		if !ok {
			t.Errorf("ip link shows NIC %s (%s), the inventory does not", l.Name, l.Address)
			continue
		}
		want := l.Address
		if l.PermAddr != "" {
			want = l.PermAddr
		}
		if got := inv.Interfaces[i].MACAddress; got != want {
			t.Errorf("%s: mac_address %s, ip link says %s", l.Name, got, want)
		}
	}
	if seen == 0 {
		t.Log("this machine has no NIC with a device link; nothing to compare")
	}
}
