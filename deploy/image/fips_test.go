package image

import (
	"crypto/fips140"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestFIPSMode runs TestFIPSModeInside in a test process of its own in
// Go's FIPS 140-3 mode, which only a process's start can choose.
func TestFIPSMode(t *testing.T) {
	if fips140.Enabled() {
		t.Skip("already in FIPS mode: TestFIPSModeInside runs here")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFIPSModeInside$", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=on")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFIPSModeInside") {
		t.Errorf("in FIPS mode: %v\n%s", err, out)
	}
}

// TestFIPSModeInside: SHA-2 from the standard library's module, MD5
// refused wherever it can come from, with FIPS mode named as the reason.
func TestFIPSModeInside(t *testing.T) {
	if !fips140.Enabled() {
		t.Skip("runs in FIPS mode only (TestFIPSMode starts it so)")
	}
	data := []byte("image bytes")
	h := newHash("sha256")
	h.Write(data)
	want256 := sha256.Sum256(data)
	if hex.EncodeToString(h.Sum(nil)) != hex.EncodeToString(want256[:]) {
		t.Errorf("sha256 differs")
	}
	h = newHash("sha512")
	h.Write(data)
	want512 := sha512.Sum512(data)
	if hex.EncodeToString(h.Sum(nil)) != hex.EncodeToString(want512[:]) {
		t.Errorf("sha512 differs")
	}
	if got := hashImplementation("sha256"); got != "crypto (FIPS 140-3 mode)" {
		t.Errorf("implementation %q", got)
	}
	md5hex := strings.Repeat("a", 32)
	if _, err := algorithmByLength(md5hex, true); !errors.Is(err, errMD5FIPS) {
		t.Errorf("a 32-character checksum: %v", err)
	}
	if _, err := ParseChecksum("md5:" + md5hex); !errors.Is(err, errMD5FIPS) {
		t.Errorf("md5:...: %v", err)
	}
	info := &ImageInfo{URLs: []string{"http://x/i"}, OSHashAlgo: "md5", OSHashValue: md5hex}
	if _, err := resolveChecksum(t.Context(), info, nil, true); err == nil || !strings.Contains(err.Error(), "FIPS mode") {
		t.Errorf("os_hash_algo md5: %v", err)
	}
	if _, err := ParseChecksum("sha256:" + hex.EncodeToString(want256[:])); err != nil {
		t.Errorf("sha256 must stay: %v", err)
	}
}
