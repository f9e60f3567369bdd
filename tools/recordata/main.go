// Command recordata records the SG_IO replies of deploy/ata/testdata/qemu.
// It boots qemu.DefaultMachine with ataguest as /init, so deploy/ata's
// own SG_IO path sends IDENTIFY DEVICE and two security commands to QEMU's
// emulated SATA disks (ide-hd on the q35 AHCI, through libata's SAT
// layer), and receives the bytes through the VM's guestfwd relay.
//
// QEMU's disks do not implement the ATA Security feature set: IDENTIFY
// word 128 is 0 and the security commands are aborted, which is what the
// recording keeps (the replies of a real drive in each security state are
// made by the tests from these bytes).
//
// Run from the repository root, as root, with qemu-system-x86_64:
//
//	go run ./tools/recordata -out deploy/ata/testdata/qemu
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

func main() {
	qemu.MaybeRelay()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "recordata: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	out := flag.String("out", filepath.Join("deploy", "ata", "testdata", "qemu"), "output directory")
	timeout := flag.Duration("timeout", 15*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	work, err := os.MkdirTemp("", "recordata-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	rd, err := qemu.BuildGuestRamdisk(ctx, "./internal/testbed/guest/ata", nil)
	if err != nil {
		return err
	}
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Dir = filepath.Join(work, "vm")
	m.Kernel, m.Initrd = rd.Kernel, rd.Initrd
	_, tgz, err := qemu.RunUpload(ctx, m, "record", "/run/ata", qemu.Options{Echo: func(l qemu.Line) { fmt.Printf("%8.3f %s\n", l.At.Seconds(), l.Text) }})
	if err != nil {
		return err
	}
	got := filepath.Join(work, "got")
	if err := qemu.ExtractTarGz(bytes.NewReader(tgz), got); err != nil {
		return err
	}
	return writeOutputs(got, *out)
}

// writeOutputs names each disk's files after its model ("LAB SATA HDD" ->
// lab-sata-hdd), since the kernel's sdX names follow the probe order.
func writeOutputs(got, out string) error {
	models, err := filepath.Glob(filepath.Join(got, "sd*.model"))
	if err != nil || len(models) == 0 {
		return fmt.Errorf("no disk in the upload (%v)", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, mp := range models {
		base := strings.TrimSuffix(mp, ".model")
		model, err := os.ReadFile(mp)
		if err != nil {
			return err
		}
		slug := strings.ToLower(strings.Join(strings.Fields(string(model)), "-"))
		for _, suffix := range []string{".identify", ".identify.sense", ".identify.json", ".erase-prepare.sense", ".erase-prepare.json", ".unlock.sense", ".unlock.json"} {
			b, err := os.ReadFile(base + suffix)
			if err != nil {
				return err
			}
			fmt.Println("writing", filepath.Join(out, slug+suffix))
			if err := os.WriteFile(filepath.Join(out, slug+suffix), b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
