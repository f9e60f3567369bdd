package rdinit

import (
	"reflect"
	"testing"
	"testing/fstest"
)

const testList = "/lib/modules/k/scsi_mod.ko\t\t\n" +
	"/lib/modules/k/crc64-rocksoft.ko\t\t\n" +
	"/lib/modules/k/t10-pi.ko\tcrc64_rocksoft\t\n" +
	"/lib/modules/k/sd_mod.ko\tscsi_mod,t10_pi\tscsi:t-0x00* scsi:t-0x0e*\n" +
	"/lib/modules/k/virtio_scsi.ko\tscsi_mod\tvirtio:d00000008v*\n" +
	"/lib/modules/k/virtio_pci.ko\t\tpci:v00001AF4d*sv*sd*bc*sc*i*\n" +
	"/lib/modules/k/mlxfw.ko\t\t\n" +
	"/lib/modules/k/mlx5_core.ko\tmlxfw\tpci:v000015B3d00001017sv*sd*bc*sc*i*\n" +
	"/lib/modules/k/crct10dif_generic.ko\t\tcrypto-crct10dif\n" +
	"/lib/modules/k/efivarfs.ko\t\tfs-efivarfs\n"

func names(es []modEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return out
}

func TestParseModuleList(t *testing.T) {
	es := parseModuleList(testList + "\n# comment\n/lib/modules/k/old-style.ko\n")
	if len(es) != 11 {
		t.Fatalf("%d entries: %v", len(es), names(es))
	}
	sd := es[3]
	if sd.name != "sd_mod" || !reflect.DeepEqual(sd.deps, []string{"scsi_mod", "t10_pi"}) ||
		!reflect.DeepEqual(sd.aliases, []string{"scsi:t-0x00*", "scsi:t-0x0e*"}) || !sd.deviceDriver() {
		t.Errorf("sd_mod: %+v", sd)
	}
	if es[10].name != "old_style" || es[10].deviceDriver() || es[8].deviceDriver() {
		t.Errorf("old-style line or name alias: %+v %+v", es[10], es[8])
	}
}

func TestModulesFor(t *testing.T) {
	es := parseModuleList(testList)
	devices := fstest.MapFS{
		"pci0000:00/0000:00:04.0/modalias":         {Data: []byte("pci:v00001AF4d00001004sv00001AF4sd00000008bc01sc00i00\n")},
		"pci0000:00/0000:00:04.0/virtio1/modalias": {Data: []byte("virtio:d00000008v00001AF4\n")},
		"platform/serial8250/modalias":             {Data: []byte("platform:serial8250\n")},
	}
	loaded := map[string]bool{}
	// Round 1: the PCI device and the virtio device are there; no disk yet.
	got := modulesFor(es, scanModaliases(devices), loaded)
	want := []string{"scsi_mod", "virtio_scsi", "virtio_pci", "crct10dif_generic", "efivarfs"}
	if !reflect.DeepEqual(names(got), want) {
		t.Errorf("round 1: %v, want %v", names(got), want)
	}
	for _, e := range got {
		loaded[e.name] = true
	}
	// Round 2: the HBA found a disk.
	devices["pci0000:00/0000:00:04.0/virtio1/host0/target0:0:3/0:0:3:0/modalias"] = &fstest.MapFile{Data: []byte("scsi:t-0x00\n")}
	got = modulesFor(es, scanModaliases(devices), loaded)
	if want := []string{"crc64_rocksoft", "t10_pi", "sd_mod"}; !reflect.DeepEqual(names(got), want) {
		t.Errorf("round 2: %v, want %v", names(got), want)
	}
	for _, e := range got {
		loaded[e.name] = true
	}
	if got := modulesFor(es, scanModaliases(devices), loaded); len(got) != 0 {
		t.Errorf("round 3 should load nothing: %v", names(got))
	}
	// mlx5_core and its library never came: no such NIC.
	if loaded["mlx5_core"] || loaded["mlxfw"] {
		t.Error("loaded a driver for absent hardware")
	}
	if got := withDeps(es, []modEntry{es[7]}, loaded); !reflect.DeepEqual(names(got), []string{"mlxfw", "mlx5_core"}) {
		t.Errorf("withDeps(mlx5_core) = %v", names(got))
	}
}
