package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/inventory"
)

// ext4Image is a bare ext4 filesystem image of size bytes: a partition
// image without a boot loader.
func ext4Image(t *testing.T, size int64) []byte {
	t.Helper()
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skipf("SKIPPED: needs mkfs.ext4 (e2fsprogs): %v", err)
	}
	p := filepath.Join(t.TempDir(), "root.img")
	os.WriteFile(p, nil, 0o600)
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", "img-root", p).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writePartitionImageStep runs write_image for a partition image with the
// given extra image_info fields and returns the finished command.
func writePartitionImageStep(t *testing.T, ra *runningAgent, dev string, img []byte, bootMode string, extra map[string]any) agentclient.Reply {
	t.Helper()
	sum := sha256.Sum256(img)
	info := map[string]any{
		"id": "part-img", "urls": []string{imageServerForTest(t, img)}, "disk_format": "raw", "container_format": "bare",
		"stream_raw_images": true, "os_hash_algo": "sha256", "os_hash_value": hex.EncodeToString(sum[:]), "node_uuid": "n1",
		"image_type": "partition", "root_mb": 64, "swap_mb": 0, "ephemeral_mb": 0, "preserve_ephemeral": false,
		"deploy_boot_mode": bootMode, "boot_option": "local",
	}
	for k, v := range extra {
		info[k] = v
	}
	body, _ := json.Marshal(map[string]any{"name": "deploy.execute_deploy_step", "params": map[string]any{
		"step": map[string]any{"interface": "deploy", "step": "write_image", "args": map[string]any{"image_info": info, "configdrive": nil}},
		"node": map[string]any{"uuid": "n1", "properties": map[string]any{"root_device": map[string]any{"name": dev}},
			"instance_info": map[string]any{"deploy_boot_mode": bootMode}},
		"ports":          []any{},
		"deploy_version": map[string]any{"generic_hardware_manager": GenericManagerVersion},
	}})
	ironicPost(t, ra, string(body), false)
	return pollLast(t, ra, "execute_deploy_step")
}

// TestPartitionImageUEFIResult: a UEFI partition image gets an ESP; the
// step's result carries both UUIDs in IPA's words and get_partition_uuids
// the partitions.
func TestPartitionImageUEFIResult(t *testing.T) {
	for _, tool := range []string{"mkfs.vfat", "blkid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: needs %s: %v", tool, err)
		}
	}
	dev := looptest.Attach(t, 1<<30, "--partscan")
	inv := func(ctx context.Context) (*inventory.Inventory, error) {
		i, err := testInventory(ctx)
		i.CPU.Architecture = "x86_64"
		return i, err
	}
	ra := standalone(t, Options{Hooks: Hooks{Inventory: inv}}, map[string]string{"allowed_devices": dev})
	res := writePartitionImageStep(t, ra, dev, ext4Image(t, 32<<20), "uefi", map[string]any{"swap_mb": 8})
	if res.Status != "SUCCEEDED" {
		t.Fatalf("write_image %s %s", res.Status, res.Error)
	}
	rootUUID, espUUID := blkidValue(t, dev+"p3", "UUID"), blkidValue(t, dev+"p1", "UUID")
	want := fmt.Sprintf(`{"deploy_result":{"result":"prepare_image: image (part-img) written to device %s root_uuid=%s efi_system_partition_uuid=%s"}`, dev, rootUUID, espUUID)
	if rootUUID == "" || espUUID == "" || !strings.HasPrefix(string(res.Result), want) {
		t.Errorf("result %s\nwant prefix %s", res.Result, want)
	}
	_, r := call(t, ra, "standby.get_partition_uuids", map[string]any{})
	got := string(mustJSON(r["command_result"]))
	wantUUIDs := fmt.Sprintf(`{"efi system partition uuid":%q,"partitions":{"efi system partition":"%sp1","root":"%sp3","swap":"%sp2"},"root uuid":%q}`,
		espUUID, dev, dev, dev, rootUUID)
	if got != wantUUIDs {
		t.Errorf("get_partition_uuids %s\nwant %s", got, wantUUIDs)
	}
}

// TestPartitionImageTooBig: an image larger than root_mb is IPA's
// InvalidCommandParamsError, found before the disk is touched.
func TestPartitionImageTooBig(t *testing.T) {
	dev := looptest.Attach(t, 256<<20, "--partscan")
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("old disk content"), 0)
	f.Close()
	ra := standalone(t, Options{}, map[string]string{"allowed_devices": dev})
	res := writePartitionImageStep(t, ra, dev, ext4Image(t, 40<<20), "bios", map[string]any{"root_mb": "16"})
	if res.Status != "FAILED" || !strings.Contains(string(res.Error), `"type":"InvalidCommandParamsError"`) ||
		!strings.Contains(string(res.Error), "Root partition is too small for requested image. Image virtual size: 40 MB, Root size: 16 MB") {
		t.Errorf("too big: %s %s", res.Status, res.Error)
	}
	b := make([]byte, 16)
	f, _ = os.Open(dev)
	f.ReadAt(b, 0)
	f.Close()
	if string(b) != "old disk content" {
		t.Error("the disk was touched")
	}
	// root_mb missing: a clear parameter error.
	res = writePartitionImageStep(t, ra, dev, ext4Image(t, 8<<20), "bios", map[string]any{"root_mb": nil})
	if res.Status != "FAILED" || !strings.Contains(string(res.Error), "image_info root_mb is required for partition images") {
		t.Errorf("no root_mb: %s %s", res.Status, res.Error)
	}
}
