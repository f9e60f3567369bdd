// Package release writes a release directory (`make release`): the
// ramdisk's kernel, initramfs and ISO under versioned names, a .sha256
// beside each, the SPDX bill of materials, the copies in IPA's published
// layout under dib/, and SHA256SUMS, reproducibly: the same commit, Go
// toolchain and Debian package versions give the same bytes.
package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/version"
)

// Options describe one release build.
type Options struct {
	SrcDir   string // the repository root
	OutDir   string // the release directory
	CacheDir string // the ramdisk build's package cache
	Flavour  ramdisk.KernelFlavour
	// Arch is the architecture built (ramdisk.Arches); Flavour.Arch
	// must name the same.
	Arch string
	// Log receives the build's progress lines (nil: none).
	Log io.Writer
}

// Source is what the release is built from, read from the tree.
type Source struct {
	Version string // the VERSION file
	Commit  string // HEAD, "-dirty" appended for a modified tree
	// Describe is `git describe --tags --always --dirty`.
	Describe string
	Epoch    time.Time // SOURCE_DATE_EPOCH, else the commit's time
}

// Flavour and Branch name the IPA-layout copies
// (dib/ipa-<flavour>-<branch>.*): the flavour says it is this agent,
// not one of IPA's distributions; the branch is master because one agent
// serves every Ironic series.
const Branch = "master"

// Flavour is the IPA-layout flavour of arch: "goagent" for amd64,
// "goagent-<arch>" for the others (as IPA's debian-arm64).
func Flavour(arch string) string {
	if arch == "amd64" {
		return "goagent"
	}
	return "goagent-" + arch
}

// Names of one architecture's files in the release directory.
func Names(version, arch string) (kernel, initramfs, iso, sbom string) {
	base := "ironic-agent-" + version + "-" + arch
	return base + ".kernel", base + ".initramfs", base + ".iso", base + ".spdx.json"
}

// ESPName is the name of one architecture's ESP image in the release
// directory.
func ESPName(version, arch string) string {
	return "ironic-agent-" + version + "-" + arch + ".esp"
}

var plainVersion = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

