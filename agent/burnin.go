package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/burnin"
	"github.com/ironic-go/ironic-agent/internal/pyconv"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// Burn-in defaults, IPA's (burnin.py).
const (
	burninDefaultTimeout = 86400 * time.Second
	burninDefaultVMBytes = "98%"
	burninDefaultLoops   = 4
	// burninMemoryReserve is left to the agent and the kernel by
	// burnin_memory: stress-ng's workers are separate processes the OOM
	// killer may take, ours live in the agent.
	burninMemoryReserve = 64 << 20
)

// burninOptions reads the node's driver_info, where IPA reads burn-in
// parameters.
type burninOptions map[string]any

func burninParams(node map[string]any) burninOptions {
	di, _ := node["driver_info"].(map[string]any)
	return di
}

// count reads a worker count or loop number (Python's int() of the value).
func (o burninOptions) count(key string, def int) (int, error) {
	v, ok := o[key]
	if !ok || v == nil {
		return def, nil
	}
	n, err := pyconv.Int(v)
	if err != nil || n < 0 || n > 1<<20 {
		return 0, ipaerror.InvalidCommandParams("driver_info.%s: %s is not a count", key, pyconv.Repr(v))
	}
	return int(n), nil
}

// duration reads a time as stress-ng's --timeout and fio's --runtime take
// it: seconds, or a number with an s, m, h or d suffix.
func (o burninOptions) duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := o[key]
	if !ok || v == nil {
		return def, nil
	}
	s := strings.TrimSpace(pyconv.Str(v))
	unit := time.Second
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 's':
			s = s[:n-1]
		case 'm':
			unit, s = time.Minute, s[:n-1]
		case 'h':
			unit, s = time.Hour, s[:n-1]
		case 'd':
			unit, s = 24*time.Hour, s[:n-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f*float64(unit) > float64(1<<62) {
		return 0, ipaerror.InvalidCommandParams("driver_info.%s: %s is not a time (seconds, or with an s/m/h/d suffix)", key, pyconv.Repr(v))
	}
	return time.Duration(f * float64(unit)), nil
}

func (o burninOptions) str(key, def string) string {
	v, ok := o[key]
	if !ok || v == nil {
		return def
	}
	return pyconv.Str(v)
}

// burninFailed is IPA's CommandExecutionError for a burn-in that failed.
func burninFailed(step string, err error) error {
	return ipaerror.Wrap("CommandExecutionError", 500, "Command execution failed", fmt.Sprintf("%s failed: %v", step, err), err)
}

// burninDone logs the result and writes it to the step's output file
// (IPA's --log-file / --output) when the node names one.
func (g *GenericManager) burninDone(step string, o burninOptions, outputKey string, res any, err error) (any, error) {
	if path := o.str(outputKey, ""); path != "" {
		b, _ := json.MarshalIndent(map[string]any{"step": step, "result": res, "error": errString(err)}, "", " ")
		if werr := os.WriteFile(path, append(b, '\n'), 0o644); werr != nil {
			g.logger().Warn("burn-in: could not write the output file", "step", step, "path", path, "error", werr)
		}
	}
	if err != nil {
		g.logger().Error("burn-in failed", "step", step, "result", res, "error", err)
		return nil, burninFailed(step, err)
	}
	g.logger().Info("burn-in passed", "step", step, "result", res)
	return res, nil
}

func errString(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}

// burninCPUStep is burnin_cpu: driver_info agent_burnin_cpu_cpu workers (0:
// every CPU) busy for agent_burnin_cpu_timeout seconds (86400).
func (g *GenericManager) burninCPUStep(ctx context.Context, req hwmgr.Request) (any, error) {
	o := burninParams(req.Node)
	workers, err := o.count("agent_burnin_cpu_cpu", 0)
	if err != nil {
		return nil, err
	}
	d, err := o.duration("agent_burnin_cpu_timeout", burninDefaultTimeout)
	if err != nil {
		return nil, err
	}
	g.logger().Info("burn-in of the CPUs", "workers", workers, "duration", d)
	res, err := burnin.CPU(ctx, burnin.CPUOptions{Workers: workers, Duration: d})
	return g.burninDone("burnin_cpu", o, "agent_burnin_cpu_outputfile", res, err)
}

// burninMemoryStep is burnin_memory: agent_burnin_vm_vm workers (0: one
// per CPU) over agent_burnin_vm_vm-bytes (98% of the available memory) for
// agent_burnin_vm_timeout seconds (86400).
func (g *GenericManager) burninMemoryStep(ctx context.Context, req hwmgr.Request) (any, error) {
	o := burninParams(req.Node)
	workers, err := o.count("agent_burnin_vm_vm", 0)
	if err != nil {
		return nil, err
	}
	d, err := o.duration("agent_burnin_vm_timeout", burninDefaultTimeout)
	if err != nil {
		return nil, err
	}
	avail, err := memAvailable("/proc/meminfo")
	if err != nil {
		return nil, burninFailed("burnin_memory", err)
	}
	vmBytes := o.str("agent_burnin_vm_vm-bytes", burninDefaultVMBytes)
	g.logger().Info("burn-in of the memory", "workers", workers, "vm_bytes", vmBytes, "available", avail, "duration", d)
	res, err := burnin.Memory(ctx, burnin.MemoryOptions{Workers: workers, Bytes: vmBytes, Duration: d, Available: avail, Reserve: burninMemoryReserve})
	return g.burninDone("burnin_memory", o, "agent_burnin_vm_outputfile", res, err)
}

