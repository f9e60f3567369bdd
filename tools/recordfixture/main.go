// Command recordfixture records the QEMU VM fixtures (fixtures/qemu-bios,
// fixtures/qemu-uefi): it builds the ramdisk, boots qemu.DefaultMachine
// with `ironic-agent capture-fixture` as the ramdisk's command, receives the
// captured tree over HTTP through the VM's guestfwd relay and writes it with
// a README saying how it was made. scripts/record-vm-fixture.sh runs it.
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
		fmt.Fprintf(os.Stderr, "recordfixture: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	fw := flag.String("firmware", "bios", "bios (SeaBIOS) or uefi (OVMF)")
	out := flag.String("out", "", "fixture directory (default fixtures/qemu-FIRMWARE)")
	work := flag.String("work", "", "work directory for the ramdisk, disks and logs (default: a temporary one)")
	timeout := flag.Duration("timeout", 15*time.Minute, "give up after this long")
	udev := flag.Bool("udev", false, "run Debian's udevd (this machine's package udev) in the guest before the capture,\nso the fixture carries run/udev/data and /dev/disk/by-path (default -out: fixtures/qemu-FIRMWARE-udev)")
	machine := flag.String("machine", "default", "default (qemu.DefaultMachine) or side-by-side (qemu.SideBySideMachine:\nthe machine of e2e/vm's TestVMIPASideBySide; default -out: fixtures/qemu-ipa13-FIRMWARE)")
	flag.Parse()
	if *fw != "bios" && *fw != "uefi" {
		return fmt.Errorf("-firmware %q: want bios or uefi", *fw)
	}
	hardware := map[string]string{"default": "qemu.DefaultMachine",
		"side-by-side": "qemu.SideBySideMachine, the machine of e2e/vm's TestVMIPASideBySide (its second NIC here\non an isolated slirp: no lldpd)"}
	newMachine := qemu.DefaultMachine
	switch *machine {
	case "default":
	case "side-by-side":
		newMachine = qemu.SideBySideMachine
	default:
		return fmt.Errorf("-machine %q: want default or side-by-side", *machine)
	}
	if *out == "" {
		*out = filepath.Join("fixtures", "qemu-"+*fw)
		if *machine == "side-by-side" {
			*out = filepath.Join("fixtures", "qemu-ipa13-"+*fw)
		}
		if *udev {
			*out += "-udev"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if *work == "" {
		d, err := os.MkdirTemp("", "recordfixture-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*work = d
	}
	start := time.Now()
	var rd *qemu.Ramdisk
	var err error
	if *udev {
		rd, err = buildUdevRamdisk(ctx)
	} else {
		rd, err = qemu.BuildRamdisk(ctx)
	}
	if err != nil {
		return err
	}
	fmt.Printf("ramdisk built in %.1fs (kernel %s)\n", time.Since(start).Seconds(), rd.KernelVersion)

	m := newMachine(qemu.Firmware(*fw))
	m.Dir = filepath.Join(*work, "vm-"+*fw)
	m.Kernel, m.Initrd = rd.Kernel, rd.Initrd
	command := "capture-fixture"
	if *udev {
		command = "capture" // udevguest's subcommand
	}
	vm, tgz, err := qemu.RunUpload(ctx, m, command, "/run/fixture", qemu.Options{Echo: func(l qemu.Line) { fmt.Printf("%8.3f %s\n", l.At.Seconds(), l.Text) }})
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(*out, "root")); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	// capture-fixture writes its own README only when there is none.
	if err := os.Remove(filepath.Join(*out, "README.md")); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := qemu.ExtractTarGz(bytes.NewReader(tgz), *out); err != nil {
		return err
	}
	captured, _ := os.ReadFile(filepath.Join(*out, "README.md"))
	readme := fixtureReadme(*fw, strings.TrimPrefix(filepath.Base(*out), "qemu-"), *udev, hardware[*machine], m, vm, rd, string(captured), time.Now().UTC())
	if err := os.WriteFile(filepath.Join(*out, "README.md"), []byte(readme), 0o644); err != nil {
		return err
	}
	fmt.Printf("fixture written to %s in %.1fs (VM %.1fs)\n", *out, time.Since(start).Seconds(), vm.Elapsed().Seconds())
	return nil
}

func fixtureReadme(fw, scriptArg string, udev bool, hardware string, m qemu.Machine, vm *qemu.VM, rd *qemu.Ramdisk, captured string, now time.Time) string {
	firmware := "SeaBIOS (Debian's seabios, QEMU's default for q35)"
	if fw == "uefi" {
		firmware = "OVMF (Debian's ovmf, " + qemu.OVMFCode + ")"
	}
	var disks strings.Builder
	for _, d := range m.Disks {
		fmt.Fprintf(&disks, "| %s | %s | %d MiB | %s | %s | %s |\n", d.ID, d.Kind, d.SizeMB, d.Serial, d.WWN, d.Model)
	}
	var nics strings.Builder
	for _, n := range m.NICs {
		fmt.Fprintf(&nics, "| %s | %s | %s |\n", n.Model, n.MAC, n.Backend)
	}
	cmdline := qemu.ShellQuote(vm.Cmdline)
	// The temporary paths say nothing to a reader; name the files instead.
	cmdline = strings.ReplaceAll(cmdline, m.Dir+"/", "")
	cmdline = strings.ReplaceAll(cmdline, filepath.Dir(rd.Kernel)+"/", "")
	if self, err := os.Executable(); err == nil {
		cmdline = strings.ReplaceAll(cmdline, self+" "+qemu.RelayArg, "RELAY")
	}
	how := `Recorded %s by ` + "`scripts/record-vm-fixture.sh %s`" + ` (tools/recordfixture): the
agent ramdisk (kernel %s from Debian package %s, initramfs with the static
ironic-agent as /init) booted in QEMU under software emulation (TCG), firmware %s.
The ramdisk's init ran ` + "`ironic-agent capture-fixture /run/fixture`" + ` and POSTed the tree through
the slirp guestfwd relay; nothing on the guest ran udev, so there is no run/udev/data and no
/dev/disk/by-path: the inventory must come from sysfs alone.`
	title := ""
	if udev {
		title = ", udev"
		how = `Recorded %s by ` + "`scripts/record-vm-fixture.sh %s`" + ` (tools/recordfixture -udev):
the agent ramdisk (kernel %s from Debian package %s) booted in QEMU under software
emulation (TCG), firmware %s, with internal/testbed/guest/udev as /init and
Debian bookworm's udevd in it: /usr/bin/udevadm (systemd 252, started as systemd-udevd), the
helpers ata_id, scsi_id and cdrom_id, every rules file of the package udev (` + "`dpkg -L udev`" + `)
and the libraries they link. In the guest udevguest started systemd-udevd, replayed the
kernel's add events (` + "`udevadm trigger --type=subsystems|devices --action=add`" + `), waited for
` + "`udevadm settle`" + `, then captured the tree as ` + "`ironic-agent capture-fixture /run/fixture`" + ` does
and POSTed it through the slirp guestfwd relay. So root/run/udev/data and root/dev/disk/by-path
are what udevd itself wrote (no hwdb.bin in the ramdisk, so no *_FROM_DATABASE keys); the
collector's sysfs-only route must give the same disks (collector's
TestDisksRoutesAgreeOnFixtures).`
	}
	how = fmt.Sprintf(how, now.Format(time.RFC3339), scriptArg, rd.KernelVersion, rd.KernelPackage, firmware)
	return fmt.Sprintf(`# QEMU q35 VM, %s boot%s

%s

The hardware is %s: SMBIOS types 0/1/2/3/11 as set with -smbios (system
%q %q serial %q), %d vCPUs (model-id %q), %d MiB.

| disk | QEMU device | size | serial | wwn | model |
| --- | --- | --- | --- | --- | --- |
%s
| NIC | MAC | backend |
| --- | --- | --- |
%s
The QEMU command line (RELAY is the guestfwd relay, the recorder itself):

`+"```"+`
%s
`+"```"+`

What capture-fixture wrote:

%s`, strings.ToUpper(fw), title, how,
		hardware, m.SMBIOS.SystemManufacturer, m.SMBIOS.SystemProduct, m.SMBIOS.SystemSerial, m.CPUs, m.CPUModel, m.MemoryMB,
		disks.String(), nics.String(), cmdline, quote(captured))
}

func quote(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		b.WriteString("> " + l + "\n")
	}
	return b.String()
}

// buildUdevRamdisk builds the ramdisk of a -udev recording: udevguest as
// /init, and this machine's udevd with the rules and helpers of Debian's
// package udev and the libraries they link.
func buildUdevRamdisk(ctx context.Context) (*qemu.Ramdisk, error) {
	files := map[string]string{"usr/bin/udevadm": "/usr/bin/udevadm"}
	list, err := output(ctx, "dpkg", "-L", "udev")
	if err != nil {
		return nil, fmt.Errorf("%w (install Debian's package udev)", err)
	}
	bins := []string{"/usr/bin/udevadm"}
	for _, p := range strings.Fields(string(list)) {
		switch {
		case strings.HasPrefix(p, "/lib/udev/rules.d/") && strings.HasSuffix(p, ".rules"):
			// udevd (systemd 252) reads rules from /usr/lib/udev/rules.d;
			// Debian's /lib is a link to usr/lib, the ramdisk's is not.
			files["usr"+p] = p
		case p == "/lib/udev/ata_id" || p == "/lib/udev/scsi_id" || p == "/lib/udev/cdrom_id":
			bins = append(bins, p)
		}
	}
	if err := qemu.AddLinked(ctx, files, bins...); err != nil {
		return nil, err
	}
	return qemu.BuildGuestRamdisk(ctx, "./internal/testbed/guest/udev", files)
}

// output runs a command and returns its standard output; the error names
// the command line, its exit status and its standard error.
func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
