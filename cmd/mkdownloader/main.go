// Command mkdownloader builds the Metal3 downloader image from a release
// directory (`make release`'s output) into an OCI image layout archive:
//
//	go run ./cmd/mkdownloader -release build/release -out build/release/ironic-agent-0.2.0-downloader.oci.tar
//
// The entrypoint is ./cmd/ironic-agent-downloader, built static for -arch
// (or -entrypoint, a binary built before). Every time in the archive is
// SOURCE_DATE_EPOCH, else the commit time of the tree's HEAD, so two
// builds from the same commit and release are byte-identical. Load it with
// `skopeo copy oci-archive:FILE docker://REGISTRY/NAME:TAG` or
// `podman load -i FILE`.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/downloaderimage"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mkdownloader:", err)
		os.Exit(1)
	}
}

func run() error {
	release := flag.String("release", "", "the release directory (ironic-agent-<version>-<arch>.kernel, .initramfs, dib/files/...)")
	out := flag.String("out", "", "the archive to write (ironic-agent-<version>-downloader.oci.tar)")
	version := flag.String("version", "", "the release version (default: from the release's file names)")
	arch := flag.String("arch", "amd64", "the image's platform and the entrypoint's GOARCH: amd64 or arm64")
	entry := flag.String("entrypoint", "", "a static ironic-agent-downloader built for -arch (default: build ./cmd/ironic-agent-downloader)")
	source := flag.String("source", downloaderimage.DefaultSource, "the org.opencontainers.image.source label")
	revision := flag.String("revision", "", "the org.opencontainers.image.revision label (default: the tree's commit, when in git)")
	flag.Parse()
	if *release == "" || *out == "" || flag.NArg() > 0 {
		flag.Usage()
		return errors.New("-release and -out are required, and nothing else")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	created, err := epoch(ctx)
	if err != nil {
		return err
	}
	if *revision == "" {
		*revision, _ = git(ctx, "rev-parse", "HEAD")
	}
	rel, err := downloaderimage.ReadRelease(*release, *version)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "mkdownloader-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if *entry == "" {
		*entry = filepath.Join(work, "ironic-agent-downloader")
		if err := buildEntrypoint(ctx, *arch, *entry); err != nil {
			return err
		}
	}

	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	digest, err := downloaderimage.Build(downloaderimage.Options{
		Release: rel, Entrypoint: *entry, Arch: *arch, Created: created, Source: *source, Revision: *revision,
	}, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("building %s: %w", *out, err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	var names []string
	for _, fl := range rel.Files {
		names = append(names, fl.Name)
	}
	fmt.Printf("%s: %s:%s (%s), manifest %s, embeds %s\n", *out, downloaderimage.RefName, rel.Version, *arch, digest, strings.Join(names, " "))
	return nil
}

// epoch is SOURCE_DATE_EPOCH, else the commit time of HEAD.
func epoch(ctx context.Context) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a count of seconds since 1970", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	s, err := git(ctx, "log", "-1", "--format=%ct")
	if err != nil {
		return time.Time{}, fmt.Errorf("no SOURCE_DATE_EPOCH and no git commit to take the time from: %w", err)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("git log -1 --format=%%ct said %q", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// buildEntrypoint builds the static entrypoint with the same version stamp
// as the agent (ramdisk.VersionLDFlags).
func buildEntrypoint(ctx context.Context, arch, out string) error {
	ldflags := "-s -w"
	if stamp, err := ramdisk.VersionLDFlags(ctx, "."); err == nil {
		ldflags += " " + stamp
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ldflags, "-o", out, "./cmd/ironic-agent-downloader")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/ironic-agent-downloader (GOARCH=%s): %w: %s", arch, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(b)), nil
}
