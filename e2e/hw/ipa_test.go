package hw

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/ipa"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// portOffset is $E2E_PORT_OFFSET, as in e2e/vm.
func portOffset() int {
	n, err := strconv.Atoi(os.Getenv("E2E_PORT_OFFSET"))
	if err != nil || n < 0 || n >= 50000 {
		return 0
	}
	return n
}

// needIPA skips unless the side-by-side switch is on and the test can
// build and boot the ramdisk.
func needIPA(t *testing.T) {
	t.Helper()
	if !ipa.Enabled() {
		t.Skipf("SKIPPED: boots IPA 13's ramdisk (minutes to build once); set %s=1", ipa.EnableEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: building IPA's ramdisk needs root (debootstrap, chroot)")
	}
	if _, err := os.Stat("/usr/bin/qemu-system-x86_64"); err != nil {
		t.Skipf("SKIPPED: needs qemu-system-x86: %v", err)
	}
}

// TestIPABootsToLookup builds IPA 13's ramdisk and boots it in the
// harness's default machine against a fake Ironic that answers the version
// document and records IPA's first lookup. IPA_FIRMWARE=bios|uefi boots
// only one; IPA_EXTRA_APPEND adds kernel parameters (e.g.
// systemd.journald.forward_to_console=1 to see the whole boot).
func TestIPABootsToLookup(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	needIPA(t)
	// The first build took over 30 minutes on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Minute)
	defer cancel()
	start := time.Now()
	rd, err := ipa.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("IPA ramdisk (cached %v) in %s: kernel %s %.1f MiB, initrd %.1f MiB (gzip %.1f MiB), IPA %s",
		rd.Cached, time.Since(start).Round(time.Second), rd.KernelVersion, mib(ipa.Size(rd.Kernel)),
		mib(ipa.Size(rd.InitrdRaw)), mib(ipa.Size(rd.Initrd)), rd.Versions["ironic-python-agent"])

	port := portOffset() + 9590
	// No node: IPA's lookups get Ironic's 404 and it keeps trying.
	ironic := &fakeironic.Server{}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ironic}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	for _, fw := range []string{"bios", "uefi"} {
		if f := os.Getenv("IPA_FIRMWARE"); f != "" && f != fw {
			continue
		}
		t.Run(fw, func(t *testing.T) {
			m := qemu.DefaultMachine(qemu.Firmware(fw))
			m.MemoryMB = memoryMB
			m.Dir = filepath.Join(t.TempDir(), "vm")
			m.Kernel, m.Initrd = rd.Kernel, rd.InitrdRaw
			if fw == "uefi" {
				m.Initrd = rd.Initrd
			}
			m.GuestFwd = map[string]string{"10.0.2.100:" + strconv.Itoa(port): ln.Addr().String()}
			m.Append = "ipa-api-url=http://10.0.2.100:" + strconv.Itoa(port) + " ipa-lookup-timeout=600 " + os.Getenv("IPA_EXTRA_APPEND")
			// IPA waits (10 x 3 s) for a disk of at least 4 GiB, the
			// smallest root disk it takes without hints; the file is sparse.
			for i := range m.Disks {
				if m.Disks[i].ID == "scsi1" {
					m.Disks[i].SizeMB = 5 << 10
				}
			}
			booted := time.Now()
			vm, err := qemu.Start(ctx, m, qemu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer vm.Kill()
			lookupCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			var first time.Time
			err = ironic.Wait(lookupCtx, func(l []time.Time, _ []fakeironic.Heartbeat) bool {
				for _, at := range l {
					if at.After(booted) {
						first = at
						return true
					}
				}
				return false
			})
			if err != nil {
				t.Fatalf("no lookup in 10 minutes: %v; console:\n%s", err, ipaConsoleTail(vm, 60))
			}
			t.Logf("%s: first lookup %.1fs after QEMU started", fw, first.Sub(booted).Seconds())
		})
	}
}

// memoryMB is the VM's memory: IPA's ramdisk is a whole root filesystem
// in RAM (the initramfs and its unpacked copy at once during boot).
const memoryMB = 2048

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func ipaConsoleTail(vm *qemu.VM, n int) string {
	ls := vm.Lines()
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	s := ""
	for _, l := range ls {
		s += fmt.Sprintf("%8.3f %s\n", l.At.Seconds(), l.Text)
	}
	return s
}
