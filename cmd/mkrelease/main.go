// Command mkrelease writes a release directory (`make release`): for the
// architecture built, ironic-agent-<version>-<arch>.kernel, .initramfs and
// .iso, and the ESP image (.esp: Debian's signed shim and GRUB, for
// Ironic's [conductor]bootloader), with a .sha256 beside each, the SPDX bill of materials
// (.spdx.json), IPA's published layout under dib/ (files/ipa-goagent-
// master.kernel and .initramfs, ipa-goagent-master.tar.gz, each with a
// .sha256), then SHA256SUMS over the whole directory. See
// docs/releases.md.
//
//	go run ./cmd/mkrelease -out build/release [-arch amd64,arm64] [-kernel trixie] [-sums=false]
//	go run ./cmd/mkrelease -sums-only build/release
//
// -arch names the architectures built (default amd64), each one's files
// under its own names in the same directory; any host builds any of
// them (the agent is cross-built, the rest is Debian's packages).
//
// -sums=false leaves SHA256SUMS out, for a step that adds files to the
// directory before -sums-only lists them (the Makefile's downloader
// image).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkrelease: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mkrelease", flag.ContinueOnError)
	out := fs.String("out", "build/release", "the release directory")
	arches := fs.String("arch", ramdisk.DefaultArch, "comma-separated architectures to build (amd64, arm64)")
	flavour := fs.String("kernel", ramdisk.DefaultKernelFlavour, "kernel flavour, the Debian release the kernel and firmware come from")
	cache := fs.String("cache", "", "download cache (default: $IRONIC_AGENT_CACHE or $XDG_CACHE_HOME/ironic-agent)")
	sums := fs.Bool("sums", true, "write SHA256SUMS once the files are in place")
	sumsOnly := fs.String("sums-only", "", "only write `DIR`/SHA256SUMS over the files there")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *sumsOnly != "" {
		return release.WriteSums(*sumsOnly)
	}
	var archList []string
	for a := range strings.SplitSeq(*arches, ",") {
		a = strings.TrimSpace(a)
		if _, err := ramdisk.LookupArch(a); err != nil || a == "" {
			return fmt.Errorf("-arch %q: %q is not one of the architectures (amd64, arm64)", *arches, a)
		}
		if slices.Contains(archList, a) {
			return fmt.Errorf("-arch %q: %s named twice", *arches, a)
		}
		archList = append(archList, a)
	}
	if *cache == "" {
		c, err := cachedir.Dir()
		if err != nil {
			return err
		}
		*cache = c
	}
	fl, err := ramdisk.LookupKernelFlavour(*flavour)
	if err != nil {
		return err
	}
	start := time.Now()
	src, err := release.ReadSource(ctx, ".")
	if err != nil {
		return err
	}
	if strings.HasSuffix(src.Commit, "-dirty") {
		fmt.Fprintf(os.Stderr, "mkrelease: warning: the tree has uncommitted changes; the release says %s, and another tree with the same commit builds other bytes\n", src.Commit)
	}
	for _, a := range archList {
		fa := fl
		fa.Arch = a
		opts := release.Options{SrcDir: ".", OutDir: *out, CacheDir: *cache, Flavour: fa, Arch: a, Log: os.Stdout}
		if err := release.Build(ctx, opts, src); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	if *sums {
		if err := release.WriteSums(*out); err != nil {
			return err
		}
	}
	fmt.Printf("release %s (commit %s, dated %s) in %s, built in %.1fs\n", src.Version, src.Commit, src.Epoch.Format(time.RFC3339), *out, time.Since(start).Seconds())
	return nil
}
