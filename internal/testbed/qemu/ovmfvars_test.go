package qemu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetSecureBootEnable switches Secure Boot off and on again in a copy
// of ovmf's store with Microsoft's keys: only SecureBootEnable's data
// byte changes; a store without keys, or a file that is no store, is an
// error that says so.
func TestSetSecureBootEnable(t *testing.T) {
	orig, err := os.ReadFile(OVMFSecureBootVars)
	if err != nil {
		t.Skipf("SKIPPED: needs ovmf's Secure Boot variables (test.sh installs ovmf): %v", err)
	}
	at, err := secureBootEnableData(orig)
	if err != nil {
		t.Fatal(err)
	}
	if orig[at] != 1 {
		t.Fatalf("%s: SecureBootEnable is %d, want 1", OVMFSecureBootVars, orig[at])
	}
	p := filepath.Join(t.TempDir(), "vars.fd")
	if err := os.WriteFile(p, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{false, false, true} {
		if err := SetSecureBootEnable(p, on); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]byte(nil), orig...)
		if !on {
			want[at] = 0
		}
		if string(got) != string(want) {
			t.Errorf("after SetSecureBootEnable(%v) the store differs from the original but for byte %#x = %d", on, at, want[at])
		}
	}

	if empty, err := os.ReadFile(OVMFVars); err == nil {
		if _, err := secureBootEnableData(empty); err == nil || !strings.Contains(err.Error(), "no SecureBootEnable variable") {
			t.Errorf("%s (no keys): %v, want no SecureBootEnable variable", OVMFVars, err)
		}
	}
	if _, err := secureBootEnableData(make([]byte, 4096)); err == nil || !strings.Contains(err.Error(), "not an OVMF variable store") {
		t.Errorf("zeros: %v, want not an OVMF variable store", err)
	}
	// A variable whose sizes run past the end of the file.
	bad := append([]byte(nil), orig[:at+1]...)
	if _, err := secureBootEnableData(bad[:at-10]); err == nil {
		t.Error("a truncated store: no error")
	}
}
