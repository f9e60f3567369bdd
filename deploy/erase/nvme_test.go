package erase

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/nvme"
)

// nvmeReply is a controller's answer to one admin command: the data it
// returns and its completion status (0: success), or an ioctl error.
type nvmeReply struct {
	data   []byte
	status uint16
	err    error
}

// fakeNVMe is an NVMe controller with one namespace (nsid 1) answering
// admin commands from queues of replies keyed by the command's name
// (nvme.Command.String()), like fakeRunner does for command lines.
type fakeNVMe struct {
	replies map[string][]nvmeReply
	calls   []string
	closed  int
	openErr error
}

func (f *fakeNVMe) open(string) (nvmeDevice, error) {
	if f.openErr != nil {
		return nil, f.openErr
	}
	return f, nil
}

func (f *fakeNVMe) Admin(cmd *nvme.Command, data []byte) error {
	name := cmd.String()
	f.calls = append(f.calls, name)
	q := f.replies[name]
	if len(q) == 0 {
		return errors.New("fake: no reply recorded for " + name)
	}
	r := q[0]
	if len(q) > 1 {
		f.replies[name] = q[1:]
	}
	if r.err != nil {
		return r.err
	}
	copy(data, r.data)
	if r.status != 0 {
		return &nvme.StatusError{Command: name, Status: r.status}
	}
	return nil
}

func (f *fakeNVMe) NamespaceID() (uint32, error) { return 1, nil }

func (f *fakeNVMe) Close() error { f.closed++; return nil }

// Command names as the fake sees them.
const (
	cmdIDCtrl    = "Identify Controller"
	cmdIDNS      = "Identify Namespace (nsid 1)"
	cmdFormat1   = "Format NVM (nsid 1, SES 1)"
	cmdFormat2   = "Format NVM (nsid 1, SES 2)"
	cmdSanCrypto = "Sanitize (SANACT 4)"
	cmdSanBlock  = "Sanitize (SANACT 2)"
	cmdSanLog    = "Get Log Page (LID 0x81)"
)

// NVMe statuses as the kernel returns them.
const (
	statusInvalidField  = 0x4002 // DNR, generic, Invalid Field in Command
	statusInvalidFormat = 0x410a // DNR, command specific, Invalid Format
	statusAccessDenied  = 0x4286 // DNR, media and data integrity, Access Denied
	statusSanitizeBusy  = 0x001d // Sanitize In Progress
)

// idCtrlPage is an Identify Controller data structure with the fields
// the erase reads.
func idCtrlPage(oacs uint16, fna uint8, sanicap uint32) []byte {
	b := make([]byte, nvme.IdentifySize)
	binary.LittleEndian.PutUint16(b[0:], 0x15b7)
	copy(b[4:24], "1951B3444502        ")
	copy(b[24:64], "TEST NVME 256G                          ")
	binary.LittleEndian.PutUint16(b[256:], oacs)
	binary.LittleEndian.PutUint32(b[328:], sanicap)
	binary.LittleEndian.PutUint32(b[516:], 1)
	b[524] = fna
	return b
}

// nsPage is an Identify Namespace data structure: 1 GiB of 512-byte
// blocks, LBA format 0 of one.
func nsPage() []byte {
	b := make([]byte, nvme.IdentifySize)
	binary.LittleEndian.PutUint64(b[0:], 1<<21)
	b[128+2] = 9
	return b
}

// sanitizeLogPage is a Sanitize Status log page.
func sanitizeLogPage(sprog, sstat uint16) []byte {
	b := make([]byte, nvme.SanitizeLogSize)
	binary.LittleEndian.PutUint16(b[0:], sprog)
	binary.LittleEndian.PutUint16(b[2:], sstat)
	binary.LittleEndian.PutUint32(b[4:], nvme.SanitizeCryptoErase) // SCDW10
	for i := 8; i < 32; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], 0xffffffff) // no time estimates
	}
	return b
}

// formatReplies are a controller's answers up to and including a format
// with status st.
func formatReplies(oacs uint16, fna uint8, sanicap uint32, format string, st uint16) map[string][]nvmeReply {
	return map[string][]nvmeReply{cmdIDCtrl: {{data: idCtrlPage(oacs, fna, sanicap)}}, cmdIDNS: {{data: nsPage()}}, format: {{status: st}}}
}

