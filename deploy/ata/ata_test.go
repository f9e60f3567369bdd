package ata_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/ata"
	"github.com/ironic-go/ironic-agent/deploy/ata/atatest"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The CDBs hdparm 9.65 sends for the same commands (sgio.c's sg16 with
// CK_COND, 28-bit): the bytes libata's ata_scsi_pass_thru decodes.
func TestCDB16(t *testing.T) {
	for _, c := range []struct {
		name string
		cmd  ata.Command
		want string
	}{
		{"IDENTIFY DEVICE", ata.Command{Protocol: ata.ProtocolPIOIn, Command: ata.OpIdentify, Count: 1},
			"85 08 2e 00 00 00 01 00 00 00 00 00 00 00 ec 00"},
		{"SECURITY SET PASSWORD", ata.Command{Protocol: ata.ProtocolPIOOut, Command: ata.OpSecuritySetPassword, Count: 1},
			"85 0a 26 00 00 00 01 00 00 00 00 00 00 00 f1 00"},
		{"SECURITY ERASE PREPARE", ata.Command{Protocol: ata.ProtocolNonData, Command: ata.OpSecurityErasePrepare},
			"85 06 20 00 00 00 00 00 00 00 00 00 00 00 f3 00"},
		{"28-bit LBA and features", ata.Command{Protocol: ata.ProtocolNonData, Command: 0xef, Features: 0x02, Count: 3, LBA: 0x0abcdef1, Device: 0x40},
			"85 06 20 00 02 00 03 00 f1 00 de 00 bc 4a ef 00"},
	} {
		got := ata.CDB16(c.cmd)
		if want := unhex(t, c.want); !bytes.Equal(got[:], want) {
			t.Errorf("%s: CDB % x, want % x", c.name, got, want)
		}
	}
}

func TestPasswordBlock(t *testing.T) {
	pw, ok := ata.NewPassword("NULL")
	if !ok {
		t.Fatal("ata.NewPassword(NULL) refused")
	}
	b := ata.PasswordBlock(ata.User, pw, true)
	if len(b) != ata.SectorSize || b[0] != 0x02 || b[1] != 0 || string(b[2:6]) != "NULL" {
		t.Fatalf("block starts % x", b[:8])
	}
	for i, c := range b[6:] {
		if c != 0 {
			t.Fatalf("byte %d is %02x, want 0", 6+i, c)
		}
	}
	if b := ata.PasswordBlock(ata.Master, ata.Password{}, false); b[0] != 0x01 {
		t.Errorf("master identifier: word 0 = %02x", b[0])
	}
	if _, ok := ata.NewPassword(strings.Repeat("x", 33)); ok {
		t.Error("a 33-byte password was accepted")
	}
	if p, ok := ata.NewPassword(strings.Repeat("x", 32)); !ok || p[31] != 'x' {
		t.Error("a 32-byte password was refused")
	}
}

func TestIdentifySecurityAndTimes(t *testing.T) {
	base := make([]byte, ata.SectorSize)
	for _, c := range []struct {
		w128, w89, w90 uint16
		want           ata.Security
		normal, enh    time.Duration // 0: no estimate
	}{
		{0, 0, 0, ata.Security{}, 0, 0},
		{0x0021, 1, 1, ata.Security{Supported: true, EnhancedErase: true}, 2 * time.Minute, 2 * time.Minute},
		{0x0001, 30, 0, ata.Security{Supported: true}, time.Hour, 0},
		{0x0029, 0xff, 0x8000 | 300, ata.Security{Supported: true, Frozen: true, EnhancedErase: true}, 0, 600 * time.Minute},
		{0x0117, 0x8000, 2, ata.Security{Supported: true, Enabled: true, Locked: true, CountExpired: true, MasterMaximum: true}, 0, 4 * time.Minute},
	} {
		id, err := ata.ParseIdentify(atatest.WithSecurity(base, c.w128, c.w89, c.w90))
		if err != nil {
			t.Fatal(err)
		}
		if got := id.Security(); got != c.want {
			t.Errorf("word 128 %04x: %+v, want %+v", c.w128, got, c.want)
		}
		for _, e := range []struct {
			enhanced bool
			want     time.Duration
		}{{false, c.normal}, {true, c.enh}} {
			d, ok := id.EraseTime(e.enhanced)
			if ok != (e.want != 0) || d != e.want {
				t.Errorf("words 89/90 %04x/%04x enhanced=%v: %v %v, want %v", c.w89, c.w90, e.enhanced, d, ok, e.want)
			}
			timeout := id.EraseTimeout(e.enhanced)
			if e.want == 0 && timeout != 12*time.Hour || e.want != 0 && timeout != 2*e.want+10*time.Minute {
				t.Errorf("timeout %v for estimate %v", timeout, e.want)
			}
		}
	}
}

func TestParseIdentifyRefuses(t *testing.T) {
	good := atatest.WithSecurity(make([]byte, ata.SectorSize), 1, 0, 0)
	if _, err := ata.ParseIdentify(good[:511]); err == nil {
		t.Error("short data accepted")
	}
	bad := bytes.Clone(good)
	bad[20]++
	if _, err := ata.ParseIdentify(bad); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("checksum: %v", err)
	}
	atapi := make([]byte, ata.SectorSize)
	atapi[1] = 0x85 // word 0 = 8500h: ATAPI CD-ROM
	if _, err := ata.ParseIdentify(atapi); err == nil || !strings.Contains(err.Error(), "not an ATA device") {
		t.Errorf("ATAPI: %v", err)
	}
}

