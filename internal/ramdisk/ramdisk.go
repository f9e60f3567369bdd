// Package ramdisk builds the agent's boot files: a Debian kernel, and an
// initramfs holding the static ironic-agent binary as /init plus the kernel
// modules the hardware needs. No root is needed: the archive is written in
// Go (internal/ramdisk/initramfs), module dependencies are read from the
// modules themselves (internal/ramdisk/kmod).
package ramdisk

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"github.com/ironic-go/ironic-agent/internal/version"
)

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
	// Firmware are the packages firmware files are taken from (see
	// FetchFirmware): a file a module names goes in when one has it.
	Firmware []FirmwarePackage
	// FirmwareIndex says which Debian packages ship which firmware file
	// (FirmwareIndex): a file a module names that a package not in
	// Firmware ships fails the build. nil checks nothing.
	FirmwareIndex map[string][]string
	// Programs are the registered programs with their libraries
	// (FetchPrograms); nil carries none.
	Programs *ProgramSet
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
	Report
}

// Report is what a build found and what it cost.
type Report struct {
	// Builtin are requested modules the kernel has built in: nothing to
	// load. Absent are optional ones it lacks, "name: reason".
	Builtin, Absent []string `json:",omitempty"`
	// Firmware are the firmware files in the initramfs; FirmwareMissing
	// the files modules name that none of the packages ships (and, with
	// Options.FirmwareIndex, no Debian package).
	Firmware        []FirmwareFile `json:",omitempty"`
	FirmwareMissing []FirmwareRef  `json:",omitempty"`
	// Programs are the files carried for the program registry
	// (internal/programs): programs, libraries, the loader.
	Programs []ProgramFile `json:",omitempty"`
	// Sizes says what each piece of the initramfs costs.
	Sizes []SizeItem `json:",omitempty"`
}

// FirmwareFile is a firmware file in the initramfs, below /lib/firmware.
type FirmwareFile struct {
	Name    string // below /lib/firmware, as the package ships it (name.xz if compressed)
	Package string
	Size    int64
}

// FirmwareRef is a firmware name a module asks for.
type FirmwareRef struct{ Module, Name string }

