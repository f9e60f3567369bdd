package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// collectCPU fills cpu the way IPA's lscpu parsing does (IPA
// hardware.get_cpus), from /proc/cpuinfo and the sysfs CPU topology.
func collectCPU(ctx context.Context, c *collection) error {
	cpu := &c.inv.CPU
	var errs []error

	// Without /proc/cpuinfo the sysfs topology still gives count,
	// frequency and sockets.
	info, err := c.fs.ReadFile("proc/cpuinfo")
	if err != nil {
		errs = append(errs, err)
	}
	blocks := parseCPUInfo(string(info))
	var first map[string]string
	if len(blocks) > 0 {
		first = blocks[0]
	}

	cpus, err := c.presentCPUs()
	if err != nil {
		// Without the sysfs list, count the processor blocks as lscpu
		// does on kernels without sysfs topology.
		errs = append(errs, err)
		cpus = nil
		for i, b := range blocks {
			if n, err := strconv.Atoi(b["processor"]); err == nil {
				cpus = append(cpus, n)
			} else {
				cpus = append(cpus, i)
			}
		}
	}
	cpu.Count = len(cpus)

	cpu.ModelName = first["model name"]
	if cpu.ModelName == "" {
		// arm64 /proc/cpuinfo has no model name; lscpu names the core from
		// the MIDR implementer and part numbers.
		cpu.ModelName = armModelName(first["CPU implementer"], first["CPU part"])
	}

	cpu.Frequency = c.cpuMaxMHz(cpus)
	if cpu.Frequency == "" {
		// Older lscpu printed "CPU MHz" verbatim from /proc/cpuinfo when
		// there is no cpufreq driver (VMs); current lscpu prints nothing
		// and IPA reports "". We keep the information.
		cpu.Frequency = first["cpu MHz"]
	}

	arch, err := c.architecture()
	if err != nil {
		errs = append(errs, err)
	}
	cpu.Architecture = arch

	// lscpu's Flags: "flags" on x86, "Features" on arm64.
	flags := first["flags"]
	if flags == "" {
		flags = first["Features"]
	}
	cpu.Flags = strings.Fields(flags)
	if cpu.Flags == nil {
		cpu.Flags = []string{}
	}

	cpu.SocketCount = c.socketCount(cpus, blocks)
	return errors.Join(errs...)
}

// parseCPUInfo splits /proc/cpuinfo into its per-processor blocks of
// "key : value" lines. Lines before the first blank line that carry no
// "processor" key (old arm64 headers) form their own block; blocks without
// any key are dropped.
func parseCPUInfo(s string) []map[string]string {
	var blocks []map[string]string
	cur := map[string]string{}
	flush := func() {
		if len(cur) > 0 {
			blocks = append(blocks, cur)
		}
		cur = map[string]string{}
	}
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, dup := cur[k]; !dup {
			cur[k] = strings.TrimSpace(v)
		}
	}
	flush()
	// Merge an old arm64 header block (model, features, implementer printed
	// once for all CPUs) into the first processor block.
	if len(blocks) > 1 {
		if _, ok := blocks[0]["processor"]; !ok {
			for k, v := range blocks[0] {
				if _, ok := blocks[1][k]; !ok {
					blocks[1][k] = v
				}
			}
			blocks = blocks[1:]
		}
	}
	return blocks
}

// presentCPUs returns the logical CPUs lscpu counts as "CPU(s)": the
// present ones (util-linux 2.37+ prints its npresents there; IPA takes that
// line), which nproc --all also counts. It equals the online set unless
// CPUs were taken offline. Without the present list, the online list.
func (c *collection) presentCPUs() ([]int, error) {
	var errs []error
	for _, rel := range []string{"sys/devices/system/cpu/present", "sys/devices/system/cpu/online"} {
		s, err := c.fs.ReadString(rel)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		cpus, err := parseCPUList(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.fs.Path(rel), err))
			continue
		}
		return cpus, errors.Join(errs...)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s: no present or online CPU list", c.fs.Path("sys/devices/system/cpu"))
	}
	return nil, errors.Join(errs...)
}

// maxCPUList bounds a CPU list so a garbled file cannot make us allocate
// without limit (the kernel's NR_CPUS maximum is 8192).
const maxCPUList = 1 << 16

