package hw

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/bmc"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestDeviceInQEMU is the test of the real ioctl path: it boots the agent
// ramdisk in QEMU with QEMU's simulated BMC behind a KCS interface, so the
// guest kernel's ipmi_si and ipmi_devintf drivers expose /dev/ipmi0, and
// runs `ironic-agent capture-fixture` there. The recording it uploads must
// hold the Get Device ID reply with the manufacturer and product QEMU was
// given (bytes only the driver round trip can deliver), and the inventory IPA's values
// for a BMC without a LAN channel: QEMU 7.2's simulator does not implement
// Get Channel Info, so "0.0.0.0", "::/0" and no bmc_mac.
func TestDeviceInQEMU(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine (1-3 minutes under TCG)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("SKIPPED: needs qemu-system-x86_64 (./test.sh installs qemu-system-x86)")
	}
	ctx := t.Context()
	work := t.TempDir()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}

	uploaded := make(chan []byte, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil || r.Method != http.MethodPost {
			http.Error(w, "POST the fixture", http.StatusBadRequest)
			return
		}
		select {
		case uploaded <- b:
		default:
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-bmc"
	m.Dir = filepath.Join(work, "vm")
	m.Disks = nil // not what this test is about; fewer devices boot faster
	m.NICs = m.NICs[:1]
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.BMC = &qemu.BMC{MfgID: 0x1234, ProductID: 0x0beb}
	m.GuestFwd = map[string]string{"10.0.2.100:80": ln.Addr().String()}
	m.Append = "ironic_agent.cmd=capture-fixture,/run/fixture ironic_agent.upload=http://10.0.2.100/upload " +
		"ironic_agent.upload_dir=/run/fixture ironic_agent.dhcp=" + m.NICs[0].MAC
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("VM ran %v", vm.Elapsed().Round(time.Second))
	var tgz []byte
	select {
	case tgz = <-uploaded:
	default:
		t.Fatalf("the VM powered off without uploading the fixture; serial console in %s:\n%s", vm.LogPath, tail(vm))
	}
	dir := t.TempDir()
	if err := qemu.ExtractTarGz(bytes.NewReader(tgz), dir); err != nil {
		t.Fatal(err)
	}

	b, err := os.ReadFile(filepath.Join(dir, "ipmi.json"))
	if err != nil {
		t.Fatalf("no ipmi.json: the guest found or opened no IPMI device (%v); serial console:\n%s", err, tail(vm))
	}
	var rec bmc.Recording
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	var got *bmc.DeviceID
	answered := 0
	for _, ex := range rec.Exchanges {
		if ex.Response != "" {
			answered++
		}
		if ex.NetFn == bmc.NetFnApp && ex.Cmd == bmc.CmdGetDeviceID && ex.Response != "" {
			resp, _ := hex.DecodeString(ex.Response)
			if len(resp) > 0 && resp[0] == 0 {
				id, err := bmc.DecodeDeviceID(resp[1:])
				if err != nil {
					t.Fatal(err)
				}
				got = &id
			}
		}
	}
	t.Logf("%d exchanges, %d answered by the BMC", len(rec.Exchanges), answered)
	if got == nil || got.ManufacturerID != 0x1234 || got.ProductID != 0x0beb {
		t.Errorf("Get Device ID through /dev/ipmi0: %+v, want manufacturer 0x1234, product 0x0beb\n%s", got, b)
	}
	if answered < 12 {
		t.Errorf("only %d of %d requests answered: Get Device ID and Get Channel Info on channels 1-11 should all be\n%s",
			answered, len(rec.Exchanges), b)
	}

	var inv struct {
		BMCAddress   *string `json:"bmc_address"`
		BMCV6Address *string `json:"bmc_v6address"`
		BMCMAC       *string `json:"bmc_mac"`
	}
	ib, err := os.ReadFile(filepath.Join(dir, "inventory.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ib, &inv); err != nil {
		t.Fatal(err)
	}
	if strOrNil(inv.BMCAddress) != "0.0.0.0" || strOrNil(inv.BMCV6Address) != "::/0" || inv.BMCMAC != nil {
		t.Errorf("inventory BMC fields %s %s %s, want 0.0.0.0 ::/0 <nil>", strOrNil(inv.BMCAddress), strOrNil(inv.BMCV6Address), strOrNil(inv.BMCMAC))
	}
	if _, err := os.Stat(filepath.Join(dir, "root/dev/ipmi0")); err != nil {
		t.Errorf("the fixture tree does not record the device node: %v", err)
	}
}

func tail(vm *qemu.VM) string {
	var buf bytes.Buffer
	lines := vm.Lines()
	for _, l := range lines[max(0, len(lines)-40):] {
		buf.WriteString(l.Text + "\n")
	}
	return buf.String()
}

// strOrNil is *p, or "<nil>" for nil.
func strOrNil(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