// ata.Sense data as libata builds it for ATA PASS-THROUGH with CK_COND.
const (
	// Descriptor format, RECOVERED ERROR, 00h/1Dh, status 50h: success.
	senseDescOK = "72 01 00 1d 00 00 00 0e 09 0c 00 00 00 01 00 00 00 00 00 00 40 50"
	// Descriptor format, ABORTED COMMAND, status 51h error 04h: aborted.
	senseDescAbort = "72 0b 00 00 00 00 00 0e 09 0c 00 04 00 00 00 00 00 00 00 00 40 51"
	// Fixed format of the same abort (a device with D_SENSE off), with
	// VALID as SAT-3 and Linux 6.10 lay it out.
	senseFixedAbort = "f0 00 0b 04 51 40 00 0a 00 00 00 00 00 00 00 00 00 00"
	// The same from Linux 6.1 (VALID clear, registers from byte 8).
	senseFixedAbortLinux61 = "70 00 0b 00 00 00 00 0a 04 51 40 00 00 00 00 00 00 00"
	// A SCSI disk that does not know opcode 85h: ILLEGAL REQUEST 20h/00h.
	senseFixedInvalidOpcode = "70 00 05 00 00 00 00 0a 00 00 00 00 20 00 00 00 00 00"
)

func TestParseSense(t *testing.T) {
	for _, c := range []struct {
		name, hex string
		want      ata.Sense
	}{
		{"descriptor ok", senseDescOK, ata.Sense{Key: 1, ASCQ: 0x1d, HasATA: true, Status: 0x50, Count: 1, Device: 0x40}},
		{"descriptor abort", senseDescAbort, ata.Sense{Key: 0xb, HasATA: true, Status: 0x51, Error: 0x04, Device: 0x40}},
		{"fixed abort", senseFixedAbort, ata.Sense{Key: 0xb, HasATA: true, Status: 0x51, Error: 0x04, Device: 0x40}},
		{"fixed abort, Linux 6.1", senseFixedAbortLinux61, ata.Sense{Key: 0xb, HasATA: true, Status: 0x51, Error: 0x04, Device: 0x40}},
		{"fixed invalid opcode", senseFixedInvalidOpcode, ata.Sense{Key: 5, ASC: 0x20}},
	} {
		got, err := ata.ParseSense(unhex(t, c.hex))
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "00 00", "72 0b 00 00 00 00 00 0e 09 0c 00", "72 01 00 1d 00 00 00 04 09 02 00 00", "70 00 0b"} {
		if s, err := ata.ParseSense(unhex(t, bad)); err == nil {
			t.Errorf("%q parsed as %+v", bad, s)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name    string
		reply   ata.Reply
		ok      bool
		aborted bool
		errPart string
	}{
		{"good, no sense", ata.Reply{}, true, false, ""},
		{"CK_COND answer", ata.Reply{Status: 2, DriverStatus: 8, Sense: unhex(t, senseDescOK)}, true, false, ""},
		{"aborted", ata.Reply{Status: 2, DriverStatus: 8, Sense: unhex(t, senseDescAbort)}, false, true, "the drive aborted it"},
		{"aborted, fixed", ata.Reply{Status: 2, DriverStatus: 8, Sense: unhex(t, senseFixedAbort)}, false, true, "ATA status 51h, error 04h (command aborted)"},
		{"not ATA", ata.Reply{Status: 2, DriverStatus: 8, Sense: unhex(t, senseFixedInvalidOpcode)}, false, false, "does not accept ATA PASS-THROUGH"},
		{"transport", ata.Reply{HostStatus: 3}, false, false, "host status 0003h"},
		{"busy", ata.Reply{Status: 8}, false, false, "SCSI status 08h"},
		{"check condition without sense", ata.Reply{Status: 2}, false, false, "without sense"},
		{"garbled sense", ata.Reply{Status: 2, Sense: []byte{0x7f}}, false, false, "response code 7fh"},
	} {
		err := ata.Check("/dev/sdz", ata.OpSecurityUnlock, c.reply)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err == nil {
			continue
		}
		var ce *ata.CommandError
		if !errors.As(err, &ce) || ce.Aborted() != c.aborted {
			t.Errorf("%s: %#v aborted=%v", c.name, err, c.aborted)
		}
		for _, want := range []string{"SECURITY UNLOCK (F2h)", "/dev/sdz", c.errPart} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q lacks %q", c.name, err, want)
			}
		}
	}
}