// ReadSource reads the version, the commit and the date of the tree at
// srcDir. SOURCE_DATE_EPOCH, when set, overrides the commit's time.
func ReadSource(ctx context.Context, srcDir string) (Source, error) {
	var s Source
	b, err := os.ReadFile(filepath.Join(srcDir, "VERSION"))
	if err != nil {
		return s, fmt.Errorf("release: %w", err)
	}
	s.Version = strings.TrimSpace(string(b))
	if !plainVersion.MatchString(s.Version) {
		return s, fmt.Errorf("release: %s: %q is not MAJOR.MINOR.PATCH, the form Ironic keeps as agent_version", filepath.Join(srcDir, "VERSION"), s.Version)
	}
	git := func(args ...string) (string, error) {
		out, err := ramdisk.Git(ctx, srcDir, args...)
		if err != nil {
			return "", fmt.Errorf("release: %w", err)
		}
		return out, nil
	}
	if s.Commit, err = git("rev-parse", "HEAD"); err != nil {
		return s, err
	}
	if s.Describe, err = git("describe", "--tags", "--always", "--dirty"); err != nil {
		return s, err
	}
	if strings.HasSuffix(s.Describe, "-dirty") {
		s.Commit += "-dirty"
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct", "HEAD"); err != nil {
			return s, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || sec <= 0 {
		return s, fmt.Errorf("release: SOURCE_DATE_EPOCH %q is not a positive number of seconds", epoch)
	}
	s.Epoch = time.Unix(sec, 0).UTC()
	return s, nil
}

// ReleaseFile is the content of the initramfs's ramdisk.ReleasePath for
// an agent built from src and kernel k.
func (s Source) ReleaseFile(k *ramdisk.Kernel) []byte {
	return ramdisk.ReleaseInfo{Version: s.Version, Build: version.BuildOf(s.Version, s.Describe, s.Commit),
		Commit: s.Commit, Date: s.Epoch, Kernel: k}.Format()
}

// Build writes the release of src for opts.Arch into opts.OutDir, all
// but SHA256SUMS (WriteSums, once every file is there). Everything is
// built in a hidden directory beside OutDir first; a file OutDir already
// holds with other bytes fails the build, naming it, before anything is
// moved (the same bytes are fine: a rebuild is idempotent). A stale
// SHA256SUMS is removed before the files move in, so the directory never
// has a list that does not cover it.
func Build(ctx context.Context, opts Options, src Source) error {
	logf := func(format string, a ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, format+"\n", a...)
		}
	}
	if _, err := ramdisk.LookupArch(opts.Arch); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if opts.Flavour.Arch != opts.Arch && (opts.Flavour.Arch != "" || opts.Arch != ramdisk.DefaultArch) {
		return fmt.Errorf("release: architecture %s, but the kernel flavour's is %q", opts.Arch, opts.Flavour.Arch)
	}
	if opts.Flavour.Budget <= 0 {
		return fmt.Errorf("release: kernel flavour %q has no size budget (take it from ramdisk.LookupKernelFlavour)", opts.Flavour.Name)
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	stage, err := os.MkdirTemp(opts.OutDir, ".staging-")
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer os.RemoveAll(stage)
	work := filepath.Join(stage, ".work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}

	t := time.Now()
	agent := filepath.Join(work, "ironic-agent")
	if err := ramdisk.BuildAgentAs(ctx, opts.SrcDir, agent, opts.Arch, src.Describe, strings.TrimSuffix(src.Commit, "-dirty")); err != nil {
		return err
	}
	logf("agent built in %.1fs", time.Since(t).Seconds())
	t = time.Now()
	in, err := ramdisk.FetchInputs(ctx, opts.CacheDir, ramdisk.Inputs{Flavour: opts.Flavour, Firmware: true, Programs: true})
	if err != nil {
		return err
	}
	// A release is checked in full: every suite's firmware index verified.
	if len(in.FirmwareIndexUnverified) > 0 {
		return fmt.Errorf("release: the firmware index of a suite does not verify (retry once the mirror has synced): %s", strings.Join(in.FirmwareIndexUnverified, "; "))
	}
	in.Agent = agent
	in.Release = src.ReleaseFile(in.Kernel)
	res, err := ramdisk.Build(ctx, in, filepath.Join(work, "ramdisk"))
	if err != nil {
		return err
	}
	if err := ramdisk.CheckBudget(size(res.Kernel), size(res.Initramfs), res.Sizes, opts.Flavour.Budget); err != nil {
		return err
	}
	logf("ramdisk built in %.1fs (kernel %s %s)", time.Since(t).Seconds(), in.Kernel.Flavour, in.Kernel.Package)

	kernel, initramfs, iso, sbom := Names(src.Version, opts.Arch)
	if err := os.Rename(res.Kernel, filepath.Join(stage, kernel)); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if err := os.Rename(res.Initramfs, filepath.Join(stage, initramfs)); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	t = time.Now()
	// The ESP of Debian's signed shim and GRUB, for Ironic's
	// [conductor]bootloader and the ISO's UEFI entry (amd64; the arm64
	// ISO boots the host's GRUB for arm64, unsigned).
	var esp, espPath string
	var bootChain []ramdisk.FirmwarePackage
	if opts.Arch == ramdisk.DefaultArch {
		bc, err := ramdisk.FetchBootChain(ctx, opts.CacheDir, opts.Flavour)
		if err != nil {
			return err
		}
		esp = ESPName(src.Version, opts.Arch)
		espPath = filepath.Join(stage, esp)
		if err := ramdisk.ESP(ctx, bc, espPath, src.Epoch); err != nil {
			return err
		}
		if err := ramdisk.SecureBootISO(ctx, filepath.Join(stage, kernel), filepath.Join(stage, initramfs), "", espPath, filepath.Join(stage, iso), src.Epoch); err != nil {
			return err
		}
		bootChain = bc.Packages
		logf("ESP and ISO built in %.1fs (%s %s, %s %s)", time.Since(t).Seconds(), bc.Packages[0].Name, bc.Packages[0].Version, bc.Packages[1].Name, bc.Packages[1].Version)
	} else {
		grub, err := ramdisk.GRUBDir(ctx, opts.CacheDir, opts.Flavour)
		if err != nil {
			return err
		}
		if err := ramdisk.ISOForArch(ctx, opts.Arch, grub, filepath.Join(stage, kernel), filepath.Join(stage, initramfs), "", filepath.Join(stage, iso), src.Epoch); err != nil {
			return err
		}
		logf("ISO built in %.1fs", time.Since(t).Seconds())
	}

	ns, err := namespace(src, opts.Arch, filepath.Join(stage, initramfs))
	if err != nil {
		return err
	}
	doc, err := SBOM(SBOMInput{
		Name: strings.TrimSuffix(sbom, ".spdx.json"), Version: src.Version, Commit: src.Commit, Created: src.Epoch,
		Namespace: ns, Agent: agent, Kernel: in.Kernel, Firmware: in.Firmware, Programs: in.Programs, Report: res.Report,
		ESP: espPath, BootChain: bootChain,
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage, sbom), doc, 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}

	// IPA's layout: dib/files/ipa-<flavour>-<branch>.{kernel,initramfs}
	// and dib/ipa-<flavour>-<branch>.tar.gz holding the pair.
	ipa := "ipa-" + Flavour(opts.Arch) + "-" + Branch
	files := filepath.Join(stage, "dib", "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	dibKernel, dibInitramfs := filepath.Join(files, ipa+".kernel"), filepath.Join(files, ipa+".initramfs")
	if err := copyFile(filepath.Join(stage, kernel), dibKernel); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(stage, initramfs), dibInitramfs); err != nil {
		return err
	}
	tgz := filepath.Join(stage, "dib", ipa+".tar.gz")
	if err := WriteTarGz(tgz, []TarFile{{ipa + ".kernel", dibKernel}, {ipa + ".initramfs", dibInitramfs}}, src.Epoch); err != nil {
		return err
	}
	for _, p := range []string{kernel, initramfs, iso, esp} {
		if p == "" {
			continue
		}
		if err := WriteSidecar(filepath.Join(stage, p)); err != nil {
			return err
		}
	}
	for _, p := range []string{dibKernel, dibInitramfs, tgz} {
		if err := WriteSidecar(p); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(work); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	// Files get the commit's date too: a mirror that copies dates
	// serves the same listing from every build.
	if err := publish(stage, opts.OutDir, src.Epoch); err != nil {
		return err
	}
	return nil
}

// namespace is the SPDX document's unique URI: the release's name and
// the digest of the initramfs it describes, so two different builds never
// share one and the same build always has it.
func namespace(src Source, arch, initramfs string) (string, error) {
	sum, err := cachedir.FileSHA256(initramfs)
	if err != nil {
		return "", err
	}
	return "https://github.com/ironic-go/ironic-agent/spdx/ironic-agent-" + src.Version + "-" + arch + "-" + sum, nil
}

// publish moves the files of stage (but hidden ones) into out: first
// every one is compared with what out holds under its name (other bytes:
// an error naming the file; the same: kept), then SHA256SUMS is removed
// and the new files are renamed in, each whole.
func publish(stage, out string, mtime time.Time) error {
	var rels []string
	err := filepath.WalkDir(stage, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != stage && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(stage, p)
			if err != nil {
				return err
			}
			rels = append(rels, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	slices.Sort(rels)
	var move []string
	for _, rel := range rels {
		same, err := sameBytes(filepath.Join(stage, rel), filepath.Join(out, rel))
		if err != nil {
			return err
		}
		if same == nil {
			move = append(move, rel)
		} else if !*same {
			return fmt.Errorf("release: %s already holds other bytes for this version: a release is never overwritten; move it away (or build another version) and run again", filepath.Join(out, rel))
		}
	}
	if err := os.Remove(filepath.Join(out, SumsName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release: %w", err)
	}
	for _, rel := range move {
		src, dst := filepath.Join(stage, rel), filepath.Join(out, rel)
		if err := os.Chtimes(src, mtime, mtime); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if err := os.Rename(src, dst); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	return nil
}

// sameBytes compares a and b: nil when b does not exist.
func sameBytes(a, b string) (*bool, error) {
	if _, err := os.Lstat(b); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	sa, err := cachedir.FileSHA256(a)
	if err != nil {
		return nil, err
	}
	sb, err := cachedir.FileSHA256(b)
	if err != nil {
		return nil, err
	}
	same := sa == sb
	return &same, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("release: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

func size(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}
