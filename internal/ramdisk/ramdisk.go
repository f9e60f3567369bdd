// Package ramdisk builds the agent's boot files: a Debian kernel, and an
// initramfs holding the static ironic-agent binary as /init plus the kernel
// modules the hardware needs. No root is needed: the archive is written in
// Go (internal/ramdisk/initramfs), module dependencies are read from the
// modules themselves (internal/ramdisk/kmod).
package ramdisk

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"github.com/ironic-go/ironic-agent/internal/version"
)

// ModuleListPath is where the init finds the modules it may load, one per
// line, dependencies first: the path, a tab, the names of the modules to
// load before it (comma-separated), a tab, its alias patterns
// (space-separated).
const ModuleListPath = "etc/ironic-agent/modules"

// ModprobeLinkPath links to the agent, which is the ramdisk's modprobe
// there (rdinit.ModprobePath): the init points the kernel's module helper
// at it, so the kernel loads the manifest's ondemand modules when it needs
// one (a file system at its mount, an md level, a device-mapper target).
const ModprobeLinkPath = "usr/bin/modprobe"

// Options describe one initramfs.
type Options struct {
	Kernel *Kernel
	Agent  string // path of the static ironic-agent binary
	// Modules are the only modules (module names); nil means the
	// manifest, modules.txt, with its subtrees.
	Modules []string
	// AddModules are more module names, on top of Modules or the manifest.
	AddModules []string
	// Manifest replaces modules.txt (ParseManifest's entries); nil for it.
	Manifest []ManifestEntry
	// Firmware are the packages firmware files are taken from (see
	// FetchFirmware): a file a module names goes in when one has it.
	Firmware []FirmwarePackage
	// FirmwareIndex says which Debian packages ship which firmware file
	// (FirmwareIndex): a file a module names that a package not in
	// Firmware ships fails the build. nil checks nothing.
	FirmwareIndex map[string][]string
	// FirmwareIndexUnverified are the suites whose Contents FirmwareIndex
	// left out, with the reason: the build's report says so.
	FirmwareIndexUnverified []string
	// Programs are the registered programs with their libraries
	// (FetchPrograms); nil carries none.
	Programs *ProgramSet
	// Files are extra files: archive path -> host path.
	Files map[string]string
	// Release is the content of ReleasePath (ReleaseInfo.Format); nil
	// writes none.
	Release []byte
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
	// FirmwareIndexUnverified are Options.FirmwareIndexUnverified: the
	// suites whose Contents the check of firmware-packages.txt did without.
	FirmwareIndexUnverified []string `json:",omitempty"`
	// Programs are the files carried for the program registry
	// (internal/programs): programs, libraries, the loader.
	Programs []ProgramFile `json:",omitempty"`
	// Excluded are the manifest's exclusions with the modules of this
	// kernel each covers.
	Excluded []Exclusion `json:",omitempty"`
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

// SizeBudget is the most the kernel and the initramfs of a stable
// release's kernel may weigh together: what a server downloads over PXE
// or virtual media before the agent starts, and what it holds in RAM
// while it runs.
const SizeBudget = 48 << 20

// NewestSizeBudget is SizeBudget for the newest flavour's kernel (see
// KernelFlavours).
const NewestSizeBudget = 64 << 20

// CheckBudget fails when a kernel and an initramfs of these sizes (bytes)
// weigh more than budget (bytes; 0: no limit), the initramfs without its
// extra files (ExtraFilesItem of report): what an operator adds is the
// operator's.
func CheckBudget(kernel, initramfs int64, report []SizeItem, budget int64) error {
	if budget <= 0 {
		return nil
	}
	for _, it := range report {
		if it.Item == ExtraFilesItem {
			initramfs -= it.Gzip
		}
	}
	if kernel+initramfs > budget {
		return fmt.Errorf("ramdisk: kernel (%.2f MiB) + initramfs (%.2f MiB) = %.2f MiB, over the %d MiB budget: leave a subtree or a firmware package out (modules.txt, firmware-packages.txt) and see the size report",
			float64(kernel)/(1<<20), float64(initramfs)/(1<<20), float64(kernel+initramfs)/(1<<20), budget>>20)
	}
	return nil
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

// selection is what Build takes from the kernel's module tree.
type selection struct {
	arch    Arch
	entries []ManifestEntry
	mods    []kmod.Module
	group   map[string]string
	report  Report
}

// selectFor checks opts (a static agent of the kernel's architecture, programs
// of the same) and picks the modules the manifest asks for, each checked for
// its signature.
func selectFor(ctx context.Context, opts Options) (*selection, error) {
	if opts.Kernel == nil || opts.Agent == "" {
		return nil, fmt.Errorf("ramdisk: need a kernel and an agent binary")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	arch, err := LookupArch(opts.Kernel.Arch)
	if err != nil {
		return nil, err
	}
	if err := checkStatic(opts.Agent, arch); err != nil {
		return nil, err
	}
	if opts.Programs != nil && cmpOr(opts.Programs.Arch, DefaultArch) != arch.Name {
		return nil, fmt.Errorf("ramdisk: the programs are %s's, the kernel %s is %s's", opts.Programs.Arch, opts.Kernel.Package, arch.Name)
	}
	tree, err := kmod.Open(opts.Kernel.ModulesDir)
	if err != nil {
		return nil, err
	}
	sel := &selection{arch: arch, entries: ManifestForArch(manifestFor(opts.Manifest, opts.Modules, opts.AddModules), arch.Name)}
	names, group, rep, err := SelectModules(tree, sel.entries, opts.Kernel.Version)
	if err != nil {
		return nil, err
	}
	sel.group, sel.report = group, rep
	if sel.mods, err = tree.Resolve(names); err != nil {
		return nil, err
	}
	if err := checkModuleSignatures(opts.Kernel, sel.mods); err != nil {
		return nil, err
	}
	return sel, nil
}

// Build writes outDir/ironic-agent.kernel and outDir/ironic-agent.initramfs.
func Build(ctx context.Context, opts Options, outDir string) (*Result, error) {
	sel, err := selectFor(ctx, opts)
	if err != nil {
		return nil, err
	}
	arch, mods, group, entries := sel.arch, sel.mods, sel.group, sel.entries
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	res := &Result{
		Kernel:    filepath.Join(outDir, KernelName),
		Initramfs: filepath.Join(outDir, InitramfsName),
		Modules:   mods,
		Report:    sel.report,
	}
	if err := arch.copyKernel(opts.Kernel.Vmlinuz, res.Kernel); err != nil {
		return nil, err
	}
	if opts.Raw {
		res.InitramfsRaw = filepath.Join(outDir, InitramfsRawName)
	}
	a, err := createArchive(res.Initramfs, res.InitramfsRaw)
	if err != nil {
		return nil, err
	}
	defer a.discard()
	// The pieces, in archive order: the size report lists them so.
	if err := a.piece("base", 0, a.writeBase); err != nil {
		return nil, err
	}
	if err := a.piece("agent", 1, func() error { return a.writeAgent(opts.Agent) }); err != nil {
		return nil, err
	}
	modRoot := filepath.Join("lib/modules", opts.Kernel.Version)
	keep := ""
	if opts.Kernel.Config != "" {
		if keep, err = opts.Kernel.DecompressedSuffix(); err != nil {
			return nil, err
		}
	}
	if err := a.writeModules(mods, group, modRoot, opts.Kernel.ModulesDir, keep); err != nil {
		return nil, err
	}
	if err := addFirmware(a.w, a.piece, mods, opts.Firmware, opts.FirmwareIndex, &res.Report); err != nil {
		return nil, err
	}
	res.FirmwareIndexUnverified = opts.FirmwareIndexUnverified
	if err := addPrograms(a.w, a.piece, opts.Programs, &res.Report); err != nil {
		return nil, err
	}
	if err := a.writeOthers(moduleList(mods, entries, modRoot, keep), opts.Release, opts.Files); err != nil {
		return nil, err
	}
	if err := a.commit(); err != nil {
		return nil, err
	}
	res.Sizes = a.sizes
	res.Uncompressed = a.cw.n
	return res, nil
}

// moduleList is the content of ModuleListPath for mods.
func moduleList(mods []kmod.Module, entries []ManifestEntry, modRoot, keep string) string {
	onDemand := map[string]bool{}
	for _, e := range entries {
		onDemand[strings.ReplaceAll(e.Name, "-", "_")] = e.OnDemand
	}
	var list strings.Builder
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
		p := filepath.Join(modRoot, modulePath(m.Path, keep))
		flags := ""
		if onDemand[strings.ReplaceAll(m.Name, "-", "_")] {
			flags = "\tondemand"
		}
		fmt.Fprintf(&list, "/%s\t%s\t%s%s\n", p, strings.Join(m.Deps, ","), strings.Join(aliases, " "), flags)
	}
	return list.String()
}

// archive is the initramfs being written: cpio over gzip over a temporary
// file, with Options.Raw the uncompressed stream into a second one, and
// the bytes counted on both sides of gzip for the size report.
type archive struct {
	w             *initramfs.Writer
	zw            *gzip.Writer
	cw, fc        *countWriter // the bytes into gzip, and out of it
	f, raw        *os.File
	path, rawPath string // final paths; the files are written at path.tmp
	sizes         []SizeItem
}

// createArchive starts the archive that commit renames to path, and to
// rawPath uncompressed ("": none).
func createArchive(path, rawPath string) (*archive, error) {
	a := &archive{path: path, rawPath: rawPath}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	a.f = f
	// gzip: every Debian kernel can unpack it, and decompression is cheap
	// even under emulation.
	a.fc = &countWriter{w: f}
	a.zw, err = gzip.NewWriterLevel(a.fc, gzip.BestCompression)
	if err != nil {
		a.discard()
		return nil, err
	}
	a.cw = &countWriter{w: a.zw}
	if rawPath != "" {
		a.raw, err = os.Create(rawPath + ".tmp")
		if err != nil {
			a.discard()
			return nil, fmt.Errorf("ramdisk: %w", err)
		}
		a.cw.w = io.MultiWriter(a.zw, a.raw)
	}
	a.w = initramfs.NewWriter(a.cw)
	return a, nil
}

// piece runs add and books what it wrote as one SizeItem.
func (a *archive) piece(item string, files int, add func() error) error {
	u, c := a.cw.n, a.fc.n
	if err := add(); err != nil {
		return err
	}
	if err := a.w.Flush(); err != nil {
		return fmt.Errorf("ramdisk: write initramfs: %w", err)
	}
	if err := a.zw.Flush(); err != nil {
		return fmt.Errorf("ramdisk: compress initramfs: %w", err)
	}
	a.sizes = append(a.sizes, SizeItem{Item: item, Files: files, Bytes: a.cw.n - u, Gzip: a.fc.n - c})
	return nil
}

// writeBase writes the directories and the console node.
func (a *archive) writeBase() error {
	for _, d := range []string{"dev", "proc", "sys", "run", "tmp", "etc/ironic-agent", "usr/bin", "var/lib", "lib/firmware"} {
		if err := a.w.Dir(d, 0o755); err != nil {
			return err
		}
	}
	// The kernel opens /dev/console for /init's stdin/stdout/stderr
	// before anything is mounted; the node must be in the archive.
	return a.w.CharDev("dev/console", 0o600, 5, 1)
}

// writeAgent writes the agent binary and /init.
func (a *archive) writeAgent(agent string) error {
	if err := addFile(a.w, "usr/bin/ironic-agent", agent, 0o755); err != nil {
		return err
	}
	// /init is the agent itself: it runs its init when started as /init.
	if err := a.w.Symlink("init", "usr/bin/ironic-agent"); err != nil {
		return err
	}
	// And the kernel's and programs' modprobe (rdinit.Modprobe).
	return a.w.Symlink(ModprobeLinkPath, "ironic-agent")
}

// writeModules writes mods, one piece per manifest group (dependencies
// the manifest does not name on their own as one more), so the size
// report can say what each group costs. Modules compressed with keep
// (Kernel.DecompressedSuffix) go in as shipped; the others decompressed.
func (a *archive) writeModules(mods []kmod.Module, group map[string]string, modRoot, modulesDir, keep string) error {
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
		err := a.piece("modules "+g, len(byGroup[g]), func() error {
			for _, m := range byGroup[g] {
				p := filepath.Join(modRoot, modulePath(m.Path, keep))
				if err := addModule(a.w, p, filepath.Join(modulesDir, m.Path)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// modulePath is where the module at rel goes: as shipped when it is
// compressed with keep, which the kernel decompresses itself at
// finit_module (MODULE_INIT_COMPRESSED_FILE), saving the initramfs the
// difference between XZ and gzip (about a third of the modules' share);
// decompressed otherwise, since finit_module takes a compressed module
// only from a kernel built with CONFIG_MODULE_DECOMPRESS for that
// compression.
func modulePath(rel, keep string) string {
	if keep != "" && strings.HasSuffix(rel, keep) {
		return rel
	}
	return kmod.PlainPath(rel)
}

// ExtraFilesItem is the SizeItem of the extra files (Options.Files): the
// operator's own, which the budget does not count.
const ExtraFilesItem = "extra files"

// writeOthers writes the last pieces, the module list, the release file
// and the build host's CA bundle, then the extra files (sorted, so the
// archive is the same for the same files), then the archive's trailer.
func (a *archive) writeOthers(list string, release []byte, files map[string]string) error {
	others := 1
	if release != nil {
		others++
	}
	if fileExists(caBundle) {
		others++
	}
	trailer := func() error {
		if err := a.w.Close(); err != nil {
			return fmt.Errorf("ramdisk: write initramfs: %w", err)
		}
		return nil
	}
	err := a.piece("other (module list, release, CA bundle)", others, func() error {
		if err := a.w.Bytes(ModuleListPath, 0o644, []byte(list)); err != nil {
			return err
		}
		if release != nil {
			if err := a.w.Bytes(ReleasePath, 0o644, release); err != nil {
				return err
			}
		}
		// TLS to Ironic with the build host's CA bundle, when it has one.
		if ca := caBundle; fileExists(ca) {
			if err := addFile(a.w, strings.TrimPrefix(ca, "/"), ca, 0o644); err != nil {
				return err
			}
		}
		if len(files) == 0 {
			return trailer()
		}
		return nil
	})
	if err != nil || len(files) == 0 {
		return err
	}
	return a.piece(ExtraFilesItem, len(files), func() error {
		for _, dst := range slices.Sorted(maps.Keys(files)) {
			if err := addFile(a.w, dst, files[dst], 0o644); err != nil {
				return err
			}
		}
		return trailer()
	})
}

// commit ends the gzip stream and renames the files into place.
func (a *archive) commit() error {
	if err := a.zw.Close(); err != nil {
		return fmt.Errorf("ramdisk: compress initramfs: %w", err)
	}
	if err := a.f.Close(); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	if err := os.Rename(a.path+".tmp", a.path); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	if a.raw != nil {
		if err := a.raw.Close(); err != nil {
			return fmt.Errorf("ramdisk: %w", err)
		}
		if err := os.Rename(a.rawPath+".tmp", a.rawPath); err != nil {
			return fmt.Errorf("ramdisk: %w", err)
		}
	}
	return nil
}

// discard closes the files and removes what commit did not rename.
func (a *archive) discard() {
	if a.raw != nil {
		a.raw.Close()
		os.Remove(a.rawPath + ".tmp")
	}
	a.f.Close()
	os.Remove(a.path + ".tmp")
}

// checkStatic refuses a dynamically linked agent, or one of another
// architecture than the kernel's: the initramfs has no dynamic loader,
// and the kernel's only complaint would be "Failed to execute /init
// (error -2)" (-8 for the wrong machine).
func checkStatic(path string, arch Arch) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("ramdisk: agent binary: %w", err)
	}
	defer f.Close()
	if err := arch.checkELF(path, f); err != nil {
		return err
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("ramdisk: agent binary %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

func addFile(w *initramfs.Writer, dst, src string, perm uint32) error {
	if err := w.HostFile(dst, src, perm); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	return nil
}

func addModule(w *initramfs.Writer, dst, src string) error {
	if strings.HasSuffix(src, ".ko") || filepath.Ext(src) == filepath.Ext(dst) {
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
	return copyThrough(src, dst, func(w io.Writer, r io.Reader) error {
		_, err := io.Copy(w, r)
		return err
	})
}

// copyThrough writes dst.tmp with write from src's content, and renames
// it to dst once whole.
func copyThrough(src, dst string, write func(io.Writer, io.Reader) error) error {
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
	if err := write(out, in); err != nil {
		out.Close()
		return fmt.Errorf("ramdisk: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	return os.Rename(dst+".tmp", dst)
}

// BuildAgent compiles a static ironic-agent for DefaultArch from the
// module in srcDir (the repository root) into out, stamped with the
// tree's git describe and commit (see VersionLDFlags). The stamp is part
// of the binary, so a new commit makes a new binary and BuildCached,
// which keys on the binary's hash, a new ramdisk: no stale version string
// is reused.
func BuildAgent(ctx context.Context, srcDir, out string) error {
	return BuildAgentFor(ctx, srcDir, out, DefaultArch)
}

// BuildAgentFor is BuildAgent for architecture arch (Arches), cross-built
// with GOARCH whatever the host is: the agent is pure Go.
func BuildAgentFor(ctx context.Context, srcDir, out, arch string) error {
	// Outside a git tree (a source tarball) the binary is built unstamped
	// and says "unknown" commit, rather than failing the build.
	stamp, err := VersionLDFlags(ctx, srcDir)
	if err != nil {
		stamp = ""
	}
	return buildAgent(ctx, srcDir, out, stamp, arch)
}

// BuildAgentAs is BuildAgentFor with the stamp given: the release build
// stamps the describe and commit it read once for all its files, so a
// commit made while it runs cannot split them.
func BuildAgentAs(ctx context.Context, srcDir, out, arch, describe, commit string) error {
	return buildAgent(ctx, srcDir, out, stampFlags(describe, commit), arch)
}

// FIPSModule is the GOFIPS140 setting of the agent's build: the alias of
// the Go Cryptographic Module version NIST certified, which the Go
// toolchain resolves from its own lib/fips140 (v1.0.0 in Go 1.24-1.26).
const FIPSModule = "certified"

func buildAgent(ctx context.Context, srcDir, out, stamp, arch string) error {
	a, err := LookupArch(arch)
	if err != nil {
		return err
	}
	ldflags := strings.TrimSpace("-s -w " + stamp)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ldflags, "-o", out, "./cmd/ironic-agent")
	cmd.Dir = srcDir
	// GOFIPS140: with fips=1 the agent runs the Go Cryptographic Module
	// version NIST certified (the toolchain's frozen copy, lib/fips140),
	// not the toolchain's newer, unvalidated one (docs/fips.md); the
	// agent's //go:debug fips140=off keeps FIPS mode to fips=1 boots.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+a.Name, "GOFIPS140="+FIPSModule)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ramdisk: GOARCH=%s GOFIPS140=%s go build ./cmd/ironic-agent in %s: %w: %s", a.Name, FIPSModule, srcDir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// VersionLDFlags returns the linker flags that stamp internal/version with
// `git describe --tags --always --dirty` and the commit of the git tree at
// srcDir. The go command's own VCS stamping is not enough: it is off with
// -buildvcs=false and records no tag.
func VersionLDFlags(ctx context.Context, srcDir string) (string, error) {
	git := func(args ...string) (string, error) { return Git(ctx, srcDir, args...) }
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

// Git runs git with args in the tree at dir and returns its output without
// the final newline; the error has the command, dir and git's complaint.
func Git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
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
	return ISOAt(ctx, kernel, initrd, cmdline, out, time.Time{})
}

// ISOAt is ISO with every date in the image set to epoch (zero: the
// build's time), so the same inputs give the same bytes. grub-mkrescue
// takes the ISO's date, which its GRUB images also carry as the volume
// UUID they search for, from the clock and does not read
// SOURCE_DATE_EPOCH: it runs under faketime(1) frozen at epoch. xorriso
// (the GPT GUIDs, the volume dates) and mformat (the EFI image's FAT
// serial) take SOURCE_DATE_EPOCH, and the files' dates are set to epoch.
func ISOAt(ctx context.Context, kernel, initrd, cmdline, out string, epoch time.Time) error {
	return isoAt(ctx, defaultISOPlatform(""), kernel, initrd, cmdline, out, epoch)
}

// defaultISOPlatform is the DefaultArch ISO's: the host's GRUB for BIOS,
// and for UEFI grub-mkrescue's GRUB or, with esp, that ESP.
func defaultISOPlatform(esp string) isoPlatform {
	return isoPlatform{console: "console=tty0 console=ttyS0,115200 ", terminal: pcSerialTerminal, needs: "needs grub-pc-bin, grub-efi-amd64-bin, xorriso, mtools", esp: esp}
}

// pcSerialTerminal has GRUB on a PC's first serial port (COM1, the
// kernel's ttyS0) beside the screen: SeaBIOS shows GRUB on the screen
// only. Another architecture's serial port is no COM1 (arm64 servers'
// PL011 is the kernel's ttyAMA0), and its UEFI firmware puts its console,
// GRUB's, on that port itself.
const pcSerialTerminal = `serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
`

// isoPlatform is what an ISO differs in per architecture.
type isoPlatform struct {
	// grubDir is GRUB's image and module directory for grub-mkrescue -d
	// ("": the host's platforms, i386-pc and x86_64-efi).
	grubDir string
	console string // the console parameters before the command line
	// terminal starts grub.cfg: GRUB's terminals ("": the firmware's
	// console only).
	terminal string
	needs    string // the host's packages, for the error
	// esp, when not "", is the ISO's UEFI El Torito image (see
	// SecureBootISO) instead of grub-mkrescue's unsigned GRUB.
	esp string
}

// isoGrubCfg is the ISO's boot/grub/grub.cfg: plat's terminals, and one
// entry booting the kernel and initramfs with plat's console parameters
// and cmdline.
func isoGrubCfg(plat isoPlatform, cmdline string) string {
	return plat.terminal + fmt.Sprintf(`set timeout=1
menuentry "ironic-agent" {
	linux /boot/%s %sboot_method=vmedia %s
	initrd /boot/%s
}
`, KernelName, plat.console, cmdline, InitramfsName)
}

func isoAt(ctx context.Context, plat isoPlatform, kernel, initrd, cmdline, out string, epoch time.Time) error {
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
	cfg := isoGrubCfg(plat, cmdline)
	if err := os.WriteFile(filepath.Join(stage, "boot/grub/grub.cfg"), []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	needs := plat.needs
	extra, xorriso, err := secureBootStage(stage, cfg, plat.esp)
	if err != nil {
		return err
	}
	if plat.grubDir != "" && len(extra) > 0 {
		return fmt.Errorf("ramdisk: ISO: a Secure Boot ESP with another architecture's GRUB (%s)", plat.grubDir)
	}
	args := []string{"-o", out}
	if plat.grubDir != "" {
		args = append(args, "-d", plat.grubDir)
	}
	args = append(append(args, extra...), stage)
	if !epoch.IsZero() {
		xorriso = append([]string{"-volume_date", "all_file_dates", "=" + strconv.FormatInt(epoch.Unix(), 10)}, xorriso...)
	}
	if len(xorriso) > 0 {
		args = append(append(args, "--"), xorriso...)
	}
	cmd := exec.CommandContext(ctx, "grub-mkrescue", args...)
	if !epoch.IsZero() {
		sec := strconv.FormatInt(epoch.Unix(), 10)
		cmd = exec.CommandContext(ctx, "faketime", append([]string{"-f", epoch.UTC().Format(time.DateTime), "grub-mkrescue"}, args...)...)
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+sec, "TZ=UTC")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if !epoch.IsZero() {
			return fmt.Errorf("ramdisk: build the ISO (%s, and faketime for fixed dates): %s: %w: %s", needs, strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return fmt.Errorf("ramdisk: build the ISO (%s): %s: %w: %s", needs, strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
