package nvme

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// The layout of struct nvme_admin_cmd: every field at the offset the
// kernel's header gives it.
func TestCommandLayout(t *testing.T) {
	c := Command{Opcode: 0x80, Flags: 0x01, NSID: 0x11223344, CDW2: 2, CDW3: 3, DataLen: 0x1000,
		CDW10: 10, CDW11: 11, CDW12: 12, CDW13: 13, CDW14: 14, CDW15: 15, TimeoutMS: 0x55667788, Result: 0x99}
	b := c.Marshal(0xdeadbeefcafe)
	le := binary.LittleEndian
	for _, f := range []struct {
		name      string
		off, size int
		want      uint64
	}{
		{"opcode", 0, 1, 0x80}, {"flags", 1, 1, 1}, {"rsvd1", 2, 2, 0}, {"nsid", 4, 4, 0x11223344},
		{"cdw2", 8, 4, 2}, {"cdw3", 12, 4, 3}, {"metadata", 16, 8, 0}, {"addr", 24, 8, 0xdeadbeefcafe},
		{"metadata_len", 32, 4, 0}, {"data_len", 36, 4, 0x1000}, {"cdw10", 40, 4, 10}, {"cdw11", 44, 4, 11},
		{"cdw12", 48, 4, 12}, {"cdw13", 52, 4, 13}, {"cdw14", 56, 4, 14}, {"cdw15", 60, 4, 15},
		{"timeout_ms", 64, 4, 0x55667788}, {"result", 68, 4, 0x99},
	} {
		var got uint64
		switch f.size {
		case 1:
			got = uint64(b[f.off])
		case 2:
			got = uint64(le.Uint16(b[f.off:]))
		case 4:
			got = uint64(le.Uint32(b[f.off:]))
		case 8:
			got = le.Uint64(b[f.off:])
		}
		if got != f.want {
			t.Errorf("%s at %d: %#x, want %#x", f.name, f.off, got, f.want)
		}
	}
	back, err := UnmarshalCommand(b[:])
	if err != nil || back != c {
		t.Errorf("round trip: %+v %v", back, err)
	}
	if _, err := UnmarshalCommand(b[:71]); err == nil {
		t.Error("71 bytes accepted")
	}
	b[16] = 1
	if _, err := UnmarshalCommand(b[:]); err == nil {
		t.Error("a metadata pointer accepted")
	}
}

