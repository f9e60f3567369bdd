package qemu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
)

// Ramdisk is a built kernel + initramfs.
type Ramdisk struct {
	Kernel, Initrd, Agent string
	KernelVersion         string
	KernelPackage         string
	// Cached says another build (this run's or an earlier one) made it.
	Cached bool
	// PVH is the same kernel uncompressed, for SeaBIOS boots (see
	// KernelFor), or "" with the reason in PVHErr.
	PVH    string
	PVHErr error
	// InitrdRaw is the initramfs uncompressed (see InitrdFor), or "".
	InitrdRaw string
	// Modules are the names of the modules in the initramfs, dependencies
	// first; Firmware the firmware files, below /lib/firmware.
	Modules  []string
	Firmware []ramdisk.FirmwareFile
}

// InitrdFor returns the initramfs to boot under firmware: for SeaBIOS the
// uncompressed archive, since the kernel's gunzip of it takes about a
// second under emulation (0.5 s uncompressed) and /init waits for it; for
// OVMF the gzip'ed one, as a server gets it.
func (rd *Ramdisk) InitrdFor(firmware Firmware) string {
	if firmware == BIOS && rd.InitrdRaw != "" {
		return rd.InitrdRaw
	}
	return rd.Initrd
}

// KernelFor returns the kernel to boot under firmware: for SeaBIOS the
// uncompressed vmlinux through its PVH entry, which saves the 5 s (10 s on
// a loaded machine) the bzImage's decompressor takes under emulation
// before the kernel starts; for OVMF, which cannot boot that, and when
// there is no PVH kernel, the bzImage. Tests about the agent do not care
// which; the bzImage path stays covered by the UEFI and ISO boots.
func (rd *Ramdisk) KernelFor(firmware Firmware) string {
	if firmware == BIOS && rd.PVH != "" {
		return rd.PVH
	}
	return rd.Kernel
}

// RepoRoot finds the module root (the directory holding go.mod) above the
// working directory, where tests run.
func RepoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("qemu: no go.mod above the working directory")
		}
		d = p
	}
}

// BuildRamdisk builds the agent (static) from the repository and the
// ramdisk, with the kernel from the download cache. See BuildGuestRamdisk.
func BuildRamdisk(ctx context.Context) (*Ramdisk, error) {
	return BuildGuestRamdisk(ctx, "", nil)
}

// BuildGuestRamdisk is BuildRamdisk with another program as /init: pkg is
// the Go package to build statically instead of ./cmd/ironic-agent (""
// for the agent), and files are extra files (archive path -> host path).
//
// The result lives in the ramdisk cache (cachedir.Dir), shared by
// every test process: go test ./... runs the packages that boot VMs in
// parallel, and each used to link the agent and pack its own initramfs.
// The binary and cmd/mkramdisk are linked in a place of their own below
// the cache, per repository and package, under a lock, so go build finds
// them up to date and does not link again when the sources have not
// changed. mkramdisk -cached then makes or finds ramdisk.BuildCached's
// entry for that binary, the kernel, the files and mkramdisk itself. It
// runs as its own process because in a test binary built with -race,
// packing the initramfs takes minutes instead of seconds. The files are
// read-only by convention: nothing may change them.
func BuildGuestRamdisk(ctx context.Context, pkg string, files map[string]string) (*Ramdisk, error) {
	return buildGuestRamdisk(ctx, ramdisk.DefaultArch, pkg, files)
}

// BuildRamdiskArch is BuildRamdisk for architecture arch (ramdisk.Arches):
// the agent cross-built, the architecture's Debian kernel, firmware and
// programs. An arm64 one boots on Arm64Machine.
func BuildRamdiskArch(ctx context.Context, arch string) (*Ramdisk, error) {
	return BuildGuestRamdiskArch(ctx, arch, "", nil)
}

// BuildGuestRamdiskArch is BuildGuestRamdisk for architecture arch: the
// guest program cross-built too.
func BuildGuestRamdiskArch(ctx context.Context, arch, pkg string, files map[string]string) (*Ramdisk, error) {
	if _, err := ramdisk.LookupArch(arch); err != nil {
		return nil, fmt.Errorf("qemu: %w", err)
	}
	return buildGuestRamdisk(ctx, arch, pkg, files)
}

