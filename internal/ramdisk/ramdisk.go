// Package ramdisk builds the agent's boot files: a Debian kernel, and an
// initramfs holding the static ironic-agent binary as /init plus the kernel
// modules the hardware needs. No root is needed: the archive is written in
// Go (internal/initramfs), module dependencies are read from the modules
// themselves (internal/kmod).
package ramdisk

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/initramfs"
	"github.com/ironic-go/ironic-agent/internal/kmod"
	"github.com/ironic-go/ironic-agent/internal/version"
)

// DefaultModules returns the modules the initramfs carries (with their
// dependency closure). Each group says why it is there; everything else the
// kernel needs for these machines is built in (Debian's config).
func DefaultModules() []string {
	return []string{
		// Storage. virtio (QEMU/KVM guests), NVMe, AHCI SATA, SCSI disks, and the
		// two SAS HBA families most servers ship with.
		"virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "nvme", "ahci",
		"mpt3sas", "megaraid_sas",
		// t10-pi (needed by sd_mod and nvme-core) asks the crypto API for these
		// through request_module(), which cannot work without modprobe.
		"crc64_rocksoft_generic", "crct10dif_generic",
		// NICs: virtio-net and e1000 (QEMU), then Intel (e1000e, igb, ixgbe,
		// i40e), Broadcom (bnxt_en, tg3) and Mellanox (mlx5_core): the server NICs
		// PXE is done from.
		"virtio_net", "e1000", "e1000e", "igb", "ixgbe", "i40e", "bnxt_en", "tg3", "mlx5_core",
		// IPMI: the BMC address comes from /dev/ipmi0 (IPA loads the same three).
		"ipmi_msghandler", "ipmi_devintf", "ipmi_si",
		// UEFI variables, for boot-mode work on UEFI machines, and the EFI
		// system partition's VFAT (with the code page and I/O charset
		// Debian's kernel mounts it with by default), which
		// install_bootloader mounts to find the boot loaders.
		"efivarfs", "vfat", "nls_cp437", "nls_ascii",
		// Entropy from the hypervisor: crypto/rand (DHCP transaction IDs,
		// TLS) blocks until the kernel's pool is ready, which without a CPU
		// RNG (QEMU's qemu64 has no RDRAND) can take minutes.
		"virtio_rng",
	}
}

// ModuleListPath is where the init finds the modules it may load, one per
// line, dependencies first: the path, a tab, the names of the modules to
// load before it (comma-separated), a tab, its alias patterns
// (space-separated).
const ModuleListPath = "etc/ironic-agent/modules"

// Options describe one initramfs.
type Options struct {
	Kernel  *Kernel
	Agent   string   // path of the static ironic-agent binary
	Modules []string // module names; nil means DefaultModules()
	// Files are extra files: archive path -> host path.
	Files map[string]string
	// Raw also writes the archive uncompressed (InitramfsRawName), which
	// the VM tests boot: the kernel's gunzip of the 24 MiB archive takes
	// about a second under emulation, and /init waits for it.
	Raw bool
}

// Result describes what Build wrote.
type Result struct {
	Kernel    string // path of the kernel copy
	Initramfs string
	Modules   []kmod.Module
	// Uncompressed is the size of the archive before gzip.
	Uncompressed int64
	// InitramfsRaw is the uncompressed archive (Options.Raw), else "".
	InitramfsRaw string
	// Agent is the copy of the agent binary in a cache entry (BuildCached
	// only), and Cached says the entry was there already.
	Agent  string
	Cached bool
}