// parseCPUList parses the kernel's cpulist format ("0-3,8,10-11").
func parseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []int{}, nil
	}
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		if b >= maxCPUList || len(out)+(b-a) >= maxCPUList {
			return nil, fmt.Errorf("CPU list %q names more than %d CPUs", s, maxCPUList)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// cpuMaxMHz is lscpu's "CPU max MHz": the highest cpufreq
// cpuinfo_max_freq (kHz) of the CPUs, printed with four decimals.
// "" when no CPU has a cpufreq driver.
func (c *collection) cpuMaxMHz(cpus []int) string {
	best := int64(-1)
	for _, n := range cpus {
		rel := fmt.Sprintf("sys/devices/system/cpu/cpu%d/cpufreq/cpuinfo_max_freq", n)
		s, err := c.fs.ReadString(rel)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.warn("cpu", err)
			}
			continue
		}
		khz, err := strconv.ParseInt(s, 10, 64)
		if err != nil || khz < 0 {
			c.warn("cpu", fmt.Errorf("%s: %q is not a frequency in kHz", c.fs.Path(rel), s))
			continue
		}
		best = max(best, khz)
	}
	if best < 0 {
		return ""
	}
	return strconv.FormatFloat(float64(best)/1000, 'f', 4, 64)
}

// architecture is uname's machine field (lscpu's Architecture). A fixture
// tree carries it in proc/sys/kernel/arch (Linux 6.1+ has that file; the
// capture writes it from uname on older kernels).
func (c *collection) architecture() (string, error) {
	arch, err := c.fs.ReadString("proc/sys/kernel/arch")
	if err == nil && arch != "" {
		return arch, nil
	}
	if c.fs.live() {
		return unameMachine()
	}
	return "", err
}

func unameMachine() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Machine[:]), nil
}

// socketCount is lscpu's "Socket(s)": the distinct physical package ids of
// the CPUs, else the distinct "physical id" values of /proc/cpuinfo,
// else 1 when there is any CPU (a machine without topology data has one
// socket); 0 when nothing is known (IPA's default).
func (c *collection) socketCount(cpus []int, blocks []map[string]string) int {
	ids := map[string]bool{}
	for _, n := range cpus {
		s, err := c.fs.ReadString(fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/physical_package_id", n))
		if err != nil {
			continue
		}
		ids[s] = true
	}
	if len(ids) == 0 {
		for _, b := range blocks {
			if id, ok := b["physical id"]; ok {
				ids[id] = true
			}
		}
	}
	if len(ids) == 0 && len(cpus) > 0 {
		return 1
	}
	return len(ids)
}

// armModelName names an arm64 core from its MIDR implementer and part
// numbers as lscpu does (util-linux lscpu-arm.c). The table holds the
// server-class cores a bare-metal cloud meets; others give "" (IPA's value
// when lscpu prints no model name).
func armModelName(implementer, part string) string {
	impl, err1 := strconv.ParseUint(strings.TrimPrefix(implementer, "0x"), 16, 16)
	p, err2 := strconv.ParseUint(strings.TrimPrefix(part, "0x"), 16, 16)
	if err1 != nil || err2 != nil {
		return ""
	}
	type key struct{ impl, part uint64 }
	names := map[key]string{
		{0x41, 0xd03}: "Cortex-A53",
		{0x41, 0xd04}: "Cortex-A35",
		{0x41, 0xd05}: "Cortex-A55",
		{0x41, 0xd07}: "Cortex-A57",
		{0x41, 0xd08}: "Cortex-A72",
		{0x41, 0xd09}: "Cortex-A73",
		{0x41, 0xd0a}: "Cortex-A75",
		{0x41, 0xd0b}: "Cortex-A76",
		{0x41, 0xd0c}: "Neoverse-N1",
		{0x41, 0xd0d}: "Cortex-A77",
		{0x41, 0xd40}: "Neoverse-V1",
		{0x41, 0xd41}: "Cortex-A78",
		{0x41, 0xd49}: "Neoverse-N2",
		{0x41, 0xd4f}: "Neoverse-V2",
		{0x43, 0x0af}: "ThunderX2 99xx",
		{0x48, 0xd01}: "Kunpeng-920",
		{0xc0, 0xac3}: "Ampere-1",
		{0xc0, 0xac4}: "Ampere-1a",
	}
	return names[key{impl, p}]
}