// SizeItem is one piece of the initramfs: its files, their bytes, and
// what they add to the gzip'ed archive (the compressed stream is flushed
// after each piece, so the pieces add up to the archive).
type SizeItem struct {
	Item  string // "agent", "modules nic", "firmware firmware-bnx2x", ...
	Files int
	Bytes int64
	Gzip  int64
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
	tree, err := kmod.Open(opts.Kernel.ModulesDir)
	if err != nil {
		return nil, err
	}
	entries := manifestFor(opts.Modules)
	var rep Report
	var names, absent []string
	group := map[string]string{}
	for _, e := range entries {
		switch {
		case tree.Has(e.Name):
			names = append(names, e.Name)
			group[kmod.Normalize(e.Name)] = cmp.Or(e.Group, "(not in the manifest)")
		case tree.Builtin(e.Name):
			rep.Builtin = append(rep.Builtin, e.Name)
		case e.Optional:
			rep.Absent = append(rep.Absent, e.Name+": "+e.OptionalReason)
		default:
			absent = append(absent, e.Name)
		}
	}
	if len(absent) > 0 {
		return nil, fmt.Errorf("ramdisk: module %s not found in kernel %s: neither a module file nor built in (mark it optional in the manifest with a reason, or drop it)",
			strings.Join(absent, ", "), opts.Kernel.Version)
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
		Report:    rep,
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
	fc := &countWriter{w: f}
	zw, err := gzip.NewWriterLevel(fc, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	cw := &countWriter{w: zw}
	var w *initramfs.Writer
	// piece runs add and books what it wrote as one SizeItem.
	piece := func(item string, files int, add func() error) error {
		u, c := cw.n, fc.n
		if err := add(); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("ramdisk: write initramfs: %w", err)
		}
		if err := zw.Flush(); err != nil {
			return fmt.Errorf("ramdisk: compress initramfs: %w", err)
		}
		res.Sizes = append(res.Sizes, SizeItem{Item: item, Files: files, Bytes: cw.n - u, Gzip: fc.n - c})
		return nil
	}
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
	w = initramfs.NewWriter(cw)
	err = piece("base", 0, func() error {
		for _, d := range []string{"dev", "proc", "sys", "run", "tmp", "etc/ironic-agent", "usr/bin", "var/lib", "lib/firmware"} {
			if err := w.Dir(d, 0o755); err != nil {
				return err
			}
		}
		// The kernel opens /dev/console for /init's stdin/stdout/stderr
		// before anything is mounted; the node must be in the archive.
		return w.CharDev("dev/console", 0o600, 5, 1)
	})
	if err != nil {
		return nil, err
	}
	err = piece("agent", 1, func() error {
		if err := addFile(w, "usr/bin/ironic-agent", opts.Agent, 0o755); err != nil {
			return err
		}
		// /init is the agent itself: it runs its init when started as /init.
		return w.Symlink("init", "usr/bin/ironic-agent")
	})
	if err != nil {
		return nil, err
	}
	onDemand := map[string]bool{}
	for _, e := range entries {
		onDemand[strings.ReplaceAll(e.Name, "-", "_")] = e.OnDemand
	}
	var list strings.Builder
	modRoot := filepath.Join("lib/modules", opts.Kernel.Version)
	for _, m := range mods {
		// path, then the modules to load first, then the modalias
		// patterns that call for it (rdinit loads a module only when a
		// device matches one, or always when it has none), then
		// "ondemand" for one the init must not load at boot.
		var aliases []string
		for _, a := range m.Aliases {
			if !strings.ContainsAny(a, " \t\n") {
				aliases = append(aliases, a)
			}
		}
		p := filepath.Join(modRoot, kmod.PlainPath(m.Path))
		flags := ""
		if onDemand[strings.ReplaceAll(m.Name, "-", "_")] {
			flags = "\tondemand"
		}
		fmt.Fprintf(&list, "/%s\t%s\t%s%s\n", p, strings.Join(m.Deps, ","), strings.Join(aliases, " "), flags)
	}
	// Modules by manifest group (dependencies the manifest does not name
	// on their own), so the size report can say what each group costs.
	var groups []string
	byGroup := map[string][]kmod.Module{}
	for _, m := range mods {
		g, ok := group[m.Name]
		if !ok {
			g = "(dependencies)"
		}
		if _, seen := byGroup[g]; !seen {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], m)
	}
	for _, g := range groups {
		err := piece("modules "+g, len(byGroup[g]), func() error {
			for _, m := range byGroup[g] {
				// Compressed modules (.ko.xz, .ko.zst, .ko.gz) go in
				// decompressed: finit_module takes them compressed only
				// from kernels built with CONFIG_MODULE_DECOMPRESS, and
				// the initramfs is compressed whole anyway.
				p := filepath.Join(modRoot, kmod.PlainPath(m.Path))
				if err := addModule(w, p, filepath.Join(opts.Kernel.ModulesDir, m.Path)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if err := addFirmware(w, piece, mods, opts.Firmware, opts.FirmwareIndex, &res.Report); err != nil {
		return nil, err
	}
	if err := addPrograms(w, piece, opts.Programs, &res.Report); err != nil {
		return nil, err
	}
	others := 1 + len(opts.Files)
	if fileExists(caBundle) {
		others++
	}
	err = piece("other (module list, CA bundle, extra files)", others, func() error {
		if err := w.Bytes(ModuleListPath, 0o644, []byte(list.String())); err != nil {
			return err
		}
		// TLS to Ironic with the build host's CA bundle, when it has one.
		if ca := caBundle; fileExists(ca) {
			if err := addFile(w, strings.TrimPrefix(ca, "/"), ca, 0o644); err != nil {
				return err
			}
		}
		for dst, src := range opts.Files {
			if err := addFile(w, dst, src, 0o644); err != nil {
				return err
			}
		}
		// The archive's trailer.
		if err := w.Close(); err != nil {
			return fmt.Errorf("ramdisk: write initramfs: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
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
