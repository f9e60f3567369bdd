package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/inventory/hints"
)

func TestInstallDevice(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for _, n := range []string{"a", "b", "c"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		names = append(names, p)
	}
	disks := []inventory.Disk{
		{Name: names[0], Size: 100 << 30, Model: inventory.Ptr("Big")},
		{Name: names[1], Size: 8 << 30, Model: inventory.Ptr("Small")},
		{Name: names[2], Size: 8 << 30, Model: inventory.Ptr("Other")},
	}
	g := blockdev.NewGuard(names)
	d, err := InstallDevice(g, disks, map[string]any{})
	if err != nil || d.Name != names[1] {
		t.Errorf("default: %v %v", d.Name, err)
	}
	d, err = InstallDevice(g, disks, map[string]any{"properties": map[string]any{"root_device": map[string]any{"model": "big"}}})
	if err != nil || d.Name != names[0] {
		t.Errorf("properties hint: %v %v", d.Name, err)
	}
	// instance_info wins over properties.
	d, err = InstallDevice(g, disks, map[string]any{
		"instance_info": map[string]any{"root_device": map[string]any{"model": "other"}},
		"properties":    map[string]any{"root_device": map[string]any{"model": "big"}}})
	if err != nil || d.Name != names[2] {
		t.Errorf("instance_info hint: %v %v", d.Name, err)
	}
	d, err = InstallDevice(g, disks, map[string]any{"properties": map[string]any{
		"skip_block_devices": []any{map[string]any{"model": "small"}}}})
	if err != nil || d.Name != names[2] {
		t.Errorf("skip list: %v %v", d.Name, err)
	}
	// A disk outside the guard is never chosen.
	d, err = InstallDevice(blockdev.NewGuard(names[:1]), disks, map[string]any{"properties": map[string]any{"root_device": map[string]any{"model": "small"}}})
	if !errors.Is(err, hints.ErrNoRootDisk) {
		t.Errorf("guarded: %v %v", d.Name, err)
	}
	if _, err := InstallDevice(g, disks, map[string]any{"properties": map[string]any{"root_device": map[string]any{"colour": "red"}}}); err == nil {
		t.Error("invalid hint accepted")
	}
}