// memAvailable reads MemAvailable from a meminfo file, in bytes.
func memAvailable(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: MemAvailable %q: %w", path, rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no MemAvailable line", path)
}

// burninDiskStep is burnin_disk: agent_burnin_fio_disk_loops verified
// passes (4) over every disk the guard allows, or passes for
// agent_burnin_fio_disk_runtime seconds when it is positive. IPA's SMART
// self-test afterwards (agent_burnin_fio_disk_smart_test) needs smartctl,
// which this agent does not run: asking for it fails the step before any
// write.
func (g *GenericManager) burninDiskStep(ctx context.Context, req hwmgr.Request) (any, error) {
	o := burninParams(req.Node)
	loops, err := o.count("agent_burnin_fio_disk_loops", burninDefaultLoops)
	if err != nil {
		return nil, err
	}
	runtime, err := o.duration("agent_burnin_fio_disk_runtime", 0)
	if err != nil {
		return nil, err
	}
	if v, ok := o["agent_burnin_fio_disk_smart_test"]; ok {
		if smart, err := pyconv.Bool(v); err != nil || smart {
			return nil, ipaerror.InvalidCommandParams("driver_info.agent_burnin_fio_disk_smart_test: the SMART self-test (smartctl) is not supported by this agent")
		}
	}
	disks, err := g.Disks(ctx)
	if err != nil {
		return nil, err
	}
	guard := blockdev.NewGuard(g.AllowedDevices)
	var names []string
	for _, d := range guard.Filter(disks) {
		names = append(names, d.Name)
	}
	if len(names) == 0 {
		return nil, burninFailed("burnin_disk", fmt.Errorf("no disk to burn in"))
	}
	if g.agent != nil {
		// The disks will no longer hold the image last written.
		g.agent.images.forget()
	}
	g.logger().Info("burn-in of the disks", "disks", names, "loops", loops, "runtime", runtime)
	res, err := burnin.Disks(ctx, guard, names, burnin.DiskOptions{Loops: loops, Runtime: runtime})
	return g.burninDone("burnin_disk", o, "agent_burnin_fio_disk_outputfile", res, err)
}

// burninNetworkStep is burnin_network: with driver_info
// agent_burnin_fio_network_config {"role": "writer"|"reader", "partner":
// host}, the first direction in that role for
// agent_burnin_fio_network_runtime seconds (21600), then the other, on
// port 9000 with 16 connections as IPA's fio runs. IPA's other way to
// pair, a tooz coordination backend (agent_burnin_fio_network_pairing_*),
// is not supported: the step fails saying so.
func (g *GenericManager) burninNetworkStep(ctx context.Context, req hwmgr.Request) (any, error) {
	o := burninParams(req.Node)
	runtime, err := o.duration("agent_burnin_fio_network_runtime", 21600*time.Second)
	if err != nil {
		return nil, err
	}
	cfg, _ := o["agent_burnin_fio_network_config"].(map[string]any)
	if !pyconv.Truthy(cfg) {
		if !pyconv.Truthy(o["agent_burnin_fio_network_pairing_backend_url"]) {
			return nil, ipaerror.CleaningError("fio (network): dynamic pairing config is missing agent_burnin_fio_network_pairing_backend_url")
		}
		return nil, ipaerror.CleaningError("fio (network): dynamic pairing through a tooz backend (agent_burnin_fio_network_pairing_backend_url) is not supported by this agent: set agent_burnin_fio_network_config {\"role\", \"partner\"}")
	}
	role, _ := cfg["role"].(string)
	partner, _ := cfg["partner"].(string)
	if role != "writer" && role != "reader" {
		return nil, ipaerror.CleaningError(fmt.Sprintf("fio (network) found an unknown role: %s", pyconv.Str(cfg["role"])))
	}
	if partner == "" {
		return nil, ipaerror.CleaningError("fio (network) failed to find partner")
	}
	opts := burnin.NetworkOptions{Port: 9000, ReaderRetry: 30 * time.Second}
	if g.networkBurnin.Port != 0 {
		opts = g.networkBurnin
	}
	opts.Role, opts.Partner, opts.Runtime, opts.Jobs = role, partner, runtime, 16
	g.logger().Info("burn-in of the network", "role", role, "partner", partner, "runtime", runtime)
	res, err := burnin.Network(ctx, opts)
	return g.burninDone("burnin_network", o, "agent_burnin_fio_network_outputfile", res, err)
}
