package devmapper

import (
	"encoding/binary"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The ioctl numbers libdevmapper uses (strace of dmsetup on amd64).
func TestIoctlNumbers(t *testing.T) {
	for nr, want := range map[uint32]uint32{cmdVersion: 0xc138fd00, cmdDevCreate: 0xc138fd03, cmdSuspend: 0xc138fd06, cmdTableLoad: 0xc138fd09,
		cmdTableStatus: 0xc138fd0c, cmdTargetMsg: 0xc138fd0e} {
		if got := ioctlNumber(nr); got != want {
			t.Errorf("ioctl %d: %#x, want %#x", nr, got, want)
		}
	}
}

// DM_TABLE_LOAD's layout: data_size, data_start, target_count, the name,
// then each spec with "next" pointing 8-aligned past its parameters.
func TestTableLoadLayout(t *testing.T) {
	table := []Target{Linear(0, 2048, "/dev/vda", 0), {Start: 2048, Length: 8, Type: "error"},
		{Start: 2056, Length: 100, Type: "delay", Params: "/dev/vda 2056 50"}}
	b, err := tableLoad("fd-write", table)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if got := le.Uint32(b[12:]); int(got) != len(b) {
		t.Errorf("data_size %d, buffer %d", got, len(b))
	}
	if le.Uint32(b[16:]) != ioctlSize || le.Uint32(b[20:]) != 3 || le.Uint32(b[0:]) != 4 {
		t.Errorf("data_start %d target_count %d version %d", le.Uint32(b[16:]), le.Uint32(b[20:]), le.Uint32(b[0:]))
	}
	if name := strings.TrimRight(string(b[48:48+nameLen]), "\x00"); name != "fd-write" {
		t.Errorf("name %q", name)
	}
	off := ioctlSize
	for i, want := range table {
		spec := b[off:]
		next := int(le.Uint32(spec[20:]))
		if next%8 != 0 || off+next > len(b) {
			t.Fatalf("target %d: next %d", i, next)
		}
		typ := strings.TrimRight(string(spec[24:24+typeNameLen]), "\x00")
		params, _, _ := strings.Cut(string(spec[targetSpecSize:next]), "\x00")
		got := Target{Start: le.Uint64(spec[0:]), Length: le.Uint64(spec[8:]), Type: typ, Params: params}
		if got != want {
			t.Errorf("target %d: %+v, want %+v", i, got, want)
		}
		off += next
	}
	if off != len(b) {
		t.Errorf("specs end at %d of %d", off, len(b))
	}
	if _, err := tableLoad(strings.Repeat("x", nameLen), table); err == nil {
		t.Error("a 128-byte name was accepted")
	}
	if _, err := tableLoad("x", nil); err == nil {
		t.Error("an empty table was accepted")
	}
}

// DM_DEV_CREATE carries the UUID right after the 128-byte name, within
// its 129 bytes and NUL-terminated.
func TestCreateHeaderUUID(t *testing.T) {
	uuid := "mpath-35000c500a1b2c3d4"
	b, err := createHeader("35000c500a1b2c3d4", uuid)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimRight(string(b[48+nameLen:48+nameLen+uuidLen]), "\x00"); got != uuid {
		t.Errorf("uuid field %q, want %q", got, uuid)
	}
	if got := strings.TrimRight(string(b[48:48+nameLen]), "\x00"); got != "35000c500a1b2c3d4" {
		t.Errorf("name field %q", got)
	}
	if _, err := createHeader("x", strings.Repeat("u", uuidLen)); err == nil {
		t.Error("a 129-byte UUID was accepted")
	}
	if _, err := createHeader("x", "a\x00b"); err == nil {
		t.Error("a UUID with a NUL was accepted")
	}
}

func TestDecodeDev(t *testing.T) {
	// huge_encode_dev(MKDEV(253, 300)) = (300 & 0xff) | 253<<8 | (300 &^ 0xff)<<12
	dev := uint64(300&0xff) | 253<<8 | uint64(300&^0xff)<<12
	if ma, mi := decodeDev(dev); ma != 253 || mi != 300 {
		t.Errorf("decodeDev: %d:%d, want 253:300", ma, mi)
	}
}

// TestOpen says whether device-mapper works here; where it does not (no
// dm_mod, a sandboxed kernel) the VM tests (e2e/faildisk, the multipath
// test of e2e/vm) carry the device-mapper scenarios.
func TestOpen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: opens /dev/mapper/control")
	}
	c, err := Open()
	if err != nil {
		t.Skipf("SKIPPED: device-mapper is not usable on this kernel (e2e/faildisk and e2e/vm's multipath test use it in the ramdisk VM): %v", err)
	}
	defer c.Close()
	v, err := c.Version()
	if err != nil || !strings.HasPrefix(v, "4.") {
		t.Fatalf("DM version %q, %v", v, err)
	}
	t.Logf("device-mapper ioctl version %s", v)
}

