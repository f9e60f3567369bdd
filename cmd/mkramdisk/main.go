// Command mkramdisk builds the agent ramdisk: a Debian kernel (fetched from
// a Debian mirror, verified against the archive's signature, and cached),
// an initramfs whose /init is a static
// ironic-agent plus the kernel modules the hardware needs, and optionally a
// bootable ISO for virtual media. It needs no root.
//
//	go run ./cmd/mkramdisk -out build/ramdisk [-arch amd64|arm64] [-iso] [-kernel bookworm|trixie|newest] [-kernel-package linux-image-...] [-mirror URL] [-security-mirror URL]
//
// -arch arm64 builds an arm64 ramdisk on any host: the agent cross-built
// with GOARCH, Debian's arm64 kernel, firmware and programs.
//
// With -cached the ramdisk goes into the shared content-keyed cache
// (ramdisk.BuildCached) instead of -out, and -json prints where: the VM
// tests build their ramdisks this way, outside their race-instrumented
// test binaries, where packing the initramfs takes minutes instead of
// seconds.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
	"github.com/ironic-go/ironic-agent/internal/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkramdisk: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mkramdisk", flag.ContinueOnError)
	out := fs.String("out", "build/ramdisk", "output directory")
	flavour := fs.String("kernel", ramdisk.DefaultKernelFlavour, "kernel flavour, the Debian release the kernel and firmware come from: "+flavourNames())
	arch := fs.String("arch", ramdisk.DefaultArch, "architecture the ramdisk is for: "+archNames()+" (the agent is cross-built; the kernel, firmware and programs are Debian's for it)")
	pkg := fs.String("kernel-package", "", "Debian kernel package of the flavour's suites (default: the one their linux-image-<arch> depends on)")
	mirror := fs.String("mirror", "", "Debian archive `URL` the packages come from (default: the host's Debian mirror in /etc/apt, else Debian's own)")
	secMirror := fs.String("security-mirror", "", "Debian security archive `URL` the -security suites come from (default: the host's, else Debian's own)")
	ignoreValidUntil := fs.Bool("ignore-valid-until", false, "take suites whose InRelease has expired (Valid-Until), for a frozen mirror such as a snapshot (also when the host's apt sets Acquire::Check-Valid-Until \"false\")")
	cache := fs.String("cache", "", "download cache (default: $IRONIC_AGENT_CACHE or $XDG_CACHE_HOME/ironic-agent)")
	agent := fs.String("agent", "", "prebuilt static ironic-agent binary (default: build ./cmd/ironic-agent)")
	mods := fs.String("modules", "", "comma-separated kernel modules, replacing the manifest (its subtrees too)")
	add := fs.String("add-modules", "", "comma-separated kernel modules added to the list")
	iso := fs.Bool("iso", false, "also build "+ramdisk.ESPName+" (Debian's signed shim and GRUB, for Ironic's [conductor]bootloader) and "+ramdisk.ISOName+" booting through it under UEFI (Secure Boot) and through grub-mkrescue's GRUB under BIOS")
	cmdline := fs.String("cmdline", "", "kernel parameters for the ISO's boot entry (e.g. ipa-api-url=...)")
	cached := fs.Bool("cached", false, "build into the shared content-keyed cache below -cache instead of -out (needs -agent)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	firmware := fs.Bool("firmware", true, "add the firmware files the modules name, from Debian's firmware packages (main and non-free-firmware)")
	budget := -1 // the kernel flavour's
	fs.Func("budget", "fail when the kernel and the initramfs, without the -file extras, weigh more than `MiB` (0: no limit, for a test's own guest program; default: the kernel flavour's, "+budgetNames()+")", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("want a whole number of MiB, 0 or more, got %q", v)
		}
		budget = n
		return nil
	})
	progs := fs.Bool("programs", true, "add the programs the agent runs (internal/programs), with their libraries, from Debian's packages")
	files := map[string]string{}
	fs.Func("file", "extra file for the initramfs, `DST=SRC` (archive path = host path; repeatable)", func(v string) error {
		dst, src, ok := strings.Cut(v, "=")
		if !ok || dst == "" || src == "" {
			return fmt.Errorf("want DST=SRC, got %q", v)
		}
		files[dst] = src
		return nil
	})
	var keys []string
	fs.Func("cache-key", "more `text` for the -cached entry's key (repeatable)", func(v string) error {
		keys = append(keys, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *cached && (*agent == "" || *iso) {
		return fmt.Errorf("-cached needs -agent and cannot make an ISO")
	}
	start := time.Now()
	if *cache == "" {
		c, err := cachedir.Dir()
		if err != nil {
			return err
		}
		*cache = c
	}
	a, err := ramdisk.LookupArch(*arch)
	if err != nil {
		return err
	}
	fl, err := ramdisk.LookupKernelFlavour(*flavour)
	if err != nil {
		return err
	}
	fl.Arch = a.Name
	if budget < 0 {
		budget = int(fl.Budget >> 20)
	}
	if fl.Mirrors, err = ramdisk.ResolveMirrors(debian.Mirrors{Archive: *mirror, Security: *secMirror, IgnoreValidUntil: *ignoreValidUntil}); err != nil {
		return err
	}
	opts, err := ramdisk.FetchInputs(ctx, *cache, ramdisk.Inputs{Flavour: fl, KernelPackage: *pkg, Firmware: *firmware, Programs: *progs})
	if err != nil {
		return err
	}
	k := opts.Kernel
	if *agent == "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		*agent = filepath.Join(*out, "ironic-agent")
		if err := ramdisk.BuildAgentFor(ctx, ".", *agent, a.Name); err != nil {
			return err
		}
		// The agent is this tree's: the initramfs says which, as a
		// release's does.
		src, err := release.ReadSource(ctx, ".")
		if err != nil {
			fmt.Fprintf(os.Stderr, "mkramdisk: no /%s in the initramfs: %v\n", ramdisk.ReleasePath, err)
		} else {
			opts.Release = src.ReleaseFile(opts.Kernel)
		}
	}
	opts.Agent, opts.AddModules, opts.Files = *agent, split(*add), files
	if *mods != "" {
		opts.Modules = split(*mods)
	}
	var res *ramdisk.Result
	if *cached {
		res, err = ramdisk.BuildCached(ctx, opts, *cache, keys...)
	} else {
		res, err = ramdisk.Build(ctx, opts, *out)
		if res != nil {
			res.Agent = *agent
		}
	}
	if err != nil {
		return err
	}
	ks, is := size(res.Kernel), size(res.Initramfs)
	if *asJSON {
		if err := ramdisk.CheckBudget(ks, is, res.Report.Sizes, int64(budget)<<20); err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(struct {
			*ramdisk.Result
			Arch, KernelFlavour, KernelPackage, KernelVersion string
			KernelImage                                       string // the bzImage in the download cache, beside which ramdisk.PVH keeps its vmlinux
		}{res, a.Name, k.Flavour, k.Package, k.Version, k.Vmlinuz})
	}
	as := size(res.Agent)
	fmt.Printf("kernel     %s (%s %s: %s, %s)\n", res.Kernel, k.Flavour, a.Name, k.Package, mib(ks))
	fmt.Printf("initramfs  %s (%s; %s unpacked; %d modules)\n", res.Initramfs, mib(is), mib(res.Uncompressed), len(res.Modules))
	fmt.Printf("agent      %s (%s)\n", res.Agent, mib(as))
	fmt.Printf("kernel + initramfs: %s (budget %d MiB)\n", mib(ks+is), budget)
	printReport(os.Stdout, res.Report, a.KernelKind, ks)
	if err := ramdisk.CheckBudget(ks, is, res.Report.Sizes, int64(budget)<<20); err != nil {
		return err
	}
	if *iso {
		p := filepath.Join(*out, ramdisk.ISOName)
		var isoErr error
		if a.Name == ramdisk.DefaultArch {
			// Debian's signed shim and GRUB: the ISO boots under Secure Boot.
			bc, err := ramdisk.FetchBootChain(ctx, *cache, fl)
			if err != nil {
				return err
			}
			esp := filepath.Join(*out, ramdisk.ESPName)
			if err := ramdisk.ESP(ctx, bc, esp, time.Time{}); err != nil {
				return err
			}
			fmt.Printf("esp        %s (%s: %s %s, %s %s)\n", esp, mib(size(esp)), bc.Packages[0].Name, bc.Packages[0].Version, bc.Packages[1].Name, bc.Packages[1].Version)
			isoErr = ramdisk.SecureBootISO(ctx, res.Kernel, res.Initramfs, *cmdline, esp, p, time.Time{})
		} else {
			grub, gerr := ramdisk.GRUBDir(ctx, *cache, fl)
			if gerr != nil {
				return gerr
			}
			isoErr = ramdisk.ISOForArch(ctx, a.Name, grub, res.Kernel, res.Initramfs, *cmdline, p, time.Time{})
		}
		if isoErr != nil {
			return isoErr
		}
		fmt.Printf("iso        %s (%s)\n", p, mib(size(p)))
	}
	fmt.Printf("built in %.1fs\n", time.Since(start).Seconds())
	return nil
}

// printReport says what the initramfs holds and what each piece costs,
// and what the build could not put in.
func printReport(w io.Writer, r ramdisk.Report, kernelKind string, kernelSize int64) {
	fmt.Fprintf(w, "\nsize breakdown (gzip: what the piece adds to the compressed initramfs):\n")
	fmt.Fprintf(w, "  %-44s %5s %10s %10s\n", "piece", "files", "unpacked", "gzip")
	fmt.Fprintf(w, "  %-44s %5d %10s %10s\n", "kernel ("+kernelKind+")", 1, "", mib(kernelSize))
	for _, s := range r.Sizes {
		fmt.Fprintf(w, "  %-44s %5d %10s %10s\n", s.Item, s.Files, mib(s.Bytes), mib(s.Gzip))
	}
	for _, x := range r.Excluded {
		fmt.Fprintf(w, "excluded: %-40s %4d modules of this kernel (%s)\n", x.Pattern, x.Modules, x.Reason)
	}
	if len(r.Builtin) > 0 {
		fmt.Fprintf(w, "built into the kernel (nothing to load): %s\n", strings.Join(r.Builtin, ", "))
	}
	for _, a := range r.Absent {
		fmt.Fprintf(w, "not in this kernel (optional): %s\n", a)
	}
	fmt.Fprintf(w, "firmware files: %d\n", len(r.Firmware))
	for _, u := range r.FirmwareIndexUnverified {
		fmt.Fprintf(w, "firmware index: left out of the check that firmware-packages.txt lists every package (the firmware itself comes from verified packages): %s\n", u)
	}
	if len(r.FirmwareMissing) > 0 {
		fmt.Fprintf(w, "firmware named by a module that no Debian package ships: %d\n", len(r.FirmwareMissing))
		var mods []string
		byMod := map[string][]string{}
		for _, m := range r.FirmwareMissing {
			if _, ok := byMod[m.Module]; !ok {
				mods = append(mods, m.Module)
			}
			byMod[m.Module] = append(byMod[m.Module], m.Name)
		}
		for _, m := range mods {
			fmt.Fprintf(w, "  %s: %s\n", m, strings.Join(byMod[m], " "))
		}
	}
}

// budgetNames lists the flavours' budgets for -budget's help.
func budgetNames() string {
	var names []string
	for _, f := range ramdisk.KernelFlavours() {
		names = append(names, fmt.Sprintf("%s %d MiB", f.Name, f.Budget>>20))
	}
	return strings.Join(names, ", ")
}

// archNames lists the architectures for -arch's help.
func archNames() string {
	var names []string
	for _, a := range ramdisk.Arches() {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// flavourNames lists the kernel flavours for -kernel's help.
func flavourNames() string {
	var names []string
	for _, f := range ramdisk.KernelFlavours() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func size(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
