package lldp

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// IPA's FAKE_LLDP_PACKET (ironic_python_agent/tests/unit/test_netutils.py):
// an End TLV first, then chassis ID, port ID and TTL, which IPA still reports.
const ipaVector = "0180c200000e885a92365a3988cc" + "0000" + "020704885a92ec5459" +
	"040d0545746865726e6574312f3138" + "06020078"

func TestParseFrameIPAVector(t *testing.T) {
	got := jsonOf(t, ParseFrame(mustHex(t, ipaVector)))
	want := `[[0,""],[1,"04885a92ec5459"],[2,"0545746865726e6574312f3138"],[3,"0078"]]`
	if got != want {
		t.Errorf("IPA vector:\n got %s\nwant %s", got, want)
	}
}

func TestParseFrame(t *testing.T) {
	const hdr = "0180c200000e 020000000001 88cc"
	for _, tc := range []struct {
		name, frame, want string
	}{
		{"empty frame", "", `[]`},
		{"13 bytes", "0180c200000e0200000000018", `[]`}, // odd digit dropped below
		{"header only", hdr, `[]`},
		{"one byte after the header is ignored", hdr + "02", `[]`},
		{"End TLV", hdr + "0000", `[[0,""]]`},
		{"zero padding after End is reported, as IPA does", hdr + "0000 0000 0000", `[[0,""],[0,""],[0,""]]`},
		{"TLV longer than the frame keeps what is there", hdr + "0a10 414243", `[[5,"414243"]]`},
		{"TLV header cut in half", hdr + "0203 aabbcc 06", `[[1,"aabbcc"]]`},
		{"maximum length 511", hdr + "0bff" + strings.Repeat("61", 511), `[[5,"` + strings.Repeat("61", 511) + `"]]`},
		{"type 127 with an unknown OUI", hdr + "fe06 123456 09 dead 0000", `[[127,"12345609dead"],[0,""]]`},
		{"reserved type 9", hdr + "1202 beef", `[[9,"beef"]]`},
		{"upper-case bytes become lower-case hex", hdr + "0a02 ABCD", `[[5,"abcd"]]`},
		{"802.1Q tag is skipped", "0180c200000e 020000000001 8100 0064 88cc 0207 04aabbccddeeff", `[[1,"04aabbccddeeff"]]`},
		{"802.1ad + 802.1Q tags are skipped", "0180c200000e 020000000001 88a8 00c8 8100 0064 88cc 0601 00", `[[3,"00"]]`},
		{"a tag with nothing after it is not a tag", "0180c200000e 020000000001 8100 0064", `[[0,""]]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := strings.ReplaceAll(tc.frame, " ", "")
			if len(s)%2 == 1 {
				s = s[:len(s)-1]
			}
			got := jsonOf(t, ParseFrame(mustHex(t, s)))
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestDecodeHexRejectsBadHex(t *testing.T) {
	_, err := Decode([]inventory.LLDPTLV{{Type: 1, Value: "04aa"}, {Type: 5, Value: "zz"}})
	if err == nil || !strings.Contains(err.Error(), "TLV 1 (type 5)") {
		t.Fatalf("want an error naming TLV 1 of type 5, got %v", err)
	}
}

// BenchmarkParseFrame parses a typical 166-byte lldpd frame (chassis, port,
// TTL, names, capabilities, management address, 802.1/802.3 TLVs).
func BenchmarkParseFrame(b *testing.B) {
	frame := mustHex(b, "0180c200000e02112233445588cc020704021122334455040c0745746865726e6574312f31060200780a0d746573742d7377697463682d310c0b7465737420737769746368"+
		"0e04009c00801018050100000000020000000200fe0600120f030100fe0900120f010080000036fe060080c2010064fe110080c20300640a70726f766973696f6e310000")
	b.ReportAllocs()
	for b.Loop() {
		ParseFrame(frame)
	}
}