func TestNVMeEraseDecisionTable(t *testing.T) {
	const dev = "/dev/nvme0n1"
	for _, c := range []struct {
		name    string
		nvme    fakeNVMe
		method  string
		errPart string
		calls   []string
	}{
		{name: "crypto erase", nvme: fakeNVMe{replies: formatReplies(23, 4, 0, cmdFormat2, 0)},
			method: MethodNVMeCrypto, calls: []string{cmdIDCtrl, cmdIDNS, cmdFormat2}},
		{name: "user data erase", nvme: fakeNVMe{replies: formatReplies(23, 0, 0, cmdFormat1, 0)},
			method: MethodNVMeUserData, calls: []string{cmdIDCtrl, cmdIDNS, cmdFormat1}},
		{name: "format unsupported", nvme: fakeNVMe{replies: formatReplies(0, 0, 0, cmdFormat1, 0)},
			errPart: "device /dev/nvme0n1: the controller reports no supported format modes (Identify Controller OACS bit 1, Format NVM, clear)",
			calls:   []string{cmdIDCtrl}},
		{name: "device cannot be opened", nvme: fakeNVMe{openErr: errors.New("nvme: open /dev/nvme0n1: permission denied")},
			errPart: "failed to fetch NVMe capabilities for device /dev/nvme0n1: nvme: open /dev/nvme0n1: permission denied"},
		{name: "identify fails", nvme: fakeNVMe{replies: map[string][]nvmeReply{cmdIDCtrl: {{status: statusInvalidField}}}},
			errPart: "failed to fetch NVMe capabilities for device /dev/nvme0n1: Identify Controller: NVMe status 0x4002 (type 0, code 0x02: Invalid Field in Command)",
			calls:   []string{cmdIDCtrl}},
		{name: "identify ioctl fails", nvme: fakeNVMe{replies: map[string][]nvmeReply{cmdIDCtrl: {{err: errors.New("NVME_IOCTL_ADMIN_CMD: inappropriate ioctl for device")}}}},
			errPart: "failed to fetch NVMe capabilities for device /dev/nvme0n1: NVME_IOCTL_ADMIN_CMD: inappropriate ioctl for device"},
		{name: "crypto format refused", nvme: fakeNVMe{replies: formatReplies(23, 4, 0, cmdFormat2, statusInvalidField)},
			errPart: "failed to nvme format device /dev/nvme0n1: Format NVM (nsid 1, SES 2): NVMe status 0x4002 (type 0, code 0x02: Invalid Field in Command)",
			calls:   []string{cmdIDCtrl, cmdIDNS, cmdFormat2}},
		{name: "format fails", nvme: fakeNVMe{replies: formatReplies(23, 4, 0, cmdFormat2, statusInvalidFormat)},
			errPart: "failed to nvme format device /dev/nvme0n1: Format NVM (nsid 1, SES 2): NVMe status 0x410a (type 1, code 0x0a: Invalid Format)"},
		{name: "namespace unreadable", nvme: fakeNVMe{replies: map[string][]nvmeReply{cmdIDCtrl: {{data: idCtrlPage(23, 4, 0)}}, cmdIDNS: {{data: make([]byte, 4096)}}}},
			errPart: "failed to nvme format device /dev/nvme0n1: reading the current LBA format: nvme: Identify Namespace reports no namespace",
			calls:   []string{cmdIDCtrl, cmdIDNS}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &c.nvme
			e := &Eraser{Guard: blockdev.NewGuard(nil), Root: t.TempDir(), nvmeOpen: f.open}
			res, err := e.nvmeErase(context.Background(), dev)
			checkNVMeOutcome(t, res, err, c.method, c.errPart, f, c.calls)
			if f.openErr == nil && f.closed != 1 {
				t.Errorf("device closed %d times", f.closed)
			}
		})
	}
}

// checkNVMeOutcome checks a decision-table row: the method or the error
// text, and (when calls is not nil) the admin commands f was sent.
func checkNVMeOutcome(t *testing.T, res DeviceResult, err error, method, errPart string, f *fakeNVMe, calls []string) {
	t.Helper()
	if errPart != "" {
		if err == nil || !strings.Contains(err.Error(), errPart) {
			t.Fatalf("error %v, want it to contain %q", err, errPart)
		}
	} else if err != nil {
		t.Fatal(err)
	} else if res.Method != method {
		t.Errorf("method %q, want %q", res.Method, method)
	}
	if calls != nil && !reflect.DeepEqual(f.calls, calls) {
		t.Errorf("calls\n%q\nwant\n%q", f.calls, calls)
	}
}

// A format whose fna says it hits every namespace must not run when another
// namespace of the controller is outside the guard.
func TestNVMeFormatAllNamespacesGuarded(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sys/class/block/nvme0n1/device/nvme0n1", "sys/class/block/nvme0n1/device/nvme0c0n2", "sys/class/block/nvme0n1/device/hwmon1"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := &fakeNVMe{replies: formatReplies(23, 5, 0, cmdFormat2, 0)}
	e := &Eraser{Guard: blockdev.NewGuard([]string{"/dev/nvme0n1"}), Root: root, nvmeOpen: f.open}
	_, err := e.nvmeErase(context.Background(), "/dev/nvme0n1")
	if err == nil || !strings.Contains(err.Error(), "would also erase namespace /dev/nvme0n2") {
		t.Fatalf("got %v", err)
	}
	if !reflect.DeepEqual(f.calls, []string{cmdIDCtrl}) {
		t.Errorf("calls %q: want no format", f.calls)
	}
	got, err := e.nvmeSiblingNamespaces("/dev/nvme0n1")
	if err != nil || !reflect.DeepEqual(got, []string{"/dev/nvme0n2"}) {
		t.Errorf("siblings %v %v", got, err)
	}
	// fna without the all-namespaces bits: only this namespace, no check.
	f = &fakeNVMe{replies: formatReplies(23, 4, 0, cmdFormat2, 0)}
	e.nvmeOpen = f.open
	if res, err := e.nvmeErase(context.Background(), "/dev/nvme0n1"); err != nil || res.Method != MethodNVMeCrypto {
		t.Errorf("single-namespace format: %+v %v", res, err)
	}
}

