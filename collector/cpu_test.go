package collector

import (
	"context"
	"slices"
	"testing"
)

const x86CPUInfo = `processor	: 0
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz
cpu MHz		: 2095.078
physical id	: 0
flags		: fpu vme de sse2

processor	: 1
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz
cpu MHz		: 1000.000
physical id	: 1
flags		: fpu vme

`

const arm64CPUInfo = `processor	: 0
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x3
CPU part	: 0xd0c
CPU revision	: 1

processor	: 1
BogoMIPS	: 50.00
Features	: fp asimd
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x3
CPU part	: 0xd0c
CPU revision	: 1
`

func TestCPUx86WithCpufreq(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/cpuinfo":                  x86CPUInfo,
		"proc/sys/kernel/arch":          "x86_64\n",
		"sys/devices/system/cpu/online": "0-1\n",
		"sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq":     "3900000\n",
		"sys/devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq":     "2100000\n",
		"sys/devices/system/cpu/cpu0/topology/physical_package_id": "0\n",
		"sys/devices/system/cpu/cpu1/topology/physical_package_id": "1\n",
	})
	inv, err := Collect(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	c := inv.CPU
	if c.ModelName != "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz" || c.Frequency != "3900.0000" ||
		c.Count != 2 || c.Architecture != "x86_64" || c.SocketCount != 2 ||
		!slices.Equal(c.Flags, []string{"fpu", "vme", "de", "sse2"}) {
		t.Errorf("cpu = %+v", c)
	}
}

func TestCPUarm64(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/cpuinfo":                  arm64CPUInfo,
		"proc/sys/kernel/arch":          "aarch64\n",
		"sys/devices/system/cpu/online": "0-1\n",
	})
	inv, err := Collect(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	c := inv.CPU
	if c.ModelName != "Neoverse-N1" || c.Frequency != "" || c.Count != 2 || c.Architecture != "aarch64" ||
		c.SocketCount != 1 || len(c.Flags) != 12 || c.Flags[0] != "fp" {
		t.Errorf("cpu = %+v", c)
	}
}

func TestCPUNoSysfs(t *testing.T) {
	// No online list, no cpufreq: count from cpuinfo, "cpu MHz" verbatim,
	// sockets from "physical id".
	root := tree(t, map[string]string{"proc/cpuinfo": x86CPUInfo})
	inv, err := Collect(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	c := inv.CPU
	if c.Count != 2 || c.Frequency != "2095.078" || c.SocketCount != 2 || c.Architecture != "" {
		t.Errorf("cpu = %+v", c)
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{
		"0":           {0},
		"0-3":         {0, 1, 2, 3},
		"0-1,4,6-7\n": {0, 1, 4, 6, 7},
		"":            {},
	} {
		got, err := parseCPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "0-99999999", "1,", "0--2"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q): no error", bad)
		}
	}
}

func FuzzCPUList(f *testing.F) {
	for _, s := range []string{"0-3", "0,2,4-7", "", "65535", "1-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := parseCPUList(s)
		if err == nil && len(cpus) > maxCPUList {
			t.Fatalf("%d CPUs from %q", len(cpus), s)
		}
	})
}

func FuzzCPUInfo(f *testing.F) {
	f.Add(x86CPUInfo)
	f.Add(arm64CPUInfo)
	f.Add("Processor\t: AArch64 Processor rev 4 (aarch64)\nprocessor\t: 0\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, b := range parseCPUInfo(s) {
			if len(b) == 0 {
				t.Fatal("empty block")
			}
		}
	})
}

func TestCPUCountIsPresentCPUs(t *testing.T) {
	// Two of four CPUs taken offline: lscpu's CPU(s), and so IPA's count,
	// is still 4.
	root := tree(t, map[string]string{
		"proc/cpuinfo":                   x86CPUInfo,
		"sys/devices/system/cpu/present": "0-3\n",
		"sys/devices/system/cpu/online":  "0-1\n",
	})
	inv, err := Collect(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if inv.CPU.Count != 4 {
		t.Errorf("cpu.count = %d, want 4", inv.CPU.Count)
	}
}
