package vm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
)

// Direct calls to the agent API of a VM, without Ironic (the standalone
// scenarios).

// agentCall runs one command on the VM's agent API and waits for it,
// returning its command_result (an error for a failed command).
func agentCall(ctx context.Context, base, name string, params any) (json.RawMessage, error) {
	return (&agentclient.Client{Base: base, Token: raidToken}).Run(ctx, name, params)
}

// cleanStep runs one clean step of the generic manager.
func cleanStep(ctx context.Context, base, step string, node map[string]any) (json.RawMessage, error) {
	iface := "raid"
	if strings.HasPrefix(step, "erase_") {
		iface = "deploy"
	}
	return agentCall(ctx, base, "clean.execute_clean_step", map[string]any{
		"step": map[string]any{"step": step, "interface": iface, "priority": 0, "reboot_requested": false, "abortable": true},
		"node": node, "ports": []any{}, "clean_version": nil})
}

// mdstat is /proc/mdstat of the guest, from log.collect_system_logs.
func mdstat(ctx context.Context, base string) (string, error) {
	res, err := agentCall(ctx, base, "log.collect_system_logs", map[string]any{})
	if err != nil {
		return "", err
	}
	var logs struct {
		SystemLogs string `json:"system_logs"`
	}
	if err := json.Unmarshal(res, &logs); err != nil {
		return "", err
	}
	gz, err := base64.StdEncoding.DecodeString(logs.SystemLogs)
	if err != nil {
		return "", err
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("no mdstat in the system logs: %v", err)
		}
		if strings.HasSuffix(h.Name, "mdstat") {
			b, err := io.ReadAll(tr)
			return string(b), err
		}
	}
}

// inventoryDisks are the disk names and sizes get_hardware_info reports.
func inventoryDisks(ctx context.Context, base string) (map[string]int64, error) {
	res, err := agentCall(ctx, base, "poll.get_hardware_info", map[string]any{})
	if err != nil {
		return nil, err
	}
	var inv struct {
		Disks []struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"disks"`
	}
	if err := json.Unmarshal(res, &inv); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, d := range inv.Disks {
		out[d.Name] = d.Size
	}
	return out, nil
}
