// Command mkramdisk builds the agent ramdisk: a Debian kernel (fetched with
// apt-get download and cached), an initramfs whose /init is a static
// ironic-agent plus the kernel modules the hardware needs, and optionally a
// bootable ISO for virtual media. It needs no root.
//
//	go run ./cmd/mkramdisk -out build/ramdisk [-iso] [-kernel-package linux-image-...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk"
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
	pkg := fs.String("kernel-package", "", "Debian kernel package (default: the one linux-image-amd64 depends on)")
	cache := fs.String("cache", "", "download cache (default: $IRONIC_AGENT_CACHE or $XDG_CACHE_HOME/ironic-agent)")
	agent := fs.String("agent", "", "prebuilt static ironic-agent binary (default: build ./cmd/ironic-agent)")
	mods := fs.String("modules", "", "comma-separated kernel modules, replacing the default list")
	add := fs.String("add-modules", "", "comma-separated kernel modules added to the list")
	iso := fs.Bool("iso", false, "also build "+ramdisk.ISOName+" with grub-mkrescue")
	cmdline := fs.String("cmdline", "", "kernel parameters for the ISO's boot entry (e.g. ipa-api-url=...)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	start := time.Now()
	if *cache == "" {
		c, err := ramdisk.CacheDir()
		if err != nil {
			return err
		}
		*cache = c
	}
	k, err := ramdisk.FetchKernel(ctx, *cache, *pkg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if *agent == "" {
		*agent = filepath.Join(*out, "ironic-agent")
		if err := ramdisk.BuildAgent(ctx, ".", *agent); err != nil {
			return err
		}
	}
	var names []string
	if *mods != "" {
		names = split(*mods)
	} else {
		names = ramdisk.DefaultModules()
	}
	names = append(names, split(*add)...)
	res, err := ramdisk.Build(ctx, ramdisk.Options{Kernel: k, Agent: *agent, Modules: names}, *out)
	if err != nil {
		return err
	}
	ks, is, as := size(res.Kernel), size(res.Initramfs), size(*agent)
	fmt.Printf("kernel     %s (%s, %s)\n", res.Kernel, k.Package, mib(ks))
	fmt.Printf("initramfs  %s (%s; %s unpacked; %d modules)\n", res.Initramfs, mib(is), mib(res.Uncompressed), len(res.Modules))
	fmt.Printf("agent      %s (%s)\n", *agent, mib(as))
	fmt.Printf("kernel + initramfs: %s\n", mib(ks+is))
	if *iso {
		p := filepath.Join(*out, ramdisk.ISOName)
		if err := ramdisk.ISO(ctx, res.Kernel, res.Initramfs, *cmdline, p); err != nil {
			return err
		}
		fmt.Printf("iso        %s (%s)\n", p, mib(size(p)))
	}
	fmt.Printf("built in %.1fs\n", time.Since(start).Seconds())
	return nil
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
