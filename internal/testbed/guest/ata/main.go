// Command ata (ataguest) is the /init of the ramdisk tools/recordata and the ATA VM
// test boot: the agent ramdisk's init (as PID 1), plus this program.
// "ataguest record DIR" writes, for every ATA disk of the machine (SCSI
// vendor "ATA" in sysfs), what deploy/ata reads through SG_IO: the 512
// bytes of IDENTIFY DEVICE, and the SCSI status and sense bytes of that
// command and of two security commands QEMU refuses (SECURITY ERASE PREPARE, and SECURITY
// UNLOCK with the zero password: neither changes a drive that lacks the
// feature set). "ataguest erase DIR" records the same and then runs
// erase_devices' per-device erase (deploy/erase, IPA's defaults) on each
// of those disks, writing its result. The init then uploads DIR.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/ata"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
)

func main() {
	if os.Getpid() == 1 {
		err := rdinit.Main(context.Background(), os.Stdout, nil)
		fmt.Println("ataguest init:", err)
		_ = rdinit.Halt(false)
		return
	}
	if len(os.Args) != 3 || (os.Args[1] != "record" && os.Args[1] != "erase") {
		fmt.Fprintln(os.Stderr, "usage: ataguest record|erase DIR (in the recorder's ramdisk)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := run(ctx, os.Args[1] == "erase", os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "ataguest:", err)
		os.Exit(1)
	}
}

// Reply is what a refused command's SG_IO returned, as the recording
// keeps it beside the raw sense bytes.
type Reply struct {
	CDB          string `json:"cdb"`
	Status       byte   `json:"status"`
	HostStatus   uint16 `json:"host_status"`
	DriverStatus uint16 `json:"driver_status"`
}

func run(ctx context.Context, doErase bool, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	disks, err := filepath.Glob("/sys/block/sd*")
	if err != nil {
		return err
	}
	var devs []string
	for _, d := range disks {
		vendor, err := os.ReadFile(filepath.Join(d, "device", "vendor"))
		if err != nil || strings.TrimSpace(string(vendor)) != "ATA" {
			continue
		}
		name := filepath.Base(d)
		devs = append(devs, "/dev/"+name)
		if err := record(ctx, dir, name); err != nil {
			return err
		}
	}
	if len(devs) == 0 {
		return fmt.Errorf("no ATA disk among %v", disks)
	}
	if !doErase {
		return nil
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	e := &erase.Eraser{Guard: blockdev.NewGuard(devs), Runner: blockdev.ExecRunner{}, Logger: log}
	for _, dev := range devs {
		r, err := e.EraseBlockDevice(ctx, dev, erase.DefaultEraseOptions())
		out := struct {
			erase.DeviceResult
			Error string `json:"error,omitempty"`
		}{DeviceResult: r}
		if err != nil {
			out.Error = err.Error()
		}
		fmt.Printf("ataguest: erase %s: %+v\n", dev, out)
		if err := writeJSON(filepath.Join(dir, filepath.Base(dev)+".erase.json"), out); err != nil {
			return err
		}
	}
	return nil
}

func record(ctx context.Context, dir, name string) error {
	dev := "/dev/" + name
	model, _ := os.ReadFile(filepath.Join("/sys/block", name, "device", "model"))
	if err := os.WriteFile(filepath.Join(dir, name+".model"), model, 0o644); err != nil {
		return err
	}
	cmds := []struct {
		file string
		cmd  ata.Command
		dir  ata.Direction
		data []byte
	}{
		{"identify", ata.Command{Protocol: ata.ProtocolPIOIn, Command: ata.OpIdentify, Count: 1}, ata.DirIn, make([]byte, ata.SectorSize)},
		{"erase-prepare", ata.Command{Protocol: ata.ProtocolNonData, Command: ata.OpSecurityErasePrepare}, ata.DirNone, nil},
		{"unlock", ata.Command{Protocol: ata.ProtocolPIOOut, Command: ata.OpSecurityUnlock, Count: 1}, ata.DirOut,
			ata.PasswordBlock(ata.User, ata.Password{}, false)},
	}
	for _, c := range cmds {
		req := &ata.Request{CDB: ata.CDB16(c.cmd), Dir: c.dir, Data: c.data, Timeout: 15 * time.Second}
		r, err := ata.SGIO{}.Pass(ctx, dev, req)
		if err != nil {
			return fmt.Errorf("%s on %s: %w", c.file, dev, err)
		}
		rep := Reply{CDB: fmt.Sprintf("% x", req.CDB), Status: r.Status, HostStatus: r.HostStatus, DriverStatus: r.DriverStatus}
		fmt.Printf("ataguest: %s %s: %+v sense % x; %v\n", c.file, dev, rep, r.Sense, ata.Check(dev, c.cmd.Command, r))
		if c.dir == ata.DirIn {
			// IDENTIFY DEVICE's 512 bytes.
			if err := os.WriteFile(filepath.Join(dir, name+"."+c.file), c.data, 0o644); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name+"."+c.file+".sense"), r.Sense, 0o644); err != nil {
			return err
		}
		if err := writeJSON(filepath.Join(dir, name+"."+c.file+".json"), rep); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
