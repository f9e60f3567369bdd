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
	"net/http"
	"strings"
)

// Direct calls to the agent API of a VM, without Ironic (the standalone
// scenarios).

// agentCall runs one command on the VM's agent API and waits for it,
// returning its command_result (an error for a failed command).
func agentCall(ctx context.Context, base, name string, params any) (json.RawMessage, error) {
	body, _ := json.Marshal(map[string]any{"name": name, "params": params})
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/commands/?wait=true&agent_token="+raidToken, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string          `json:"command_status"`
		Error  json.RawMessage `json:"command_error"`
		Result json.RawMessage `json:"command_result"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &r) != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %s", name, resp.StatusCode, data)
	}
	if r.Status != "SUCCEEDED" {
		return nil, fmt.Errorf("%s: %s: %s", name, r.Status, r.Error)
	}
	return r.Result, nil
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
