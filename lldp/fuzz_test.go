package lldp

import (
	"encoding/hex"
	"strings"
	"testing"
)

// FuzzParseFrame checks that any frame parses without a panic into TLVs
// whose values are lowercase hex, whose headers plus values never claim
// more bytes than the frame had, and that the decoder accepts the result.
func FuzzParseFrame(f *testing.F) {
	f.Add(mustHex(f, ipaVector))
	f.Add(mustHex(f, "0180c200000e02000000000188cc0000"))
	f.Add(mustHex(f, "0180c200000e020000000001810000c888cc0207041122334455660a02ffff"))
	f.Add(mustHex(f, "0180c200000e02000000000188ccfe0900120f030300000002fe060080c2010066"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		got := ParseFrame(frame)
		if got == nil {
			t.Fatal("nil list; IPA reports []")
		}
		used := 0
		for _, tlv := range got {
			if tlv.Type < 0 || tlv.Type > 127 {
				t.Fatalf("type %d out of range", tlv.Type)
			}
			if tlv.Value != strings.ToLower(tlv.Value) {
				t.Fatalf("upper-case hex %q", tlv.Value)
			}
			if _, err := hex.DecodeString(tlv.Value); err != nil {
				t.Fatalf("bad hex %q: %v", tlv.Value, err)
			}
			used += 2 + len(tlv.Value)/2
		}
		if used > len(frame) {
			t.Fatalf("TLVs cover %d bytes of a %d-byte frame", used, len(frame))
		}
		n, err := Decode(got)
		if err != nil {
			t.Fatalf("decoding our own output: %v", err)
		}
		_ = n
	})
}
