package agent

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/internal/efivar"
	"github.com/ironic-go/ironic-agent/internal/efivar/efivartest"
)

func TestCleanUEFINVRAM(t *testing.T) {
	// The fake NVRAM's Boot0001 (a bare File() path) and Boot0002 (a MAC
	// node) are entries IPA's efibootmgr regex never lists; add a GRUB
	// and a removable-path entry on a disk, and a PXE entry under PciRoot.
	store := efivartest.FakeNVRAM(t)
	hd := efivar.HardDrive{PartitionNumber: 1, Start: 2048, Size: 1 << 20, MBRType: efivar.PartitionGPT, SignatureType: efivar.SignatureGUID}.Node()
	pciRoot := efivar.DevicePathNode{Type: 2, SubType: 1, Data: []byte{0xd0, 0x41, 0x03, 0x0a, 0, 0, 0, 0}}
	for n, e := range map[uint16]struct {
		label string
		path  efivar.DevicePath
	}{
		3: {"grub", efivar.DevicePath{hd, efivar.FilePathNode(`\EFI\debian\grubx64.efi`)}},
		4: {"PXE", efivar.DevicePath{pciRoot, {Type: 3, SubType: 11, Data: make([]byte, 33)}}},
		5: {"removable", efivar.DevicePath{hd, efivar.FilePathNode(`\EFI\BOOT\BOOTX64.EFI`)}},
	} {
		b, err := efivar.LoadOption{Attributes: efivar.LoadOptionActive, Description: e.label, FilePath: e.path}.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Set(efivar.BootName(n), efivar.BootVarAttributes, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.SetBootOrder([]uint16{5, 3, 1, 4, 2}); err != nil {
		t.Fatal(err)
	}
	ra := standalone(t, Options{EFIVars: store.Dir}, nil)
	node := map[string]any{"uuid": "n-1"}
	version := map[string]any{"generic_hardware_manager": GenericManagerVersion}
	run := func(kind string, args map[string]any) map[string]any {
		step := map[string]any{"step": "clean_uefi_nvram", "interface": "deploy", "priority": 0, "args": args}
		_, r := call(t, ra, kind+".execute_"+kind+"_step", map[string]any{"node": node, "ports": []any{}, "step": step, kind + "_version": version})
		return r
	}

	for _, bad := range []any{"^HD", []any{1}, []any{"("}, map[string]any{}} {
		r := run("clean", map[string]any{"match_patterns": bad})
		if e, _ := r["command_error"].(map[string]any); e["type"] != "InvalidCommandParamsError" || !strings.Contains(e["details"].(string), "The match_patterns must be a list of strings") {
			t.Errorf("match_patterns %v: %v", bad, r)
		}
	}
	// The defaults remove what sits on a disk partition (^HD\().
	r := run("clean", nil)
	if got := string(mustJSON(r["command_result"])); !strings.Contains(got, `"clean_result":{"deleted":["Boot0003","Boot0005"]}`) {
		t.Errorf("default patterns: %s", got)
	}
	// Case-insensitive, as IPA compiles them; a deploy step too.
	r = run("deploy", map[string]any{"match_patterns": []any{"PCIROOT"}})
	if got := string(mustJSON(r["command_result"])); !strings.Contains(got, `"deploy_result":{"deleted":["Boot0004"]}`) {
		t.Errorf("PCIROOT: %s", got)
	}
	if got, want := efivartest.NVRAM(t, store), "BootOrder [0001 0002]\n"+
		"Boot0001 debian File(\\EFI\\debian\\shimx64.efi)\n"+
		"Boot0002 UEFI PXEv4 Path(3,11,"+strings.Repeat("00", 33)+")\n"; got != want {
		t.Errorf("NVRAM left:\n%s\nwant:\n%s", got, want)
	}
}

// A fixture tree's agent leaves this machine's NVRAM alone.
func TestNoNVRAMCleanForAFixtureTree(t *testing.T) {
	a := &Agent{cfg: &config.Config{InventoryRoot: t.TempDir()}}
	g := &GenericManager{agent: a}
	got, err := g.cleanUEFINVRAMStep(t.Context(), hwmgr.Request{})
	if want := map[string]any{"deleted": []string{}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("clean_uefi_nvram with a fixture tree: %v, %v; want %v", got, err, want)
	}
}