// caBundle is the build host's CA bundle, copied in for TLS to Ironic.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// Names of the output files, as Ironic calls them (deploy_kernel,
// deploy_ramdisk), following IPA's ironic-python-agent.kernel/.initramfs.
const (
	KernelName    = "ironic-agent.kernel"
	InitramfsName = "ironic-agent.initramfs"
	// InitramfsRawName is the same archive without compression.
	InitramfsRawName = "ironic-agent.initramfs.cpio"
	ISOName          = "ironic-agent.iso"
)

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Build writes outDir/ironic-agent.kernel and outDir/ironic-agent.initramfs.
func Build(ctx context.Context, opts Options, outDir string) (*Result, error) {
	if opts.Kernel == nil || opts.Agent == "" {
		return nil, fmt.Errorf("ramdisk: need a kernel and an agent binary")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkStatic(opts.Agent); err != nil {
		return nil, err
	}
	names := opts.Modules
	if names == nil {
		names = DefaultModules()
	}
	tree, err := kmod.Open(opts.Kernel.ModulesDir)
	if err != nil {
		return nil, err
	}
	mods, err := tree.Resolve(names)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	res := &Result{
		Kernel:    filepath.Join(outDir, KernelName),
		Initramfs: filepath.Join(outDir, InitramfsName),
		Modules:   mods,
	}
	if err := copyFile(opts.Kernel.Vmlinuz, res.Kernel); err != nil {
		return nil, err
	}
	tmp := res.Initramfs + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	defer os.Remove(tmp)
	defer f.Close()
	// gzip: every Debian kernel can unpack it, and decompression is cheap
	// even under emulation.
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	cw := &countWriter{w: zw}
	var rawFile *os.File
	if opts.Raw {
		res.InitramfsRaw = filepath.Join(outDir, InitramfsRawName)
		raw, err := os.Create(res.InitramfsRaw + ".tmp")
		if err != nil {
			return nil, fmt.Errorf("ramdisk: %w", err)
		}
		defer os.Remove(res.InitramfsRaw + ".tmp")
		defer raw.Close()
		cw.w = io.MultiWriter(zw, raw)
		rawFile = raw
	}
	w := initramfs.NewWriter(cw)
	for _, d := range []string{"dev", "proc", "sys", "run", "tmp", "etc/ironic-agent", "usr/bin", "var/lib"} {
		if err := w.Dir(d, 0o755); err != nil {
			return nil, err
		}
	}
	// The kernel opens /dev/console for /init's stdin/stdout/stderr before
	// anything is mounted; the node must be in the archive.
	if err := w.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return nil, err
	}
	if err := addFile(w, "usr/bin/ironic-agent", opts.Agent, 0o755); err != nil {
		return nil, err
	}
	// /init is the agent itself: it runs its init when started as /init.
	if err := w.Symlink("init", "usr/bin/ironic-agent"); err != nil {
		return nil, err
	}
	var list strings.Builder
	modRoot := filepath.Join("lib/modules", opts.Kernel.Version)
	for _, m := range mods {
		// Compressed modules (.ko.xz, .ko.zst, .ko.gz) go in decompressed:
		// finit_module takes them compressed only from kernels built with
		// CONFIG_MODULE_DECOMPRESS, and the initramfs is compressed whole
		// anyway.
		p := filepath.Join(modRoot, kmod.PlainPath(m.Path))
		if err := addModule(w, p, filepath.Join(opts.Kernel.ModulesDir, m.Path)); err != nil {
			return nil, err
		}
		// path, then the modules to load first, then the modalias
		// patterns that call for it (rdinit loads a module only when a
		// device matches one, or always when it has none).
		var aliases []string
		for _, a := range m.Aliases {
			if !strings.ContainsAny(a, " \t\n") {
				aliases = append(aliases, a)
			}
		}
		fmt.Fprintf(&list, "/%s\t%s\t%s\n", p, strings.Join(m.Deps, ","), strings.Join(aliases, " "))
	}
	if err := w.Bytes(ModuleListPath, 0o644, []byte(list.String())); err != nil {
		return nil, err
	}
	// TLS to Ironic with the build host's CA bundle, when it has one.
	if ca := caBundle; fileExists(ca) {
		if err := addFile(w, strings.TrimPrefix(ca, "/"), ca, 0o644); err != nil {
			return nil, err
		}
	}
	for dst, src := range opts.Files {
		if err := addFile(w, dst, src, 0o644); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("ramdisk: write initramfs: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("ramdisk: compress initramfs: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if err := os.Rename(tmp, res.Initramfs); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if rawFile != nil {
		if err := rawFile.Close(); err != nil {
			return nil, fmt.Errorf("ramdisk: %w", err)
		}
		if err := os.Rename(res.InitramfsRaw+".tmp", res.InitramfsRaw); err != nil {
			return nil, fmt.Errorf("ramdisk: %w", err)
		}
	}
	res.Uncompressed = cw.n
	return res, nil
}

// checkStatic refuses a dynamically linked agent: the initramfs has no
// dynamic loader, and the kernel's only complaint would be "Failed to
// execute /init (error -2)".
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("ramdisk: agent binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("ramdisk: agent binary %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

func addFile(w *initramfs.Writer, dst, src string, perm uint32) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	if perm&0o111 == 0 && st.Mode()&0o111 != 0 {
		perm |= 0o111
	}
	if err := w.File(dst, perm, st.Size(), f); err != nil {
		return fmt.Errorf("ramdisk: add %s: %w", src, err)
	}
	return nil
}

func addModule(w *initramfs.Writer, dst, src string) error {
	if strings.HasSuffix(src, ".ko") {
		return addFile(w, dst, src, 0o644)
	}
	data, err := kmod.ReadModule(src)
	if err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	if err := w.Bytes(dst, 0o644, data); err != nil {
		return fmt.Errorf("ramdisk: add %s: %w", src, err)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst + ".tmp")
	if err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	defer os.Remove(dst + ".tmp")
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("ramdisk: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	return os.Rename(dst+".tmp", dst)
}

// BuildAgent compiles a static ironic-agent from the module in srcDir (the
// repository root) into out, stamped with the tree's git describe and
// commit (see VersionLDFlags). The stamp is part of the binary, so a new
// commit makes a new binary and BuildCached, which keys on the binary's
// hash, a new ramdisk: no stale version string is reused.
func BuildAgent(ctx context.Context, srcDir, out string) error {
	ldflags := "-s -w"
	// Outside a git tree (a source tarball) the binary is built unstamped
	// and says "unknown" commit, rather than failing the build.
	if stamp, err := VersionLDFlags(ctx, srcDir); err == nil {
		ldflags += " " + stamp
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ldflags, "-o", out, "./cmd/ironic-agent")
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ramdisk: go build ./cmd/ironic-agent in %s: %w: %s", srcDir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// VersionLDFlags returns the linker flags that stamp internal/version with
// `git describe --tags --always --dirty` and the commit of the git tree at
// srcDir. The go command's own VCS stamping is not enough: it is off with
// -buildvcs=false and records no tag.
func VersionLDFlags(ctx context.Context, srcDir string) (string, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = srcDir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("ramdisk: git %s in %s: %w: %s", strings.Join(args, " "), srcDir, err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	describe, err := git("describe", "--tags", "--always", "--dirty")
	if err != nil {
		return "", err
	}
	commit, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	return stampFlags(describe, commit), nil
}

// stampFlags is the -X flags for describe and commit; git's output has no
// spaces or quotes, which -ldflags would split on.
func stampFlags(describe, commit string) string {
	return "-X " + version.DescribeVar + "=" + describe + " -X " + version.CommitVar + "=" + commit
}

// ISO writes a hybrid BIOS/UEFI ISO for virtual media with grub-mkrescue
// (GRUB and xorriso have no Go equivalent): GRUB boots the kernel and
// initramfs with cmdline on the serial console and the screen.
func ISO(ctx context.Context, kernel, initrd, cmdline, out string) error {
	stage, err := os.MkdirTemp("", "ironic-agent-iso-")
	if err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	defer os.RemoveAll(stage)
	if err := os.MkdirAll(filepath.Join(stage, "boot/grub"), 0o755); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	if err := copyFile(kernel, filepath.Join(stage, "boot", KernelName)); err != nil {
		return err
	}
	if err := copyFile(initrd, filepath.Join(stage, "boot", InitramfsName)); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
set timeout=1
menuentry "ironic-agent" {
	linux /boot/%s console=tty0 console=ttyS0,115200 boot_method=vmedia %s
	initrd /boot/%s
}
`, KernelName, cmdline, InitramfsName)
	if err := os.WriteFile(filepath.Join(stage, "boot/grub/grub.cfg"), []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	if _, err := run(ctx, "", "grub-mkrescue", "-o", out, stage); err != nil {
		return fmt.Errorf("ramdisk: build the ISO (needs grub-pc-bin, grub-efi-amd64-bin, xorriso, mtools): %w", err)
	}
	return nil
}
