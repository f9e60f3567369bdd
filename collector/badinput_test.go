package collector

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goodMachine is a small complete tree; each bad-input case spoils one file.
func goodMachine(t *testing.T, spoil map[string]string) string {
	t.Helper()
	files := map[string]string{
		"proc/cpuinfo":                  x86CPUInfo,
		"sys/block/":                    "",
		"proc/meminfo":                  "MemTotal:        2013160 kB\n",
		"proc/cmdline":                  "BOOTIF=52:54:00:00:00:01\n",
		"proc/sys/kernel/arch":          "x86_64\n",
		"proc/sys/kernel/hostname":      "node\n",
		"sys/devices/system/cpu/online": "0-1\n",
		"sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq": "2100000\n",
		smbiosTablePath:                        string(sampleSMBIOS()),
		"sys/class/net/eth0":                   "-> ../../devices/virtio0/net/eth0",
		"sys/devices/virtio0/net/eth0/address": "52:54:00:00:00:01\n",
		"sys/devices/virtio0/net/eth0/carrier": "1\n",
		"sys/devices/virtio0/net/eth0/device":  "-> ../../../virtio0",
		"sys/devices/virtio0/vendor":           "0x1af4\n",
		netRecordPath:                          `{"interfaces": {"eth0": {"ipv4": ["192.0.2.9"], "ipv6": []}}}`,
	}
	for k, v := range spoil {
		files[k] = v
	}
	return tree(t, files)
}

// TestBadInputOneWarning: a missing, truncated or garbled source leaves the
// fields it feeds null (or to a documented fallback), logs exactly one
// warning that names the file, and the rest of the inventory is intact.
func TestBadInputOneWarning(t *testing.T) {
	table := sampleSMBIOS()
	for _, tc := range []struct {
		name, file, content string
	}{
		{"meminfo truncated", "proc/meminfo", "MemTot"},
		{"cpu online garbled", "sys/devices/system/cpu/online", "0-x\n"},
		{"cpufreq garbled", "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "fast\n"},
		{"SMBIOS table truncated", smbiosTablePath, string(table[:30])},
		{"SMBIOS table garbage", smbiosTablePath, "\x01\x02"},
		{"net record garbled", netRecordPath, `{"interfaces": [`},
		{"cpuinfo unreadable", "proc/cpuinfo", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := goodMachine(t, map[string]string{tc.file: tc.content})
			if tc.name == "cpuinfo unreadable" {
				// A directory where a file should be: open works, read fails.
				p := filepath.Join(root, tc.file)
				os.Remove(p)
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			logger, records := newLogRecorder(t)
			inv, err := Collect(context.Background(), Options{Root: root, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			var warnings []string
			for _, r := range records() {
				if r.Level >= slog.LevelWarn {
					var text strings.Builder
					text.WriteString(r.Message)
					r.Attrs(func(a slog.Attr) bool { text.WriteString(" " + a.String()); return true })
					warnings = append(warnings, text.String())
				}
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], tc.file) {
				t.Errorf("want one warning naming %s, got %q", tc.file, warnings)
			}
			// What must survive whatever one file does.
			if inv.Hostname != "node" || len(inv.Interfaces) != 1 || inv.Interfaces[0].MACAddress != "52:54:00:00:00:01" {
				t.Errorf("unrelated fields damaged: hostname %q interfaces %+v", inv.Hostname, inv.Interfaces)
			}
			switch tc.file {
			case "proc/meminfo":
				if inv.Memory.Total != nil || inv.Memory.PhysicalMB == nil {
					t.Errorf("memory = %+v", inv.Memory)
				}
			case "sys/devices/system/cpu/online":
				if inv.CPU.Count != 2 { // counted from /proc/cpuinfo instead
					t.Errorf("cpu.count = %d", inv.CPU.Count)
				}
			case "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq":
				if inv.CPU.Frequency != "2095.078" { // cpuinfo's cpu MHz instead
					t.Errorf("cpu.frequency = %q", inv.CPU.Frequency)
				}
			case smbiosTablePath:
				if inv.SystemVendor.ProductName != "" && tc.content == "\x01\x02" {
					t.Errorf("system_vendor = %+v", inv.SystemVendor)
				}
			case netRecordPath:
				if inv.Interfaces[0].IPv4Address != nil {
					t.Errorf("ipv4 = %v", *inv.Interfaces[0].IPv4Address)
				}
			case "proc/cpuinfo":
				if inv.CPU.ModelName != "" || inv.CPU.Count != 2 || inv.CPU.Frequency != "2100.0000" {
					t.Errorf("cpu = %+v", inv.CPU)
				}
			}
		})
	}
}

// TestSpoiledFixturesNeverPanic truncates, then garbles, every file of
// every fixture tree and collects: the inventory must come back (with
// nulls and warnings), never a panic. A unit's recover would hide a panic
// as a warning, so the log is checked for one too.
func TestSpoiledFixturesNeverPanic(t *testing.T) {
	for _, m := range fixtureMachines(t) {
		for _, mode := range []string{"truncate", "garble"} {
			t.Run(m+"/"+mode, func(t *testing.T) {
				root := copyTree(t, filepath.Join(fixturesDir, m, "root"))
				spoilTree(t, root, func(b []byte) []byte {
					if mode == "truncate" {
						return b[:len(b)/2]
					}
					g := make([]byte, len(b))
					for i := range b {
						g[i] = b[i] ^ 0xa5
					}
					return g
				})
				logger, records := newLogRecorder(t)
				if _, err := Collect(context.Background(), Options{Root: root, Logger: logger, SkipBMC: true}); err != nil {
					t.Fatal(err)
				}
				for _, r := range records() {
					r.Attrs(func(a slog.Attr) bool {
						if strings.Contains(a.Value.String(), "panic") {
							t.Errorf("a unit panicked: %s", a.Value.String())
						}
						return true
					})
				}
			})
		}
	}
}

// spoilTree passes every regular file below root through spoil, in place.
func spoilTree(t *testing.T, root string, spoil func([]byte) []byte) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, spoil(b), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