// statusAnswer builds a DM_TABLE_STATUS answer as the kernel's
// retrieve_status writes it: each spec, its text, padded to 8 bytes, with
// "next" the offset of the following spec from data_start.
func statusAnswer(targets []Target, slack int) []byte {
	var data []byte
	for _, t := range targets {
		at := len(data)
		spec := make([]byte, targetSpecSize)
		binary.LittleEndian.PutUint64(spec[0:], t.Start)
		binary.LittleEndian.PutUint64(spec[8:], t.Length)
		copy(spec[24:], t.Type)
		data = append(data, spec...)
		data = append(data, t.Params...)
		data = append(data, 0)
		for len(data)%8 != 0 {
			data = append(data, 0)
		}
		binary.LittleEndian.PutUint32(data[at+20:], uint32(len(data)))
	}
	b, _ := header("mp", 0, ioctlSize+len(data)+slack)
	binary.LittleEndian.PutUint32(b[12:], uint32(ioctlSize+len(data)))
	binary.LittleEndian.PutUint32(b[20:], uint32(len(targets)))
	copy(b[ioctlSize:], data)
	return b
}

func TestParseTargets(t *testing.T) {
	want := []Target{
		{Start: 0, Length: 10485760, Type: "multipath", Params: "2 0 0 0 1 1 A 0 2 2 8:0 A 0 0 1 8:16 A 0 0 1"},
		{Start: 10485760, Length: 8, Type: "error"},
		{Start: 10485768, Length: 100, Type: "linear", Params: "8:0 2048"},
	}
	for _, n := range []int{1, 3} {
		got, err := parseTargets(statusAnswer(want[:n], 4096))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want[:n]) {
			t.Errorf("%d targets: %+v, want %+v", n, got, want[:n])
		}
	}
	if got, err := parseTargets(statusAnswer(nil, 0)); err != nil || len(got) != 0 {
		t.Errorf("no table: %v, %v", got, err)
	}
	good := statusAnswer(want, 0)
	for name, bad := range map[string][]byte{
		"short":            good[:100],
		"data past buffer": good[:len(good)-8],
		"count too high": func() []byte {
			b := slices.Clone(good)
			binary.LittleEndian.PutUint32(b[20:], 9)
			return b
		}(),
		"text without end": func() []byte {
			b := statusAnswer(want[:1], 0)
			for i := ioctlSize + targetSpecSize; i < len(b); i++ {
				b[i] = 'x'
			}
			return b
		}(),
		"next going back": func() []byte {
			b := slices.Clone(good)
			binary.LittleEndian.PutUint32(b[ioctlSize+20:], 0)
			return b
		}(),
	} {
		if _, err := parseTargets(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzParseTargets: any answer gives targets or an error, never a panic.
func FuzzParseTargets(f *testing.F) {
	f.Add(statusAnswer([]Target{{Length: 8, Type: "multipath", Params: "2 0 0 0 0 0"}}, 0))
	f.Add(statusAnswer([]Target{{Length: 8, Type: "error"}, {Start: 8, Length: 8, Type: "linear", Params: "8:0 0"}}, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseTargets(b)
	})
}

// DM_TARGET_MSG: struct dm_target_msg after the header, sector 0, then
// the NUL-terminated message, the whole padded to 8 bytes.
func TestMessageBuffer(t *testing.T) {
	b, err := messageBuffer("35000c500a1b2c3d4", "reinstate_path 8:16")
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(b)%8 != 0 || int(le.Uint32(b[12:])) != len(b) || le.Uint32(b[16:]) != ioctlSize {
		t.Errorf("size %d, data_size %d, data_start %d", len(b), le.Uint32(b[12:]), le.Uint32(b[16:]))
	}
	if le.Uint64(b[ioctlSize:]) != 0 {
		t.Error("sector not 0")
	}
	if msg, _, _ := strings.Cut(string(b[ioctlSize+8:]), "\x00"); msg != "reinstate_path 8:16" {
		t.Errorf("message %q", msg)
	}
	for _, bad := range []string{"", "a\x00b"} {
		if _, err := messageBuffer("x", bad); err == nil {
			t.Errorf("message %q accepted", bad)
		}
	}
}
