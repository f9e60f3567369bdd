package releasedir

import (
	"strings"
	"testing"
)

// The deployers' readings take a checksum file from a web server: any
// bytes must give a result or an error, never a panic.

func FuzzBifrostDigests(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", 32)+"  ipa.kernel\n"), "ipa.kernel")
	f.Add([]byte("\n\n"), "x")
	f.Fuzz(func(t *testing.T, file []byte, name string) {
		_, _ = BifrostDigests(file, name)
	})
}

func FuzzAnsibleGetURLDigest(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", 32)+" *ipa.kernel\r\n"), "https://h/ipa.kernel")
	f.Add([]byte("x"), "%zz")
	f.Fuzz(func(t *testing.T, file []byte, u string) {
		if d, err := AnsibleGetURLDigest(file, u); err == nil && strings.Trim(d, "0123456789abcdef") != "" {
			t.Fatalf("digest %q is not lower-case hexadecimal", d)
		}
	})
}