func buildGuestRamdisk(ctx context.Context, arch, pkg string, files map[string]string) (*Ramdisk, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cache, err := cachedir.Dir()
	if err != nil {
		return nil, err
	}
	name, target := "ironic-agent", "./cmd/ironic-agent"
	if pkg != "" {
		name, target = filepath.Base(pkg), pkg
	}
	key := root + "\x00" + target
	if arch != ramdisk.DefaultArch {
		key += "\x00" + arch
	}
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(cache, "agents", hex.EncodeToString(sum[:8]))
	bin, mk := filepath.Join(dir, name), filepath.Join(dir, "mkramdisk")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("qemu: %w", err)
	}
	// Held until the ramdisk is made from the binary: no other process
	// relinks it in between.
	unlock, err := cachedir.Lock(ctx, filepath.Join(dir, "lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if pkg == "" {
		err = ramdisk.BuildAgentFor(ctx, root, bin, arch)
	} else {
		err = goBuildFor(ctx, root, bin, pkg, arch)
	}
	if err != nil {
		return nil, err
	}
	if err := goBuild(ctx, root, mk, "./cmd/mkramdisk"); err != nil {
		return nil, err
	}
	mkSum, err := cachedir.FileSHA256(mk)
	if err != nil {
		return nil, err
	}
	flavour, err := KernelFlavour()
	if err != nil {
		return nil, err
	}
	args := []string{"-cached", "-json", "-cache", cache, "-agent", bin, "-cache-key", "mkramdisk " + mkSum, "-kernel", flavour.Name}
	if arch != ramdisk.DefaultArch {
		args = append(args, "-arch", arch)
	}
	if p := os.Getenv("IRONIC_AGENT_KERNEL_PACKAGE"); p != "" {
		args = append(args, "-kernel-package", p)
	}
	if pkg != "" {
		// A test's own guest program in the agent's place is no product:
		// the size budget is the agent ramdisk's.
		args = append(args, "-budget", "0")
	}
	for _, dst := range slices.Sorted(maps.Keys(files)) {
		args = append(args, "-file", dst+"="+files[dst])
	}
	cmd := exec.CommandContext(ctx, mk, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("qemu: %s %s: %w: %s", mk, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	var res struct {
		Kernel, Initramfs, Agent     string
		InitramfsRaw                 string
		KernelPackage, KernelVersion string
		KernelImage                  string
		Cached                       bool
		Modules                      []struct{ Name string }
		Firmware                     []ramdisk.FirmwareFile
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("qemu: mkramdisk -json printed %q: %w", out, err)
	}
	rd := &Ramdisk{Kernel: res.Kernel, Initrd: res.Initramfs, Agent: res.Agent, KernelVersion: res.KernelVersion,
		KernelPackage: res.KernelPackage, Cached: res.Cached, InitrdRaw: res.InitramfsRaw, Firmware: res.Firmware}
	for _, m := range res.Modules {
		rd.Modules = append(rd.Modules, m.Name)
	}
	if arch == ramdisk.DefaultArch {
		rd.PVH, rd.PVHErr = ramdisk.PVH(ctx, res.KernelImage)
	} else {
		rd.PVHErr = fmt.Errorf("qemu: no PVH kernel for %s (an x86 boot protocol)", arch)
	}
	return rd, nil
}

// BuildStatic links a static binary of the repository's package pkg
// (./internal/testbed/guest/...) at out, as the ramdisk's programs are
// linked: for a test that puts a program of its own into a guest.
func BuildStatic(ctx context.Context, pkg, out string) error {
	return BuildStaticArch(ctx, "", pkg, out)
}

// BuildStaticArch is BuildStatic for the GOARCH arch ("": the host's), for
// a guest of Machine.Arch arch.
func BuildStaticArch(ctx context.Context, arch, pkg, out string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	return goBuildFor(ctx, root, out, pkg, arch)
}

// KernelFlavourEnv names the kernel flavour the test bed's ramdisks and
// OS images carry (ramdisk.KernelFlavours; unset: the default).
const KernelFlavourEnv = "RAMDISK_KERNEL"

// KernelFlavour returns the flavour $RAMDISK_KERNEL names.
func KernelFlavour() (ramdisk.KernelFlavour, error) {
	f, err := ramdisk.LookupKernelFlavour(os.Getenv(KernelFlavourEnv))
	if err != nil {
		return f, fmt.Errorf("qemu: $%s: %w", KernelFlavourEnv, err)
	}
	return f, nil
}

// FetchKernel returns the kernel the test bed's ramdisks carry: the
// flavour's ($RAMDISK_KERNEL), or the package $IRONIC_AGENT_KERNEL_PACKAGE
// names from its suites, from the download cache.
func FetchKernel(ctx context.Context, cache string) (*ramdisk.Kernel, error) {
	f, err := KernelFlavour()
	if err != nil {
		return nil, err
	}
	return ramdisk.FetchKernel(ctx, cache, f, os.Getenv("IRONIC_AGENT_KERNEL_PACKAGE"))
}

// goBuild links a static binary of pkg (CGO_ENABLED=0, as in the ramdisk)
// at out; go build leaves an up-to-date out alone.
func goBuild(ctx context.Context, root, out, pkg string) error {
	return goBuildFor(ctx, root, out, pkg, "")
}

// goBuildFor is goBuild for GOARCH arch ("": the host's).
func goBuildFor(ctx context.Context, root, out, pkg, arch string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if arch != "" {
		cmd.Env = append(cmd.Env, "GOOS=linux", "GOARCH="+arch)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("qemu: %s in %s: %w: %s", strings.Join(cmd.Args, " "), root, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// BuildESP writes to out the ESP of Debian's signed shim and GRUB of the
// test bed's kernel flavour (KernelFlavour), as the release builds it.
func BuildESP(ctx context.Context, out string) error {
	bc, err := FetchBootChain(ctx)
	if err != nil {
		return err
	}
	return ramdisk.ESP(ctx, bc, out, time.Time{})
}

// FetchBootChain returns Debian's signed shim and GRUB of the test bed's
// kernel flavour (KernelFlavour), from the download cache: the chain that
// boots the flavour's signed kernel under Secure Boot.
func FetchBootChain(ctx context.Context) (*ramdisk.BootChain, error) {
	f, err := KernelFlavour()
	if err != nil {
		return nil, err
	}
	cache, err := cachedir.Dir()
	if err != nil {
		return nil, err
	}
	return ramdisk.FetchBootChain(ctx, cache, f)
}

// GRUBDir is Debian's GRUB directory for architecture arch (an arm64-efi
// one for Arm64) of the test bed's kernel flavour (ramdisk.GRUBDir, from
// the download cache): the host's Debian has GRUB modules for its own
// architecture only.
func GRUBDir(ctx context.Context, arch string) (string, error) {
	f, err := KernelFlavour()
	if err != nil {
		return "", err
	}
	f.Arch = arch
	cache, err := cachedir.Dir()
	if err != nil {
		return "", err
	}
	return ramdisk.GRUBDir(ctx, cache, f)
}
