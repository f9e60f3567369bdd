package udev

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// The regular expressions the name matchers replace, as the oracle.
var nameOracles = []struct {
	name  string
	re    *regexp.Regexp
	match func(string) bool
}{
	{"pci", regexp.MustCompile(`^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`), IsPCIName},
	{"hctl", regexp.MustCompile(`^(\d+):(\d+):(\d+):(\d+)$`), isHCTL},
	{"host", regexp.MustCompile(`^host\d+$`), isSCSIHost},
	{"target", regexp.MustCompile(`^target\d+:\d+:\d+$`), isSCSITarget},
	{"virtio", regexp.MustCompile(`^virtio\d+$`), func(s string) bool { return isNumbered(s, "virtio") }},
	{"nvme", regexp.MustCompile(`^nvme\d+$`), func(s string) bool { return isNumbered(s, "nvme") }},
	{"nvme-subsys", regexp.MustCompile(`^nvme-subsys\d+$`), func(s string) bool { return isNumbered(s, "nvme-subsys") }},
	{"usb", regexp.MustCompile(`^(usb\d+|\d+-[\d.]+(:\d+\.\d+)?)$`), isUSBDevice},
}

var nameSeeds = []string{
	"", "0000:00:1f.2", "0000:00:1f.8", "10000:3c:00.0", "000:00:1f.2", "0000:00:1F.2", "0000:00:1f.2:0",
	"0:0:0:0", "4:2:0:16384", "0:0:0", "0:0:0:0:0", "0:0::0", "a:0:0:0",
	"host0", "host", "host12x", "target0:0:1", "target0:0", "target0:0:1:2", "target:0:1",
	"virtio3", "virtio", "nvme0", "nvme0n1", "nvme-subsys0", "nvme-subsys",
	"usb1", "usb", "1-1", "1-1.2", "1-1.2:1.0", "1-1.2:1", "1-1.2:1.0.1", "1-", "-1", "1-.", "1-1:1.0:2.0", "1-1-1", "2-1.4.3:1.0",
}

func TestNameMatchersAgreeWithRegexps(t *testing.T) {
	alphabet := "0123456789abcfF.:-hostargeviunmbsy"
	r := rand.New(rand.NewPCG(22, 3))
	names := append([]string{}, nameSeeds...)
	for range 200000 {
		b := make([]byte, r.IntN(14))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		names = append(names, string(b))
	}
	for _, o := range nameOracles {
		for _, s := range names {
			if got, want := o.match(s), o.re.MatchString(s); got != want {
				t.Errorf("%s %q: matcher says %v, regexp %v", o.name, s, got, want)
			}
		}
	}
	for _, s := range names {
		m := nameOracles[1].re.FindStringSubmatch(s)
		got, ok := HCTL(s)
		if (m != nil) != ok || ok && got != [4]string{m[1], m[2], m[3], m[4]} {
			t.Errorf("HCTL(%q) = %v, %v; regexp %v", s, got, ok, m)
		}
	}
}

func FuzzNameMatchers(f *testing.F) {
	for _, s := range nameSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, o := range nameOracles {
			if got, want := o.match(s), o.re.MatchString(s); got != want {
				t.Errorf("%s %q: matcher says %v, regexp %v", o.name, s, got, want)
			}
		}
	})
}
