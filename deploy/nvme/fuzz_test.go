package nvme

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParsers feeds arbitrary bytes to every parser of controller data:
// Identify Controller and Namespace, the Sanitize Status log page and a
// struct nvme_admin_cmd. None may panic; what parses must hold together.
func FuzzParsers(f *testing.F) {
	ns := make([]byte, IdentifySize)
	binary.LittleEndian.PutUint64(ns[0:], 1<<20)
	ns[128+2] = 9
	f.Add(ns)
	f.Add(make([]byte, IdentifySize))
	f.Add(make([]byte, SanitizeLogSize))
	f.Add([]byte{})
	b := IdentifyCommand(CNSController, 0)
	m := b.Marshal(0)
	f.Add(m[:])
	// The pages recorded from QEMU's NVMe controller.
	if recs, _ := filepath.Glob(filepath.Join("testdata", "*.json")); len(recs) > 0 {
		for _, p := range recs {
			raw, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			xs, err := ParseExchanges(raw)
			if err != nil {
				f.Fatal(err)
			}
			for _, x := range xs {
				f.Add(mustHex(x.Data))
				f.Add(mustHex(x.Command))
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := ParseController(b); err == nil && len(b) != IdentifySize {
			t.Fatalf("controller %+v from %d bytes", c, len(b))
		}
		if n, err := ParseNamespace(b); err == nil {
			if n.LBAFormat() > n.NLBAF || n.Size == 0 {
				t.Fatalf("namespace %+v accepted", n)
			}
			if c := FormatCommand(1, n, SESCrypto); c.CDW10>>9&7 != SESCrypto || (c.CDW10&0xf|c.CDW10>>12&3<<4) != uint32(n.LBAFormat()) {
				t.Fatalf("format of %+v: cdw10 %#x", n, c.CDW10)
			}
		}
		if l, err := ParseSanitizeLog(b); err == nil && (len(b) != SanitizeLogSize || l.State() > 7) {
			t.Fatalf("log %+v from %d bytes", l, len(b))
		}
		if c, err := UnmarshalCommand(b); err == nil {
			back := c.Marshal(binary.LittleEndian.Uint64(b[24:]))
			// rsvd1 is not kept.
			want := append([]byte(nil), b...)
			want[2], want[3] = 0, 0
			if string(back[:]) != string(want) {
				t.Fatalf("command %x does not round-trip: %x", b, back)
			}
		}
	})
}

// FuzzParseExchanges feeds arbitrary bytes as a recorded exchange file
// and replays what parses: a replay never panics on what it accepted.
func FuzzParseExchanges(f *testing.F) {
	f.Add([]byte(`[{"command":"` + string(make([]byte, 0)) + `"}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"command":"060000000000000000000000000000000000000000000000000000000000000000000000001000000100000000000000000000000000000000000000000000000000000000000000","data":"00"}]`))
	if recs, _ := filepath.Glob(filepath.Join("testdata", "*.json")); len(recs) > 0 {
		raw, err := os.ReadFile(recs[0])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		xs, err := ParseExchanges(b)
		if err != nil {
			return
		}
		r := &Replay{NSID: 1, Exchanges: xs}
		for range xs {
			c := IdentifyCommand(CNSController, 0)
			_ = r.Admin(&c, make([]byte, IdentifySize))
		}
	})
}
