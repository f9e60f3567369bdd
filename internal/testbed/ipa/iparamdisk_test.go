package ipa

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

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

func TestMain(m *testing.M) {
	// QEMU runs this test binary as its guestfwd relay.
	qemu.MaybeRelay()
	os.Exit(m.Run())
}

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
	if !Enabled() {
		t.Skipf("SKIPPED: boots IPA 13's ramdisk (minutes to build once); set %s=1", EnableEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: building IPA's ramdisk needs root (debootstrap, chroot)")
	}
	if _, err := os.Stat("/usr/bin/qemu-system-x86_64"); err != nil {
		t.Skipf("SKIPPED: needs qemu-system-x86: %v", err)
	}
}

func TestSkipped(t *testing.T) {
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{"boot/vmlinuz-6.1", true}, {"usr/share/doc/x/copyright", true}, {"usr/share/locale/de/LC_MESSAGES/x.mo", true},
		{"usr/share/locale/locale.alias", false}, {"usr/bin/ironic-python-agent", false}, {"usr/share/docs", false},
		{"var/lib/apt/lists/x", true}, {"var/lib/apt/extended_states", false},
	} {
		if got := skipped(c.rel); got != c.want {
			t.Errorf("skipped(%q) = %v, want %v", c.rel, got, c.want)
		}
	}
}

// TestIPABootsToLookup builds IPA 13's ramdisk and boots it in the
// harness's default machine against a fake Ironic that answers the version
// document and records IPA's first lookup. IPA_FIRMWARE=bios|uefi boots
// only one; IPA_EXTRA_APPEND adds kernel parameters (e.g.
// systemd.journald.forward_to_console=1 to see the whole boot).
func TestIPABootsToLookup(t *testing.T) {
	needIPA(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	rd, err := Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("IPA ramdisk (cached %v) in %s: kernel %s %.1f MiB, initrd %.1f MiB (gzip %.1f MiB), IPA %s",
		rd.Cached, time.Since(start).Round(time.Second), rd.KernelVersion, mib(Size(rd.Kernel)),
		mib(Size(rd.InitrdRaw)), mib(Size(rd.Initrd)), rd.Versions["ironic-python-agent"])

	port := portOffset() + 9590
	lookups := make(chan time.Time, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"default_version": {"id": "v1", "version": "1.68", "min_version": "1.1", "status": "CURRENT"}}`)
	})
	mux.HandleFunc("GET /v1/lookup", func(w http.ResponseWriter, r *http.Request) {
		select {
		case lookups <- time.Now():
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error_message": "{\"faultstring\": \"Node not found\"}"}`)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
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
			select {
			case at := <-lookups:
				t.Logf("%s: first lookup %.1fs after QEMU started", fw, at.Sub(booted).Seconds())
			case <-time.After(10 * time.Minute):
				t.Fatalf("no lookup in 10 minutes; console:\n%s", tail(vm, 60))
			}
		})
	}
}

// memoryMB is the VM's memory: IPA's ramdisk is a whole root filesystem
// in RAM (the initramfs and its unpacked copy at once during boot).
const memoryMB = 2048

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func tail(vm *qemu.VM, n int) string {
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
