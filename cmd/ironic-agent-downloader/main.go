// Command ironic-agent-downloader is the entrypoint of the Metal3
// downloader image (cmd/mkdownloader builds it), installed there also as
// /usr/local/bin/get-resource.sh, the command Metal3's manifests name.
// It takes no arguments: the environment of Metal3's
// ironic-ipa-downloader says what to do (internal/downloader).
//
// Exit status: 0 when the files are in place (installed, or already
// there), 1 when they could not be installed, 2 for a bad environment or
// arguments.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ironic-go/ironic-agent/internal/downloader"
	"github.com/ironic-go/ironic-agent/internal/version"
)

func main() {
	os.Exit(run())
}

func run() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "version", "--version", "-version":
			fmt.Println(version.Version())
			return 0
		}
		fmt.Fprintf(os.Stderr, "ironic-agent-downloader: unexpected argument %q: it takes none; the environment (IPA_BASEURI, IPA_FLAVOR, IPA_BRANCH, IPA_ARCH, IPA_FILENAME, SHARED_DIR, CACHEURL) says what to install\n", os.Args[1])
		return 2
	}
	cfg, err := downloader.FromEnv(os.Getenv)
	if err != nil {
		log.Error("bad environment", "err", err)
		return 2
	}
	if err := cfg.ExportProxies(os.Setenv); err != nil {
		log.Error("setting the proxy variables", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("ironic-agent-downloader", "version", version.Version(), "images", cfg.ImagesDir(),
		"name", cfg.DestName, "file", cfg.Filename, "base_uri", cfg.BaseURI, "embedded", cfg.Embedded())
	res, err := downloader.Run(ctx, cfg, downloader.Options{Log: log})
	if err != nil {
		log.Error("install failed", "err", err)
		return 1
	}
	state := "already in place"
	if res.Installed {
		state = "installed"
	}
	log.Info(state, "kernel", cfg.ImagesDir()+"/"+cfg.DestName+".kernel", "initramfs", cfg.ImagesDir()+"/"+cfg.DestName+".initramfs",
		"dir", res.Dir, "source", res.Source)
	return 0
}
