package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/inventory"
)

// The step as Ironic sends it: files from the node's properties and the
// step's arguments, on the install disk chosen by the root device hints,
// confined to the allowed devices.
func TestInjectFilesStepOnLoop(t *testing.T) {
	looptest.RequireTools(t, "sgdisk", "mkfs.ext4", "partprobe")
	dev := looptest.Attach(t, 32<<20, "--partscan")
	looptest.Run(t, "sgdisk", "-n", "1:2048:0", "-t", "1:8300", dev)
	looptest.Run(t, "partprobe", dev)
	part := blockdev.PartitionPath(dev, 1)
	looptest.WaitFor(t, part)
	tree := t.TempDir()
	if err := os.Mkdir(filepath.Join(tree, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	looptest.Run(t, "mkfs.ext4", "-q", "-F", "-d", tree, part)

	g := &GenericManager{AllowedDevices: []string{dev},
		Disks: func(context.Context) ([]inventory.Disk, error) {
			return []inventory.Disk{{Name: dev, Size: 32 << 20}}, nil
		}}
	b64 := base64.StdEncoding.EncodeToString
	node := map[string]any{"uuid": "n-1", "properties": map[string]any{
		"root_device":  map[string]any{"name": dev},
		"inject_files": []any{map[string]any{"path": "/etc/from-node", "content": b64([]byte("node"))}},
	}}
	files := json.RawMessage(`[{"path": "/etc/from-step", "content": "` + b64([]byte("step")) + `", "mode": 384}]`)
	req := hwmgr.Request{Node: node, Args: map[string]json.RawMessage{"files": files}}
	if _, err := g.ExecuteStep(context.Background(), "inject_files", req); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := unix.Mount(part, dir, "ext4", unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(dir, 0) }()
	for name, want := range map[string]string{"etc/from-node": "node", "etc/from-step": "step"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "etc/from-step")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v %v", st.Mode(), err)
	}
}
