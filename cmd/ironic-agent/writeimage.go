package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/agent/agenttls"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/image"
)

func runWriteImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("write-image", "[flags] URL DEVICE",
		"Download the image at URL (http, https, or a local path) and write it to DEVICE as a\n"+
			"whole-disk image, exactly as the agent's write_image step does: the format is found\n"+
			"by content (raw, qcow2, and gzip/zstd/xz/bzip2-compressed raw), every byte is hashed\n"+
			"while streaming and the digest compared before success, cut transfers resume, and\n"+
			"qcow2 is converted without staging. DEVICE must not be mounted or in use.\n"+
			"The last line says what was verified.", stderr)
	checksum := fs.String("checksum", "", "expected digest as ALGO:HEX (md5, sha256, sha512, ...) or a bare SHA-2 HEX; without it the sha256 is computed and printed, not verified")
	format := fs.String("format", "", "declared disk format (raw, qcow2); checked against the content as IPA checks disk_format")
	zeroed := fs.Bool("zeroed", false, "the device already reads as zeros (e.g. after a discard): skip zero runs instead of zeroing them")
	insecure := fs.Bool("insecure", false, "do not verify the image server's TLS certificate")
	cafile := fs.String("cafile", "", "CA bundle for the image server's certificate")
	timeout := fs.Duration("connection-timeout", image.DefaultConnectionTimeout, "give up on a connection, or resume a transfer, after this long without data")
	retries := fs.Int("retries", 3, "retries of a failed connection or cut transfer")
	quiet := fs.Bool("quiet", false, "no progress output")
	// Flags may come before, between or after URL and DEVICE.
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 2 {
		fs.Usage()
		return errUsage
	}
	url, device := pos[0], pos[1]
	sum := &image.Checksum{Algorithm: "sha256"}
	if *checksum != "" {
		c, err := image.ParseChecksum(*checksum)
		if err != nil {
			return fmt.Errorf("--checksum: %w", err)
		}
		sum = &c
	}
	tlsConf, err := agenttls.ClientOptions{Insecure: *insecure, CAFile: *cafile}.TLSConfig()
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := image.WriteOptions{
		Download: image.DownloadOptions{
			TLS: tlsConf, ConnectionTimeout: *timeout, Retries: *retries, RetryInterval: 2 * time.Second, Logger: logger,
		},
		MD5Enabled:       true,
		AllowLocalFiles:  true,
		PermittedFormats: []string{image.FormatRaw, image.FormatGPT, image.FormatQcow2, image.FormatISO},
		DeviceZeroed:     *zeroed,
		// The operator named the device; the Guard still refuses one that
		// is mounted, swap, or holds the running system.
		Guard:    blockdev.NewGuard([]string{device}),
		Checksum: sum,
		Logger:   logger,
	}
	if !*quiet {
		opts.Progress, opts.ProgressInterval = imageProgress(stderr)
	}
	info := &image.ImageInfo{ID: url, URLs: []string{url}, DiskFormat: *format}
	res, err := image.WriteImage(ctx, info, device, opts)
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if !*quiet {
		fmt.Fprintln(stderr, "where the time went:", res.Stages)
	}
	fmt.Fprintln(stdout, res.Summary())
	return nil
}

// imageProgress draws a bar on a terminal and prints a line every ten
// seconds otherwise (a serial console log should not fill with bars).
func imageProgress(w io.Writer) (func(image.WriteProgress), time.Duration) {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return func(p image.WriteProgress) {
		rate := 0.0
		if s := p.Elapsed.Seconds(); s > 0 {
			rate = float64(p.Received) / s / 1e6
		}
		pct := -1.0
		if p.Total > 0 {
			pct = 100 * float64(p.Received) / float64(p.Total)
		}
		if !tty {
			if pct >= 0 {
				fmt.Fprintf(w, "received %d of %d bytes (%.0f%%), %d written, %.0f MB/s\n", p.Received, p.Total, pct, p.Written, rate)
			} else {
				fmt.Fprintf(w, "received %d bytes, %d written, %.0f MB/s\n", p.Received, p.Written, rate)
			}
			return
		}
		bar := strings.Repeat(" ", 30)
		if pct >= 0 {
			n := int(pct * 30 / 100)
			bar = strings.Repeat("=", n) + strings.Repeat(" ", 30-n)
		}
		fmt.Fprintf(w, "\r[%s] %5.1f%% %8.1f MiB received %8.1f MiB written %6.0f MB/s", bar, max(pct, 0), float64(p.Received)/(1<<20), float64(p.Written)/(1<<20), rate)
		if p.Done {
			fmt.Fprintln(w)
		}
	}, progressInterval(tty)
}

func progressInterval(tty bool) time.Duration {
	if tty {
		return 200 * time.Millisecond
	}
	return 10 * time.Second
}
