// Command recordhdparm records the `hdparm -I` outputs of
// deploy/erase/testdata/hdparm. It boots vmtest.DefaultMachine with hdparmguest
// as /init and Debian's hdparm in the ramdisk, so hdparm reads the IDENTIFY
// DEVICE data of QEMU's emulated SATA disks (ide-hd on the q35 AHCI), and
// receives what hdparm printed through the VM's guestfwd relay.
//
// QEMU's disks do not implement the ATA Security feature set, so only the
// "not supported" state can be read from them as they are. The other
// security states are made from the same IDENTIFY data with the security
// words set as a drive in that state reports them (ATA8-ACS words 82, 85,
// 89, 90, 92 and 128, and the integrity word 255), and rendered by the same
// hdparm (`hdparm --Istdin`): the layout the parser reads is hdparm's own.
//
// Run from the repository root, as root, with qemu-system-x86_64 and hdparm:
//
//	go run ./internal/vmtest/recordhdparm -out deploy/erase/testdata/hdparm
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/internal/vmtest"
)

func main() {
	vmtest.MaybeRelay()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "recordhdparm: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	out := flag.String("out", filepath.Join("deploy", "erase", "testdata", "hdparm"), "output directory")
	timeout := flag.Duration("timeout", 15*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	work, err := os.MkdirTemp("", "recordhdparm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	files := map[string]string{}
	if err := vmtest.AddLinked(ctx, files, "/usr/sbin/hdparm"); err != nil {
		return fmt.Errorf("%w (install Debian's package hdparm)", err)
	}
	rd, err := vmtest.BuildGuestRamdisk(ctx, "./internal/vmtest/recordhdparm/hdparmguest", files)
	if err != nil {
		return err
	}
	m := vmtest.DefaultMachine("bios")
	m.Dir = filepath.Join(work, "vm")
	m.Kernel, m.Initrd = rd.Kernel, rd.Initrd
	_, tgz, err := vmtest.RunUpload(ctx, m, "hdparm", "/run/hdparm", vmtest.Options{Echo: func(l vmtest.Line) { fmt.Printf("%8.3f %s\n", l.At.Seconds(), l.Text) }})
	if err != nil {
		return err
	}
	got := filepath.Join(work, "got")
	if err := vmtest.ExtractTarGz(bytes.NewReader(tgz), got); err != nil {
		return err
	}
	return writeOutputs(ctx, got, *out)
}

// state is one ATA security state: the bits of IDENTIFY word 128.
type state struct {
	name                                      string
	enabled, locked, frozen, expired, enhance bool
}

// The states a drive reports (word 128 bit 0, "supported", is set in all).
var states = []state{
	{name: "security-supported", enhance: true},
	{name: "security-supported-no-enhanced-erase"},
	{name: "security-frozen", frozen: true, enhance: true},
	{name: "security-enabled", enabled: true, enhance: true},
	{name: "security-locked", enabled: true, locked: true, enhance: true},
	{name: "security-locked-expired", enabled: true, locked: true, expired: true, enhance: true},
}

// writeOutputs writes, for each disk in got, hdparm's own -I output
// (security not supported) and the outputs of the other states.
func writeOutputs(ctx context.Context, got, out string) error {
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
		asIs, err := os.ReadFile(base + ".hdparm-I")
		if err != nil {
			return err
		}
		if bytes.Contains(asIs, []byte("\nSecurity: \n")) {
			return fmt.Errorf("%s: QEMU's disk now reports a Security section; recheck the states", slug)
		}
		if err := write(out, slug+"-security-not-supported.txt", asIs); err != nil {
			return err
		}
		identify, err := os.ReadFile(base + ".identify")
		if err != nil {
			return err
		}
		words, err := parseWords(identify)
		if err != nil {
			return fmt.Errorf("%s: %w", base+".identify", err)
		}
		for _, s := range states {
			w := withSecurity(words, s)
			cmd := exec.CommandContext(ctx, "hdparm", "--Istdin")
			cmd.Stdin = strings.NewReader(formatWords(w))
			b, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("hdparm --Istdin for %s %s: %w", slug, s.name, err)
			}
			if err := write(out, slug+"-"+s.name+".txt", b); err != nil {
				return err
			}
		}
	}
	return nil
}

func write(dir, name string, b []byte) error {
	fmt.Println("writing", filepath.Join(dir, name))
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}

// parseWords reads the 256 IDENTIFY words `hdparm --Istdout` prints in
// hex, after a line naming the device ("/dev/sda:").
func parseWords(b []byte) ([256]uint16, error) {
	var w [256]uint16
	f := strings.Fields(string(b))
	if len(f) > 0 && strings.HasSuffix(f[0], ":") {
		f = f[1:]
	}
	if len(f) != 256 {
		return w, fmt.Errorf("%d words, want 256", len(f))
	}
	for i, s := range f {
		v, err := strconv.ParseUint(s, 16, 16)
		if err != nil {
			return w, fmt.Errorf("word %d: %w", i, err)
		}
		w[i] = uint16(v)
	}
	return w, nil
}

func formatWords(w [256]uint16) string {
	var b strings.Builder
	for i, v := range w {
		fmt.Fprintf(&b, "%04x", v)
		if i%8 == 7 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// withSecurity sets the ATA8-ACS security words: 82 bit 1 (Security
// feature set supported), 85 bit 1 (enabled), 89 and 90 (erase times, in
// units of 2 minutes), 92 (master password revision code, 0xfffe as
// shipped) and 128 (status), and recomputes the integrity word 255 so the
// whole block sums to 0 (low byte 0xa5 is the signature).
func withSecurity(w [256]uint16, s state) [256]uint16 {
	bit := func(b bool, v uint16) uint16 {
		if b {
			return v
		}
		return 0
	}
	w[82] |= 1 << 1
	w[85] = w[85]&^(1<<1) | bit(s.enabled, 1<<1)
	w[89] = 1
	w[90] = bit(s.enhance, 1)
	w[92] = 0xfffe
	w[128] = 1 | bit(s.enabled, 1<<1) | bit(s.locked, 1<<2) | bit(s.frozen, 1<<3) | bit(s.expired, 1<<4) | bit(s.enhance, 1<<5)
	var sum byte = 0xa5
	for _, v := range w[:255] {
		sum += byte(v) + byte(v>>8)
	}
	w[255] = uint16(-sum)<<8 | 0xa5
	return w
}
