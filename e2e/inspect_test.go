package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetalintrospection/v1/introspection"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// fixtureFacts are the inventory facts of the fixture machine every agent
// reads, which inspection must carry into Ironic.
type fixtureFacts struct {
	CPUs       int
	MemoryMB   int
	RootDiskGB int
}

func (s *suite) fixtureFacts(t *testing.T) fixtureFacts {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(s.fixtureRoot), "inventory.json"))
	if err != nil {
		t.Fatal(err)
	}
	var inv struct {
		CPU struct {
			Count int `json:"count"`
		} `json:"cpu"`
		Memory struct {
			PhysicalMB int `json:"physical_mb"`
		} `json:"memory"`
		Disks []struct {
			Size int64 `json:"size"`
		} `json:"disks"`
	}
	if err := json.Unmarshal(b, &inv); err != nil {
		t.Fatal(err)
	}
	f := fixtureFacts{CPUs: inv.CPU.Count, MemoryMB: inv.Memory.PhysicalMB}
	if len(inv.Disks) > 0 {
		// inspector's local_gb: root disk size in GiB minus one.
		f.RootDiskGB = int(inv.Disks[0].Size>>30) - 1
	}
	return f
}

// waitPort polls Ironic until a port with mac exists.
func (s *suite) waitPort(t *testing.T, a *agentProc, mac string, timeout time.Duration) *ports.Port {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p, err := s.ironic.PortByAddress(t.Context(), mac)
		if err != nil {
			t.Fatal(err)
		}
		if p != nil {
			return p
		}
		if dead, err := a.Exited(); dead {
			t.Fatalf("agent exited (%v) before a port with %s appeared", err, mac)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no port with %s in Ironic after %s", mac, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// propInt reads an integer node property that Ironic may hold as a number
// or, when inspector set it, as a string.
func propInt(props map[string]any, key string) (int, bool) {
	switch v := props[key].(type) {
	case float64:
		return int(v), true
	case string:
		var n int
		_, err := fmt.Sscan(v, &n)
		return n, err == nil
	}
	return 0, false
}

func checkInspectedProperties(t *testing.T, props map[string]any, want fixtureFacts) {
	t.Helper()
	if got, ok := propInt(props, "cpus"); !ok || got != want.CPUs {
		t.Errorf("properties.cpus = %v, want %d", props["cpus"], want.CPUs)
	}
	if got, ok := propInt(props, "memory_mb"); !ok || got != want.MemoryMB {
		t.Errorf("properties.memory_mb = %v, want %d", props["memory_mb"], want.MemoryMB)
	}
	if props["cpu_arch"] != "x86_64" {
		t.Errorf("properties.cpu_arch = %v, want x86_64", props["cpu_arch"])
	}
	if _, ok := propInt(props, "local_gb"); !ok {
		t.Errorf("properties.local_gb missing: %v", props)
	}
}

// TestDiscovery is scenario (d): an unknown machine's agent posts its
// inspection data (collectors default, logs, lldp, numa-topology,
// dmi-decode, usb-devices, extra-hardware); ironic-inspector's enroll hook
// creates the node and its port in Ironic, its extra_hardware hook (strict)
// turns the extra-hardware list into "extra", and the agent carries on
// with lookup.
func TestDiscovery(t *testing.T) {
	s := need(t)
	s.needInspector(t)
	ctx := t.Context()
	const mac = "52:54:e2:0d:00:01"
	const collectors = "default,logs,lldp,numa-topology,dmi-decode,usb-devices,extra-hardware"
	a := s.startAgent(t, agentOpts{MAC: mac, InspectionURL: s.services.InspectorURL + "/v1/continue",
		Extra: []string{"--inspection-collectors", collectors, "--lldp-timeout", "2"}})
	port := s.waitPort(t, a, mac, 90*time.Second)
	t.Cleanup(func() { _ = s.ironic.DeleteNode(context.Background(), port.NodeUUID) })
	st, err := s.inspector.WaitFinished(ctx, port.NodeUUID, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Error != "" {
		t.Fatalf("introspection of %s finished with error %q", port.NodeUUID, st.Error)
	}
	n, err := s.ironic.GetNode(ctx, port.NodeUUID)
	if err != nil {
		t.Fatal(err)
	}
	if n.Driver != "fake-hardware" || n.ProvisionState != "enroll" {
		t.Errorf("discovered node: driver %q, state %q; want fake-hardware in enroll", n.Driver, n.ProvisionState)
	}
	checkInspectedProperties(t, n.Properties, s.fixtureFacts(t))
	data, err := s.inspector.Data(ctx, port.NodeUUID)
	if err != nil {
		t.Fatal(err)
	}
	if data["auto_discovered"] != true {
		t.Errorf("introspection data auto_discovered = %v, want true", data["auto_discovered"])
	}
	if _, ok := data["inventory"].(map[string]any); !ok {
		t.Errorf("introspection data has no inventory: keys %v", keys(data))
	}
	if data["error"] != nil {
		t.Errorf("introspection data error = %v, want null", data["error"])
	}
	// What each collector adds (IPA's keys), as inspector stored it.
	// pci-devices is left out: the fixture tree has no sys/bus/pci (the
	// collector would rightly report an error, as IPA does, and inspector
	// would then fail the introspection); numa-topology adds nothing on a
	// machine without NUMA nodes (the fixture has none), as in IPA; inspector
	// moves "logs" out of the data into its ramdisk logs directory.
	// extra_hardware replaces "data" with "extra".
	for _, k := range []string{"inventory", "root_disk", "configuration", "lldp_raw", "dmi", "usb_devices", "extra"} {
		if _, ok := data[k]; !ok {
			t.Errorf("introspection data lacks %q (collectors %s); keys %v", k, collectors, keys(data))
		}
	}
	if _, ok := data["data"]; ok {
		t.Errorf("inspector's extra_hardware hook left \"data\": it did not recognise the list")
	}
	if conf, _ := data["configuration"].(map[string]any); fmt.Sprint(conf["collectors"]) != "["+strings.ReplaceAll(collectors, ",", " ")+"]" {
		t.Errorf("configuration = %v, want the collectors %s", conf, collectors)
	}
	extra, _ := data["extra"].(map[string]any)
	cpu, _ := extra["cpu"].(map[string]any)
	logical, _ := cpu["logical"].(map[string]any)
	if n, ok := logical["number"].(float64); !ok || n < 1 {
		t.Errorf("extra.cpu.logical.number = %v (extra %v)", logical["number"], extra)
	}
	if dmi, _ := data["dmi"].(map[string]any); dmi["bios"] == nil || dmi["memory"] == nil {
		t.Errorf("dmi = %v", data["dmi"])
	}
	ramdiskLogs, _ := filepath.Glob(filepath.Join(s.dir, "services", "state", "inspector_ramdisk_logs", "*"+port.NodeUUID+"*"))
	if len(ramdiskLogs) == 0 {
		t.Errorf("inspector stored no ramdisk logs for %s (logs collector)", port.NodeUUID)
	}
	// Node not in a lookup state: the agent goes on to lookup (and keeps
	// retrying); it must not have stopped.
	if err := a.WaitLog(ctx, "lookup", 30*time.Second); err != nil {
		t.Error(err)
	}
	if dead, err := a.Exited(); dead {
		t.Errorf("agent exited after inspection: %v", err)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestInspectEnrolledNode is scenario (e): an enrolled node with the
// inspector inspect interface goes to inspect wait; the agent posts its
// data; Ironic sees introspection finish and the node returns to
// manageable with the inventory's properties.
func TestInspectEnrolledNode(t *testing.T) {
	s := need(t)
	s.needInspector(t)
	ctx := t.Context()
	const mac = "52:54:e2:0e:00:01"
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "e2e-inspect",
		InspectInterface: "inspector",
		Properties:       map[string]any{"cpus": nil, "memory_mb": nil, "local_gb": nil, "cpu_arch": nil},
	}, mac)
	got := s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, InspectionURL: s.services.InspectorURL + "/v1/continue"}).Inspect(stepTimeout).Node
	checkInspectedProperties(t, got.Properties, s.fixtureFacts(t))
	st, err := introspection.GetIntrospectionStatus(ctx, s.inspector.Service, n.UUID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Finished || st.Error != "" {
		t.Errorf("introspection status: finished %v, error %q", st.Finished, st.Error)
	}
}

// TestInspectorDownAtStart is a fault: ironic-inspector is down when the
// agent starts; the agent keeps retrying and its data is delivered (the
// machine is discovered) once inspector is back.
func TestInspectorDownAtStart(t *testing.T) {
	s := need(t)
	s.needInspector(t)
	const mac = "52:54:e2:1b:00:01"
	if err := s.services.StopInspector(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := s.services.StartInspector(context.Background()); err != nil {
				t.Errorf("restarting ironic-inspector: %v", err)
			}
		}
	})
	a := s.startAgent(t, agentOpts{MAC: mac, InspectionURL: s.services.InspectorURL + "/v1/continue"})
	if err := a.WaitLog(t.Context(), "retrying", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	restarted = true
	if err := s.services.StartInspector(t.Context()); err != nil {
		t.Fatal(err)
	}
	port := s.waitPort(t, a, mac, 90*time.Second)
	t.Cleanup(func() { _ = s.ironic.DeleteNode(context.Background(), port.NodeUUID) })
	st, err := s.inspector.WaitFinished(t.Context(), port.NodeUUID, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Error != "" {
		t.Errorf("introspection finished with error %q", st.Error)
	}
}