// The format keeps the namespace's LBA format, metadata setting and
// protection information, and sets only SES: the command's bytes.
func TestNVMeFormatKeepsLBAFormat(t *testing.T) {
	ns := nsPage()
	ns[25] = 3       // four LBA formats
	ns[26] = 0x12    // format 2, extended LBA (MSET)
	ns[29] = 0x09    // PI type 1, first bytes (PIL)
	ns[128+8+2] = 12 // format 2: 4096-byte blocks
	ns[128+8+0] = 8  // with 8 bytes of metadata
	var sent []byte
	f := &recordingNVMe{fakeNVMe: fakeNVMe{replies: map[string][]nvmeReply{cmdIDCtrl: {{data: idCtrlPage(23, 0, 0)}}, cmdIDNS: {{data: ns}},
		cmdFormat1: {{}}}}, onSend: func(c *nvme.Command) {
		if c.Opcode == nvme.OpFormatNVM {
			b := c.Marshal(0)
			sent = b[:]
		}
	}}
	e := &Eraser{Guard: blockdev.NewGuard(nil), Root: t.TempDir(), nvmeOpen: func(string) (nvmeDevice, error) { return f, nil }}
	if _, err := e.nvmeErase(context.Background(), "/dev/nvme0n1"); err != nil {
		t.Fatal(err)
	}
	// cdw10 = LBAF 2 | MSET<<4 | PI 1<<5 | PIL<<8 | SES 1<<9 = 0x332.
	if got := binary.LittleEndian.Uint32(sent[40:]); got != 0x332 || sent[0] != 0x80 || binary.LittleEndian.Uint32(sent[4:]) != 1 {
		t.Errorf("format command %x: cdw10 %#x, want 0x332 on nsid 1", sent, got)
	}
}

// recordingNVMe is fakeNVMe that shows each command to onSend first.
type recordingNVMe struct {
	fakeNVMe
	onSend func(*nvme.Command)
}

func (r *recordingNVMe) Admin(cmd *nvme.Command, data []byte) error {
	r.onSend(cmd)
	return r.fakeNVMe.Admin(cmd, data)
}

// Without a kernel NVMe device the erase fails naming the device and the
// reason, not a missing program.
func TestNVMeEraseWithoutDevice(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "nvme9n1")
	e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Root: t.TempDir()}
	_, err := e.nvmeErase(context.Background(), dev)
	if err == nil || !strings.Contains(err.Error(), "failed to fetch NVMe capabilities for device "+dev) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("got %v", err)
	}
	if err := os.WriteFile(dev, []byte("not a device"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = e.nvmeErase(context.Background(), dev)
	if err == nil || !strings.Contains(err.Error(), "Identify Controller on "+dev+": NVME_IOCTL_ADMIN_CMD: inappropriate ioctl for device") {
		t.Fatalf("regular file: %v", err)
	}
}

// qemuExchanges are the recorded exchanges with QEMU 7.2's controller
// (e2e/hw) named by whats, in that order.
func qemuExchanges(t *testing.T, whats ...string) []nvme.Exchange {
	t.Helper()
	raw, err := os.ReadFile("../nvme/testdata/qemu-7.2-nvme.json")
	if err != nil {
		t.Fatal(err)
	}
	all, err := nvme.ParseExchanges(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out []nvme.Exchange
	for _, w := range whats {
		for _, x := range all {
			if x.What == w {
				out = append(out, x)
				break
			}
		}
	}
	if len(out) != len(whats) {
		t.Fatalf("the recording lacks some of %q", whats)
	}
	return out
}

// erase_devices and erase_devices_express on QEMU's controller (Format NVM
// without crypto erase, no Sanitize) send exactly the bytes the kernel
// took to it: IPA's user-data format, and for express the unsupported
// sanitize path, a format too.
func TestNVMeEraseRecordedQEMU(t *testing.T) {
	for _, c := range []struct {
		step string
		run  func(e *Eraser) (DeviceResult, error)
	}{
		{"erase_devices", func(e *Eraser) (DeviceResult, error) { return e.nvmeErase(context.Background(), "/dev/nvme0n1") }},
		{"erase_devices_express", func(e *Eraser) (DeviceResult, error) { return e.nvmeExpress(context.Background(), "/dev/nvme0n1") }},
	} {
		r := &nvme.Replay{NSID: 1, Exchanges: qemuExchanges(t, cmdIDCtrl, cmdIDNS, cmdFormat1)}
		e := &Eraser{Guard: blockdev.NewGuard([]string{"/dev/nvme0n1"}), Root: fakeNVMeSysfs(t, t.TempDir()),
			nvmeOpen: func(string) (nvmeDevice, error) { return r, nil }}
		res, err := c.run(e)
		if err != nil || res.Method != MethodNVMeUserData || r.Sent != 3 {
			t.Errorf("%s: %+v %v after %d exchanges", c.step, res, err, r.Sent)
		}
	}
}
