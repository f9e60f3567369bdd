package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy/burnin"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

func TestBurninCPUAndMemorySteps(t *testing.T) {
	out := filepath.Join(t.TempDir(), "vm.json")
	ra := standalone(t, Options{}, nil)
	node := map[string]any{"uuid": "n-1", "driver_info": map[string]any{
		"agent_burnin_cpu_cpu": 2, "agent_burnin_cpu_timeout": "1",
		"agent_burnin_vm_vm": "2", "agent_burnin_vm_timeout": 1, "agent_burnin_vm_vm-bytes": "4M", "agent_burnin_vm_outputfile": out,
	}}
	run := func(kind, step string) map[string]any {
		s := map[string]any{"step": step, "interface": "deploy", "priority": 0}
		_, r := call(t, ra, kind+".execute_"+kind+"_step", map[string]any{"node": node, "ports": []any{},
			"step": s, kind + "_version": map[string]any{"generic_hardware_manager": GenericManagerVersion}})
		return r
	}
	start := time.Now()
	r := run("clean", "burnin_cpu")
	var cpu struct {
		Result burnin.CPUResult `json:"clean_result"`
	}
	_ = json.Unmarshal(mustJSON(r["command_result"]), &cpu)
	if r["command_status"] != "SUCCEEDED" || cpu.Result.Workers != 2 || cpu.Result.Rounds == 0 || time.Since(start) < time.Second {
		t.Errorf("burnin_cpu: %v", r)
	}
	r = run("service", "burnin_memory")
	var vm struct {
		Result burnin.MemoryResult `json:"service_result"`
	}
	_ = json.Unmarshal(mustJSON(r["command_result"]), &vm)
	if r["command_status"] != "SUCCEEDED" || vm.Result.Bytes != 8<<20 || vm.Result.Passes == 0 {
		t.Errorf("burnin_memory: %v", r)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), `"step": "burnin_memory"`) || !strings.Contains(string(b), `"error": null`) {
		t.Errorf("output file: %s %v", b, err)
	}
	// A value stress-ng would refuse fails the step.
	node["driver_info"].(map[string]any)["agent_burnin_cpu_timeout"] = "soon"
	r = run("clean", "burnin_cpu")
	if e, _ := r["command_error"].(map[string]any); e["type"] != "InvalidCommandParamsError" || !strings.Contains(e["details"].(string), "agent_burnin_cpu_timeout") {
		t.Errorf("bad timeout: %v", r)
	}
	node["driver_info"].(map[string]any)["agent_burnin_vm_vm-bytes"] = "lots"
	r = run("clean", "burnin_memory")
	if e, _ := r["command_error"].(map[string]any); e["type"] != "CommandExecutionError" || !strings.Contains(e["details"].(string), `vm-bytes "lots"`) {
		t.Errorf("bad vm-bytes: %v", r)
	}
}

func TestBurninDiskStepOnLoop(t *testing.T) {
	dev := looptest.Attach(t, 8<<20)
	out := filepath.Join(t.TempDir(), "fio.json")
	g := &GenericManager{AllowedDevices: []string{dev},
		Disks: func(context.Context) ([]inventory.Disk, error) {
			return []inventory.Disk{{Name: dev, Size: 8 << 20}}, nil
		}}
	node := map[string]any{"driver_info": map[string]any{"agent_burnin_fio_disk_loops": 1, "agent_burnin_fio_disk_outputfile": out}}
	res, err := g.ExecuteStep(context.Background(), "burnin_disk", hwmgr.Request{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(map[string]burnin.DiskResult)[dev]; r.Passes != 1 || r.BytesVerified != 8<<20 {
		t.Errorf("%+v", res)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), dev) {
		t.Errorf("output file: %s %v", b, err)
	}
	// The SMART self-test is refused before anything is written.
	node["driver_info"].(map[string]any)["agent_burnin_fio_disk_smart_test"] = true
	var ie *ipaerror.Error
	if _, err := g.ExecuteStep(context.Background(), "burnin_disk", hwmgr.Request{Node: node}); !errors.As(err, &ie) || !strings.Contains(ie.Details, "smartctl") {
		t.Errorf("smart_test: %v", err)
	}
	// Abortable: a cancelled step stops.
	delete(node["driver_info"].(map[string]any), "agent_burnin_fio_disk_smart_test")
	node["driver_info"].(map[string]any)["agent_burnin_fio_disk_runtime"] = "1h"
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	if _, err := g.ExecuteStep(ctx, "burnin_disk", hwmgr.Request{Node: node}); err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("aborted burnin_disk: %v after %v", err, time.Since(start))
	}
}

func TestBurninNetworkStep(t *testing.T) {
	port := netnstest.FreeTCPPorts(t, 16)
	node := func(cfg any) map[string]any {
		return map[string]any{"driver_info": map[string]any{"agent_burnin_fio_network_runtime": "0.3", "agent_burnin_fio_network_config": cfg}}
	}
	type result struct {
		res any
		err error
	}
	results := make(chan result, 2)
	for _, role := range []string{"writer", "reader"} {
		g := &GenericManager{networkBurnin: burnin.NetworkOptions{Port: port, Listen: "127.0.0.1", ReaderRetry: 50 * time.Millisecond}}
		go func() {
			res, err := g.ExecuteStep(context.Background(), "burnin_network", hwmgr.Request{Node: node(map[string]any{"role": role, "partner": "127.0.0.1"})})
			results <- result{res, err}
		}()
	}
	for range 2 {
		r := <-results
		dirs, _ := r.res.([]burnin.NetworkDirection)
		if r.err != nil || len(dirs) != 2 || dirs[0].Bytes == 0 || dirs[1].Bytes == 0 {
			t.Errorf("%+v %v", r.res, r.err)
		}
	}
	// IPA's configuration errors, as CleaningError.
	g := &GenericManager{}
	for _, tc := range []struct {
		cfg  any
		want string
	}{
		{nil, "dynamic pairing config is missing agent_burnin_fio_network_pairing_backend_url"},
		{map[string]any{"role": "both", "partner": "x"}, "unknown role: both"},
		{map[string]any{"role": "writer"}, "failed to find partner"},
	} {
		var ie *ipaerror.Error
		if _, err := g.ExecuteStep(context.Background(), "burnin_network", hwmgr.Request{Node: node(tc.cfg)}); !errors.As(err, &ie) || ie.Type != "CleaningError" || !strings.Contains(ie.Details, tc.want) {
			t.Errorf("%v: %v", tc.cfg, err)
		}
	}
	n := node(nil)
	n["driver_info"].(map[string]any)["agent_burnin_fio_network_pairing_backend_url"] = "etcd3+http://x:2379"
	if _, err := g.ExecuteStep(context.Background(), "burnin_network", hwmgr.Request{Node: n}); err == nil || !strings.Contains(err.Error(), "tooz") {
		t.Errorf("tooz pairing: %v", err)
	}
}
