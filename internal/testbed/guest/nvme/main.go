// Command nvme (nvmeguest) is the /init of the ramdisk e2e/hw's
// TestNativeNVMeInQEMU boots: the agent ramdisk's init (as PID 1), and,
// as "nvmeguest nvme DIR", the NVMe admin commands of deploy/nvme sent to
// QEMU's emulated controller through the kernel, then the agent's own
// erase_devices on the namespace. It writes into DIR, which the init
// uploads:
//
//   - exchanges.json: every admin command as the kernel saw it (the 72
//     bytes of struct nvme_admin_cmd) with the status and data that came
//     back (deploy/nvme.Exchange): Identify Controller and Namespace, the
//     Sanitize Status log page, where the controller says it lacks them a
//     Sanitize and a cryptographic-erase Format to record the refusals,
//     and the user-data-erase Format erase_devices sends;
//   - controller.json: what deploy/nvme parsed from them;
//   - erase_devices.json: erase.EraseDevices' result (or error) for the
//     namespace with IPA's default options, run after the guest wrote
//     its own marker at the start of the namespace, so what the host
//     finds erased there is that run's work.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/deploy/nvme"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/inventory"
)

// dev is the namespace of the machine's one NVMe controller.
const dev = "/dev/nvme0n1"

func main() {
	if os.Getpid() == 1 {
		err := rdinit.Main(context.Background(), os.Stdout, nil)
		fmt.Println("nvmeguest init:", err)
		_ = rdinit.Halt(false)
		return
	}
	if len(os.Args) != 3 || os.Args[1] != "nvme" {
		fmt.Fprintln(os.Stderr, "usage: nvmeguest nvme DIR (in the test's ramdisk)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "nvmeguest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := waitFor(ctx, dev); err != nil {
		return err
	}
	f, err := nvme.Open(dev)
	if err != nil {
		return err
	}
	rec := &nvme.Recorder{Device: f}
	report, err := record(ctx, rec)
	f.Close()
	if werr := writeJSON(dir, "exchanges.json", rec.Exchanges()); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if err := writeJSON(dir, "controller.json", report); err != nil {
		return err
	}

	if err := writeMarker(dev); err != nil {
		return err
	}
	e := &erase.Eraser{Guard: blockdev.NewGuard([]string{dev})}
	start := time.Now()
	res, err := e.EraseDevices(ctx, []inventory.Disk{{Name: dev}}, erase.DefaultEraseOptions())
	out := map[string]any{"results": res, "seconds": time.Since(start).Seconds()}
	if err != nil {
		out["error"] = err.Error()
	}
	fmt.Printf("nvmeguest: erase_devices %v: %v\n", res, err)
	return writeJSON(dir, "erase_devices.json", out)
}

// Report is what the commands told, as deploy/nvme parsed it.
type Report struct {
	Controller nvme.Controller
	NSID       uint32
	Namespace  nvme.Namespace
	// SanitizeLog is the log page, or the error reading it.
	SanitizeLog    *nvme.SanitizeLog `json:",omitempty"`
	SanitizeLogErr string            `json:",omitempty"`
	// SanitizeErr is the controller's refusal of a Sanitize it reports
	// no capability for ("" when it has one: then none is sent here).
	SanitizeErr string `json:",omitempty"`
	// CryptoFormatErr is the controller's answer to a cryptographic-erase
	// format it reports no support for ("" and CryptoFormatAccepted
	// false when it has one: then none is sent here).
	CryptoFormatErr      string `json:",omitempty"`
	CryptoFormatAccepted bool   `json:",omitempty"`
	// UserDataFormatErr is the answer to a user-data-erase format.
	UserDataFormatErr string `json:",omitempty"`
}

func record(ctx context.Context, d *nvme.Recorder) (Report, error) {
	var r Report
	var err error
	if r.Controller, err = nvme.IdentifyController(ctx, d); err != nil {
		return r, err
	}
	if r.NSID, err = d.NamespaceID(); err != nil {
		return r, err
	}
	if r.Namespace, err = nvme.IdentifyNamespace(ctx, d, r.NSID); err != nil {
		return r, err
	}
	if l, err := nvme.SanitizeStatus(ctx, d); err != nil {
		r.SanitizeLogErr = err.Error()
	} else {
		r.SanitizeLog = &l
	}
	if r.Controller.SANICAP&(nvme.SANICAPCryptoErase|nvme.SANICAPBlockErase|nvme.SANICAPOverwrite) == 0 {
		err := nvme.Sanitize(ctx, d, nvme.SanitizeCryptoErase)
		if err == nil {
			return r, errors.New("the controller reports no sanitize capability but accepted a Sanitize")
		}
		r.SanitizeErr = err.Error()
	}
	if r.Controller.FNA&nvme.FNACryptoErase == 0 {
		err := nvme.Format(ctx, d, r.NSID, r.Namespace, nvme.SESCrypto)
		r.CryptoFormatAccepted = err == nil
		if err != nil {
			r.CryptoFormatErr = err.Error()
		}
	}
	if err := nvme.Format(ctx, d, r.NSID, r.Namespace, nvme.SESUserData); err != nil {
		r.UserDataFormatErr = err.Error()
	}
	fmt.Printf("nvmeguest: %+v\n", r)
	return r, nil
}

// Marker is what the guest writes at the start of the namespace before
// erase_devices runs.
const Marker = "nvmeguest marker: erase_devices must erase this\n"

// writeMarker writes Marker, repeated over 1 MiB, at the start of dev
// with direct I/O, past any cache of the guest.
func writeMarker(dev string) error {
	f, err := os.OpenFile(dev, os.O_WRONLY|syscall.O_DIRECT|syscall.O_SYNC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf, release, err := blockdev.AlignedBuffer(1 << 20)
	if err != nil {
		return err
	}
	defer release()
	for i := range buf {
		buf[i] = Marker[i%len(Marker)]
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("writing the marker to %s: %w", dev, err)
	}
	return nil
}

func waitFor(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not appear: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func writeJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644)
}