// replyPasser answers every request with one reply and keeps the last
// request.
type replyPasser struct {
	reply ata.Reply
	data  []byte // copied into a data-in buffer
	got   *ata.Request
}

func (p *replyPasser) Pass(_ context.Context, _ string, r *ata.Request) (ata.Reply, error) {
	p.got = r
	if r.Dir == ata.DirIn {
		copy(r.Data, p.data)
	}
	return p.reply, nil
}

func TestDriveCommands(t *testing.T) {
	ctx := context.Background()
	p := &replyPasser{reply: ata.Reply{Status: 2, DriverStatus: 8, Sense: unhex(t, senseDescOK)}, data: atatest.WithSecurity(make([]byte, ata.SectorSize), 0x21, 1, 1)}
	d := ata.Drive{Path: "/dev/sdz", Passer: p}
	id, err := d.Identify(ctx)
	if err != nil || !id.Security().Supported || p.got.Dir != ata.DirIn || len(p.got.Data) != ata.SectorSize {
		t.Fatalf("Identify: %+v %v, request %+v", id.Security(), err, p.got)
	}
	if err := d.Erase(ctx, ata.Password{}, true, time.Hour); err != nil {
		t.Fatal(err)
	}
	if p.got.CDB[14] != ata.OpSecurityEraseUnit || p.got.Dir != ata.DirOut || p.got.Data[0] != 0x02 || p.got.Timeout != time.Hour {
		t.Errorf("ERASE UNIT request %+v", p.got)
	}
	for _, f := range []func(context.Context, ata.Password) error{d.SetPassword, d.Unlock, d.DisablePassword} {
		if err := f(ctx, ata.Password{}); err != nil || p.got.Dir != ata.DirOut || p.got.Data[0] != 0 {
			t.Errorf("%v, request %+v", err, p.got)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	p.got = nil
	if err := d.Unlock(cancelled, ata.Password{}); !errors.Is(err, context.Canceled) || p.got != nil {
		t.Errorf("cancelled context: %v, sent %v", err, p.got)
	}
	p.reply.Sense = unhex(t, senseDescAbort)
	if _, err := d.Identify(ctx); err == nil {
		t.Error("aborted IDENTIFY accepted")
	}
}

// TestRecordedQEMU reads what Linux 6.1's libata returned through SG_IO
// for QEMU's two SATA disks (testdata/qemu, see its README): IDENTIFY
// DEVICE parses and names the disk, the security feature set is absent,
// and the security commands were aborted by the drive.
func TestRecordedQEMU(t *testing.T) {
	for slug, want := range map[string]struct{ model, serial string }{
		"lab-sata-hdd": {"LAB SATA HDD", "LAB-SATA-0001"},
		"lab-sata-ssd": {"LAB SATA SSD", "LAB-SATA-0002"},
	} {
		t.Run(slug, func(t *testing.T) {
			read := func(suffix string) []byte {
				b, err := os.ReadFile(filepath.Join("testdata", "qemu", slug+suffix))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			reply := func(name string) ata.Reply {
				var r struct {
					Status       byte   `json:"status"`
					HostStatus   uint16 `json:"host_status"`
					DriverStatus uint16 `json:"driver_status"`
				}
				if err := json.Unmarshal(read("."+name+".json"), &r); err != nil {
					t.Fatal(err)
				}
				return ata.Reply{Status: r.Status, HostStatus: r.HostStatus, DriverStatus: r.DriverStatus, Sense: read("." + name + ".sense")}
			}
			id, err := ata.ParseIdentify(read(".identify"))
			if err != nil {
				t.Fatal(err)
			}
			if id.Model() != want.model || id.Serial() != want.serial || id.Firmware() == "" {
				t.Errorf("model %q serial %q firmware %q", id.Model(), id.Serial(), id.Firmware())
			}
			if s := id.Security(); s != (ata.Security{}) || id.Words[82]&(1<<1) != 0 {
				t.Errorf("security %+v, word 82 %04x: QEMU has no security feature set", s, id.Words[82])
			}
			if _, ok := id.EraseTime(false); ok {
				t.Error("an erase time estimate from a drive without the feature set")
			}
			if err := ata.Check("/dev/sda", ata.OpIdentify, reply("identify")); err != nil {
				t.Errorf("IDENTIFY's reply is a failure: %v", err)
			}
			for _, c := range []struct {
				name string
				op   byte
			}{{"erase-prepare", ata.OpSecurityErasePrepare}, {"unlock", ata.OpSecurityUnlock}} {
				err := ata.Check("/dev/sda", c.op, reply(c.name))
				var ce *ata.CommandError
				if !errors.As(err, &ce) || !ce.Aborted() {
					t.Errorf("%s: %v, want an abort by the drive", c.name, err)
				}
			}
		})
	}
}
