package inspect

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/inventory"
)

func write(t *testing.T, root, path, data string) {
	t.Helper()
	p := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sysfs(t *testing.T) string {
	root := t.TempDir()
	write(t, root, "sys/bus/pci/devices/0000:03:00.0/vendor", "0x8086\n")
	write(t, root, "sys/bus/pci/devices/0000:03:00.0/device", "0x1521\n")
	write(t, root, "sys/bus/pci/devices/0000:03:00.0/class", "0x020000\n")
	write(t, root, "sys/bus/pci/devices/0000:03:00.0/revision", "0x01\n")
	write(t, root, "sys/bus/pci/devices/0000:03:00.0/numa_node", "1\n")
	write(t, root, "sys/bus/pci/devices/0000:00:1f.0/vendor", "0x8086\n")
	write(t, root, "sys/bus/pci/devices/0000:00:1f.0/device", "0x2918\n")
	write(t, root, "sys/bus/pci/devices/0000:00:1f.0/class", "0x060100\n")
	write(t, root, "sys/bus/pci/devices/0000:00:02.0/vendor", "garbage\n") // skipped
	write(t, root, "sys/devices/system/node/node0/meminfo", "Node 0 MemTotal:        8192 kB\nNode 0 MemFree: 1 kB\n")
	write(t, root, "sys/devices/system/node/node0/cpu0/topology/core_id", "0\n")
	write(t, root, "sys/devices/system/node/node0/cpu2/topology/core_id", "0\n")
	write(t, root, "sys/devices/system/node/node0/cpu1/topology/core_id", "1\n")
	write(t, root, "sys/devices/system/node/node0/cpulist", "0-2\n")
	write(t, root, "sys/class/net/eth0/device/numa_node", "0\n")
	write(t, root, "sys/class/net/lo/addr_len", "6\n")
	return root
}

func inv() *inventory.Inventory {
	return &inventory.Inventory{
		Interfaces: []inventory.Interface{{Name: "eth0", MACAddress: "52:54:00:12:34:56"}},
		Disks: []inventory.Disk{
			{Name: "/dev/sdb", Size: 20 << 30}, {Name: "/dev/sda", Size: 20 << 30}, {Name: "/dev/sdc", Size: 1 << 30},
		},
	}
}

func TestCollect(t *testing.T) {
	o := Options{Collectors: []string{"default", "logs", "pci-devices", "numa-topology", "dmi-decode", "usb-devices"}, Inventory: inv(), BootIF: "01-52-54-00-12-34-56",
		Root: sysfs(t), Managers: []Manager{{"generic_hardware_manager", "1.1"}},
		Logs: func(context.Context) (string, error) { return "H4sI", nil }}
	data := Collect(context.Background(), o)
	b, _ := json.Marshal(data)
	for _, want := range []string{
		`"error":null`, `"boot_interface":"01-52-54-00-12-34-56"`, `"logs":"H4sI"`,
		`"root_disk":{"name":"/dev/sda"`,
		`"dmi":{"bios":{},"cpu":[],"memory":{"devices":[]}}`, `"usb_devices":[]`,
		`"configuration":{"collectors":["default","logs","pci-devices","numa-topology","dmi-decode","usb-devices"],"managers":[{"name":"generic_hardware_manager","version":"1.1"}]}`,
		`{"vendor_id":"8086","product_id":"1521","class":"020000","revision":"01","bus":"0000:03:00.0","numa_node_id":"1"}`,
		`{"vendor_id":"8086","product_id":"2918","class":"060100","revision":null,"bus":"0000:00:1f.0","numa_node_id":null}`,
		`"numa_topology":{"ram":[{"numa_node":0,"size_kb":8192}],"cpus":[{"cpu":0,"numa_node":0,"thread_siblings":[0,2]},{"cpu":1,"numa_node":0,"thread_siblings":[1]}],"nics":[{"name":"eth0","numa_node":0}]}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("missing %s in\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "0000:00:02.0") {
		t.Errorf("garbled PCI device not skipped")
	}

	// An unknown name fails alone: the others still report (IPA sends
	// nothing but the error).
	o.Collectors = []string{"default", "extra-hardware", "no-such-collector", "lldp"}
	data = Collect(context.Background(), o)
	if e, _ := data["error"].(string); e != "The following errors were encountered:\n* collector no-such-collector: not supported by this agent\n* collector lldp: LLDP capture is not available in this build" {
		t.Errorf("error %q", e)
	}
	if b, _ := json.Marshal(data["data"]); !strings.Contains(string(b), `["cpu","logical","number",0]`) {
		t.Errorf("extra-hardware data %s", b)
	}
	o.Collectors, o.Benchmarks = []string{"extra-hardware"}, "cpu,mem"
	data = Collect(context.Background(), o)
	if e, _ := data["error"].(string); !strings.Contains(e, "* collector extra-hardware: benchmarks (ipa-inspection-benchmarks=cpu,mem) are not run by this agent") || data["data"] == nil {
		t.Errorf("benchmarks: error %q", e)
	}
	o.Inventory.Disks = o.Inventory.Disks[2:]
	if _, ok := Collect(context.Background(), o)["root_disk"]; ok {
		t.Errorf("root_disk present without a disk of 4 GiB")
	}
}

func TestRunRetries(t *testing.T) {
	var mu sync.Mutex
	var statuses = []int{503, 409, 0, 200}
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, b)
		code := statuses[0]
		statuses = statuses[1:]
		if r.Header.Get("X-OpenStack-Ironic-API-Version") != "" {
			t.Errorf("inspection must not send an API version header")
		}
		switch code {
		case 0: // connection dropped
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close()
		case 200:
			w.Write([]byte(`{"uuid": "5b3b7c1a-0000-4000-8000-000000000001"}`))
		default:
			w.WriteHeader(code)
			w.Write([]byte(`{"error": {"message": "busy"}}`))
		}
	}))
	defer srv.Close()
	var sleeps []time.Duration
	b := ironic.Backoff{Sleep: func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }, Float64: func() float64 { return 0.5 }}
	uuid, err := Run(context.Background(), Options{URL: srv.URL + "/v1/continue", HTTP: srv.Client(), Collectors: []string{"default"}, Inventory: inv(), Backoff: b})
	if err != nil || uuid != "5b3b7c1a-0000-4000-8000-000000000001" {
		t.Fatalf("%q %v", uuid, err)
	}
	if len(bodies) != 4 || len(sleeps) != 3 || sleeps[0] != 5*time.Second || sleeps[2] != 6*time.Second {
		t.Errorf("attempts %d sleeps %v", len(bodies), sleeps)
	}
	var doc map[string]any
	if err := json.Unmarshal(bodies[3], &doc); err != nil || doc["error"] != nil || doc["inventory"] == nil {
		t.Errorf("body %s", bodies[3])
	}
}

func TestRunNodeNotFound(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(400)
		w.Write([]byte(`{"error": {"message": "The following failures happened during running pre-processing hooks:\nLook up error: Could not find a node for attributes {'bmc_address': [], 'mac': ['52:54:00:12:34:56']}"}}`))
	}))
	defer srv.Close()
	uuid, err := Run(context.Background(), Options{URL: srv.URL, HTTP: srv.Client(), Collectors: []string{"default"}, Inventory: inv()})
	if uuid != "" || err == nil || !strings.Contains(err.Error(), "HTTP 400: The following failures") || calls != 1 {
		t.Errorf("%q %v after %d calls", uuid, err, calls)
	}
}

// TestCollectDMIUnparsable: a table IPA's dmidecode parser rejects gives
// IPA's "dmi": {} and a failure naming the collector, and the other
// collectors still report.
func TestCollectDMIUnparsable(t *testing.T) {
	root := sysfs(t)
	// A memory array structure too short to carry its device count.
	write(t, root, "sys/firmware/dmi/tables/DMI", "\x10\x08\x00\x10\x03\x03\x06\x00\x00\x00\x7f\x04\xff\xfe\x00\x00")
	data := Collect(context.Background(), Options{Collectors: []string{"dmi-decode", "pci-devices"}, Root: root})
	b, _ := json.Marshal(data)
	if !strings.Contains(string(b), `"dmi":{}`) || !strings.Contains(string(b), `"pci_devices":[`) {
		t.Errorf("data %s", b)
	}
	if e, _ := data["error"].(string); !strings.Contains(e, "* collector dmi-decode failed: IPA's dmidecode parser fails on this table: a Physical Memory Array block has no 'Number Of Devices'") {
		t.Errorf("error %q", e)
	}
}