// The commands' dwords, as nvme-cli 2.3 sends them for `id-ctrl`,
// `id-ns`, `format -s N`, `sanitize -a N` and `sanitize-log`.
func TestCommandBuilders(t *testing.T) {
	ns := Namespace{NLBAF: 4, FLBAS: 0x01, DPS: 0}
	big := Namespace{NLBAF: 20, FLBAS: 0x41 | 0x10, DPS: 0x0b} // format 0x21, MSET, PI 3, PIL
	for _, c := range []struct {
		name string
		cmd  Command
		want string
	}{
		{"identify controller", IdentifyCommand(CNSController, 0), "060000000000000000000000000000000000000000000000000000000000000000000000001000000100000000000000000000000000000000000000000000000000000000000000"},
		{"identify namespace 1", IdentifyCommand(CNSNamespace, 1), "060000000100000000000000000000000000000000000000000000000000000000000000001000000000000000000000000000000000000000000000000000000000000000000000"},
		{"format ses 1, format 1", FormatCommand(1, ns, SESUserData), "80000000010000000000000000000000000000000000000000000000000000000000000000000000010200000000000000000000000000000000000000000000c027090000000000"},
		{"format ses 2, format 0x21 with PI", FormatCommand(1, big, SESCrypto), "80000000010000000000000000000000000000000000000000000000000000000000000000000000712500000000000000000000000000000000000000000000c027090000000000"},
		{"sanitize crypto", SanitizeCommand(SanitizeCryptoErase), "840000000000000000000000000000000000000000000000000000000000000000000000000000000400000000000000000000000000000000000000000000000000000000000000"},
		{"sanitize status log", GetLogPageCommand(LIDSanitizeStatus, SanitizeLogSize), "02000000ffffffff000000000000000000000000000000000000000000000000000000000002000081007f0000000000000000000000000000000000000000000000000000000000"},
	} {
		b := c.cmd.Marshal(0)
		if got := hex.EncodeToString(b[:]); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestParseController(t *testing.T) {
	b := make([]byte, IdentifySize)
	binary.LittleEndian.PutUint16(b[0:], 0x1b36)
	copy(b[4:24], "LAB-NVME-0001       ")
	copy(b[24:64], "QEMU NVMe Ctrl")
	copy(b[64:72], "7.2.22  ")
	binary.LittleEndian.PutUint16(b[256:], 0x000a)
	binary.LittleEndian.PutUint32(b[328:], 0x60000003)
	binary.LittleEndian.PutUint32(b[516:], 256)
	b[524] = 0x04
	c, err := ParseController(b)
	want := Controller{VendorID: 0x1b36, SerialNumber: "LAB-NVME-0001", ModelNumber: "QEMU NVMe Ctrl", Firmware: "7.2.22",
		OACS: 0x0a, SANICAP: 0x60000003, NN: 256, FNA: 4}
	if err != nil || c != want {
		t.Errorf("got %+v %v\nwant %+v", c, err, want)
	}
	if _, err := ParseController(b[:4095]); err == nil {
		t.Error("short page accepted")
	}
}

func TestParseNamespace(t *testing.T) {
	b := make([]byte, IdentifySize)
	binary.LittleEndian.PutUint64(b[0:], 1000)
	b[25] = 1    // two formats
	b[26] = 0x01 // the second
	b[128+2] = 9
	b[132+2] = 12
	n, err := ParseNamespace(b)
	if err != nil || n.LBAFormat() != 1 || n.BlockSize != 4096 || n.Size != 1000 {
		t.Errorf("got %+v %v", n, err)
	}
	b[26] = 0x02 // beyond the list
	if _, err := ParseNamespace(b); err == nil || !strings.Contains(err.Error(), "current LBA format 2 is beyond the 2") {
		t.Errorf("format beyond the list: %v", err)
	}
	binary.LittleEndian.PutUint64(b[0:], 0)
	if _, err := ParseNamespace(b); err == nil {
		t.Error("inactive namespace accepted")
	}
	// More than 16 formats: FLBAS bits 6:5 are the index's high bits.
	n = Namespace{NLBAF: 31, FLBAS: 0x63}
	if n.LBAFormat() != 0x33 {
		t.Errorf("format %#x, want 0x33", n.LBAFormat())
	}
	n.NLBAF = 15
	if n.LBAFormat() != 3 {
		t.Errorf("16 formats: %#x, want 3", n.LBAFormat())
	}
}

func TestStatusError(t *testing.T) {
	for _, c := range []struct {
		status             uint16
		text               string
		field, unsupported bool
	}{
		{0x4002, "NVMe status 0x4002 (type 0, code 0x02: Invalid Field in Command)", true, false},
		{0x4001, "(type 0, code 0x01: Invalid Command Opcode)", false, true},
		{0x4109, "(type 1, code 0x09: Invalid Log Page)", false, true},
		{0x001d, "(type 0, code 0x1d: Sanitize In Progress)", false, false},
		{0x2281, "NVMe status 0x2281 (type 2, code 0x81)", false, false},
	} {
		e := &StatusError{Command: "X on /dev/nvme0n1", Status: c.status}
		if !strings.Contains(e.Error(), c.text) || e.InvalidField() != c.field || e.Unsupported() != c.unsupported {
			t.Errorf("%#x: %q field %v unsupported %v", c.status, e.Error(), e.InvalidField(), e.Unsupported())
		}
	}
	wrapped := errors.Join(errors.New("x"), &StatusError{Status: 0x4002})
	if s, ok := IsStatus(wrapped); !ok || !s.DNR() {
		t.Errorf("IsStatus: %v %v", s, ok)
	}
}

// A context that ended stops a command from being sent.
func TestSubmitAfterCancel(t *testing.T) {
	r := &Replay{NSID: 1}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := IdentifyController(ctx, r); !errors.Is(err, context.Canceled) || r.Sent != 0 {
		t.Errorf("got %v after %d sent", err, r.Sent)
	}
}
