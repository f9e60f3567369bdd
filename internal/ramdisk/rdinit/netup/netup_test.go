package netup

import "testing"

func TestNormalizeMAC(t *testing.T) {
	for in, want := range map[string]string{
		"52:54:00:AB:cd:01": "52:54:00:ab:cd:01",
		"52-54-00-ab-cd-01": "52:54:00:ab:cd:01",
		"52:54:00":          "",
		"52:54:00:ab:cd:1":  "",
		"52:54:00:ab:cd:0g": "",
		// EUI-64 and InfiniBand addresses parse, but are no Ethernet MAC.
		"02:00:00:00:00:00:00:01": "",
		"":                        "",
		"eth0":                    "",
	} {
		got, err := NormalizeMAC(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("NormalizeMAC(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
